// The Standard Workload Format (Feitelson's Parallel Workloads Archive): one job per line, 18
// whitespace-separated fields, ';' header lines with the machine's size. muster-sim replays
// these through the controller's engine; this reader turns the text into records and says what
// it had to skip or fill in. Pure: the caller opens (and decompresses) the file.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "muster/sim/trace.h"

namespace muster::sim {

// One job line. Times in seconds; -1 where the trace does not know (as in the format).
struct SwfJob {
  int64_t id = 0;
  int64_t submit_s = 0;        // 2: from the trace's start
  int64_t wait_s = -1;         // 3: as it happened on the traced machine
  int64_t run_s = -1;          // 4
  int64_t procs = -1;          // 5: allocated processors
  int64_t avg_cpu_s = -1;      // 6: its whole part (the archive writes fractions here)
  int64_t used_mem_kb = -1;    // 7: likewise
  int64_t req_procs = -1;      // 8
  int64_t req_time_s = -1;     // 9: the requested (wall clock) time; see SwfTrace::time_filled
  int64_t req_mem_kb = -1;     // 10
  int64_t status = -1;         // 11: 1 completed, 0 failed, 5 cancelled, ...
  int64_t user = -1;           // 12: becomes a user of the replay
  int64_t group = -1;          // 13: becomes an account of the replay
  int64_t app = -1;            // 14
  int64_t queue = -1;          // 15
  int64_t partition = -1;      // 16
  int64_t preceding_job = -1;  // 17
  int64_t think_time_s = -1;   // 18
};

// A line that was not a job: its number (from 1) and why.
struct SwfSkipped {
  uint64_t line = 0;
  std::string why;
};

struct SwfTrace {
  // From the header (';  MaxProcs: 128'); unset when the trace does not say.
  std::optional<int64_t> max_procs, max_nodes, unix_start_time;
  std::vector<SwfJob> jobs;
  std::vector<SwfSkipped> skipped;  // at most kMaxSkippedKept listed; skipped_count counts all
  uint64_t skipped_count = 0;
  // Jobs whose requested time was -1 and took their run time instead (the replay kills a job at
  // its requested time, so it needs one).
  uint64_t time_filled = 0;
};

inline constexpr size_t kMaxSkippedKept = 100;

// Reads a whole trace. Malformed lines (not 18 integers, a negative submit time, ids going
// backwards are kept: the format allows them) are skipped and reported with their numbers, as
// are lines past trace.h's bounds (a submit, run or requested time over 100 years, more than
// 10,000,000 processors) and a MaxProcs or MaxNodes header over 1,000,000 (muster-sim builds
// a node for each), which is not kept. A leading UTF-8 byte order mark is passed over. The reader
// never fails on content.
SwfTrace ReadSwf(std::istream& in);

// The jobs as the replay runs them, as the scheduling literature reads SWF: processors =
// max(allocated, requested), one allocation unit each; jobs that never ran (run time <= 0) are
// dropped and counted; user and group ids become users ("u153") and accounts ("g75").
Trace SwfToTrace(const SwfTrace& swf);

}  // namespace muster::sim
