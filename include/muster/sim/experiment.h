// What muster-sim compares: named policies (a queue order and a backfill), the RLScheduler
// paper's protocol of sampled job sequences, and the mean with its 95% interval over them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <ostream>
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
  std::string name;              // as given
  std::string order;             // scheduling.order; empty: the config's
  std::string backfill;          // scheduling.backfill; empty: the config's
  int64_t depth = -1;            // scheduling.backfill_depth; -1: the config's
  std::string fill;              // scheduling.backfill_order; empty: the config's
  std::string placement;         // scheduling.placement; empty: the config's
  int64_t protect_after_ms = 0;  // scheduling.protect_after_ms (~WAIT); 0: the config's
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

// What one replay of a comparison gave.
struct RunFigures {
  Metrics metrics;
  std::vector<double> largest_waits;  // LargestTenthWaits of the replay
};

// One policy over its runs: each figure's mean with its 95% interval; the largest tenth's waits
// pooled over the runs (p99 and maximum); gangs inside one leaf over all runs' gangs.
struct PolicySummary {
  std::string policy;
  Interval bounded_slowdown, utilization, wait_mean_s, stranded_gpu_share;
  double large_p99_s = 0, large_max_s = 0;
  uint64_t gangs_with_leaf_room = 0;
  double in_one_leaf = 0;
  bool gpu_cluster = false;
  std::vector<double> bounded_slowdown_runs;
};
PolicySummary Summarize(const std::string& policy, const std::vector<const RunFigures*>& runs);

// How the runs' jobs were drawn (--sequences), for the JSON.
struct SequenceDraw {
  size_t count = 0, length = 0, sample_first = 0;
  uint64_t seed = 0;
  std::vector<size_t> starts;
};
// The comparison as JSON (fixed key order and precision); `draw` null when the runs replayed
// the same jobs.
void WriteComparisonJson(const std::vector<PolicySummary>& policies, size_t runs_per_policy,
                         const SequenceDraw* draw, std::ostream& out);
// The same as a table for people.
void WriteComparisonTable(const std::vector<PolicySummary>& policies, std::FILE* out);

}  // namespace muster::sim
