// What muster-sim compares: named policies (a queue order and a backfill), the RLScheduler
// paper's protocol of sampled job sequences, and the mean with its 95% interval over them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/sim/metrics.h"
#include "muster/sim/trace.h"

namespace muster::sim {

// ORDER[+BACKFILL][/FILL][@PLACEMENT]: ORDER is "muster" (the config's own order, multifactor by
// default) or fcfs, sjf, wfp3, unicep, f1; BACKFILL is "strict" (the paper's: one reservation, and
// a job passes it only if it ends before it starts), "easy" (one reservation, standard),
// "conservative" (a reservation for every blocked job), "none", or left out (the config's); FILL is
// the order the jobs left after the reservations are tried in: "priority", "shortest", "area" (left
// out: the config's); PLACEMENT is "topology", "first_fit" or "random" (scheduling.placement).
struct PolicySpec {
  std::string name;       // as given
  std::string order;      // scheduling.order; empty: the config's
  std::string backfill;   // scheduling.backfill; empty: the config's
  int64_t depth = -1;     // scheduling.backfill_depth; -1: the config's
  std::string fill;       // scheduling.backfill_order; empty: the config's
  std::string placement;  // scheduling.placement; empty: the config's
};
Result<PolicySpec> ParsePolicy(std::string_view text);
// The config with the policy's settings.
Config WithPolicy(Config config, const PolicySpec& policy);

// The paper's protocol: `count` sequences of `length` consecutive jobs, each starting at an index
// drawn uniformly from [length, n - length - 1) where n = min(jobs, first) (first = 0: all);
// deterministic for a seed. INVALID_ARGUMENT when the trace is too short for one.
Result<std::vector<size_t>> SampleStarts(size_t jobs, size_t length, size_t count, uint64_t seed,
                                         size_t first = 0);

// A mean over runs with the half-width of its 95% confidence interval (Student's t).
struct Interval {
  double mean = 0, half_width = 0;
  size_t n = 0;
};
Interval MeanInterval(const std::vector<double>& values);

}  // namespace muster::sim
