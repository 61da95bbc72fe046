// A workload as muster-sim replays it, whatever trace it came from: each job's arrival, how long
// it really ran, what it asked for and who submitted it. The readers (SWF, Philly, openb, CSV)
// turn their formats into this; the replay turns each job into a submission.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace muster::sim {

// What a reader accepts of a job. A line whose values fall outside is skipped, by line number,
// as out of range (a traced wait outside is unknown, -1): a trace is input from anyone, and the
// replay turns these into milliseconds after its origin and into a submission the engine checks.
// Times in seconds, durations and times from the epoch or the trace's start alike: 0 to 100
// years (36,525 days).
inline constexpr int64_t kMaxTraceSeconds = int64_t{36'525} * 86'400;
inline constexpr uint32_t kMaxTraceProcs = 10'000'000;  // processors (CPUs) of one job
inline constexpr uint32_t kMaxTraceGpus = 1'000'000;    // GPUs of one job, in all
inline constexpr uint32_t kMaxTraceNodes = 1'000'000;   // nodes of one job (a machine: MaxNodes)
inline constexpr uint64_t kMaxTraceMemMb = uint64_t{1} << 30;  // memory per node: 1 PiB in MiB

struct SimJob {
  int64_t trace_id = 0;    // the job's id in its trace (what reports name it by)
  int64_t submit_s = 0;    // from the trace's start
  int64_t run_s = 0;       // how long it ran there: it runs as long here, unless killed
  int64_t req_time_s = 0;  // its time limit: killed when it reaches it; 0: none
  uint32_t procs = 1;      // CPUs (processors: one allocation unit each in CPU traces)
  uint32_t gpus = 0;       // GPUs in all; spread over `nodes` nodes evenly
  uint32_t nodes = 0;      // 0: as many as the procs or GPUs need
  uint64_t mem_mb = 0;     // memory per node; 0: not reserved
  // The GPU models it accepts, in order (--gpus-per-node=a:1|b:1); empty: any.
  std::vector<std::string> gpu_types;
  std::string user;     // becomes the submitting user
  std::string account;  // becomes the account charged ("" : none)
  // The wait it had on the traced machine (-1: unknown), for comparison only.
  int64_t traced_wait_s = -1;
};

// What a reader made of a file: the jobs in submit order and what it could not use.
struct Trace {
  std::string format;  // "swf", "philly", "openb", "csv"
  std::vector<SimJob> jobs;
  // The machine the trace was recorded on, where it says (SWF's MaxProcs / MaxNodes).
  int64_t max_procs = 0, max_nodes = 0;
  uint64_t skipped = 0;            // lines that were not jobs, or jobs that cannot be replayed
  std::vector<std::string> notes;  // what was skipped (by line) or filled in, for people
};

}  // namespace muster::sim
