// What a replay did to the queue, in the figures admins and the scheduling literature compare:
// utilization, waits, bounded slowdown, waits by job size, how long the largest jobs waited,
// capacity stranded by fragmentation, where multi-node gangs landed, preemption's cost, and each
// account's usage. Pure: computed from a ReplayResult, written as JSON in a fixed order (the same
// replay gives byte-identical output).
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "muster/sim/replay.h"

namespace muster::sim {

// Bounded slowdown's floor on the run time (seconds): a 1-second job that waited a minute does
// not count as slowed down 60 times (Feitelson's τ; the RLScheduler paper uses 10 s).
inline constexpr double kSlowdownTauSeconds = 10;

struct WaitStats {
  uint64_t jobs = 0;
  double mean_s = 0, median_s = 0, p95_s = 0, p99_s = 0, max_s = 0;
};

struct SizeClass {
  std::string name;  // "1", "2-4", ... (processors, or GPUs on a GPU cluster)
  WaitStats wait;
  double bounded_slowdown = 0;
};

struct AccountUsage {
  double cpu_hours = 0, gpu_hours = 0;
  double share_of_use = 0;  // of all the replay's usage (GPU-hours on a GPU cluster, else CPU)
  uint64_t jobs = 0;        // started
  double wait_mean_s = 0, bounded_slowdown = 0;
  // What the config gives it (AccountTerms); false: the config names no such account.
  bool configured = false;
  double share = 0;
  bool has_quota = false;  // a GPU quota of any type, even of 0 guaranteed
  uint64_t guaranteed_gpus = 0;
  // The waits of its GPU jobs that were within its guarantee when submitted: its running and
  // still waiting jobs' GPUs with theirs no more than guaranteed_gpus. Under lending these are
  // the reclaim delays (what taking back lent GPUs cost the owner).
  WaitStats within_guarantee;
};

// Each account's usage (unit-hours: GPUs on a GPU cluster, else CPUs) in one window of time.
struct UsageWindow {
  double start_s = 0;  // from the first submission
  std::map<std::string, double> unit_hours;
};

struct Metrics {
  uint64_t jobs = 0, started = 0, refused = 0, never_started = 0, killed_at_limit = 0;
  double makespan_s = 0;     // first submission to last end
  double utilization = 0;    // allocated share of the cluster over the makespan
  bool gpu_cluster = false;  // sizes and utilization are in GPUs
  WaitStats wait;
  double bounded_slowdown = 0;  // mean over started jobs, τ = kSlowdownTauSeconds
  std::vector<SizeClass> by_size;
  // The largest tenth of the jobs by processors (GPUs) × requested time: how long they waited.
  WaitStats large_wait;
  // Time-weighted mean of GPUs free on partly used nodes while a whole-node job waited, as a
  // share of the cluster's GPUs; and the share of the time such a job waited.
  double stranded_gpu_share = 0, whole_node_waiting_share = 0;
  // Multi-node jobs that started while one leaf (NVLink domain) could have held them, and the
  // share of those placed inside one.
  uint64_t gangs_with_leaf_room = 0, gangs_with_domain_room = 0;
  double in_one_leaf = 0, in_one_domain = 0;
  uint64_t preemptions = 0;
  double lost_gpu_hours = 0, lost_cpu_hours = 0;
  std::map<std::string, AccountUsage> accounts;
  // With accounts in the config: usage by account over time, in windows of usage_window_s (a
  // whole number of hours, about a fiftieth of the makespan).
  double usage_window_s = 0;
  std::vector<UsageWindow> usage_over_time;
  uint64_t passes = 0;
};

Metrics ComputeMetrics(const ReplayResult& r);

// The waits (seconds) of the started jobs in the largest tenth by processors (GPUs) x requested
// time, ties broken by the longer wait: what "nobody starves" is judged on.
std::vector<double> LargestTenthWaits(const ReplayResult& r);

// Percentile of sorted values (nearest rank); 0 for none.
double Percentile(const std::vector<double>& sorted, double p);

// The metrics as one JSON object (keys in a fixed order, numbers at fixed precision).
void WriteJson(const Metrics& m, std::ostream& out);

// Every job's outcome as CSV with a header, in trace order (times in seconds from the trace's
// origin, -1 where it never started or ended; `reason` the engine's refusal or why it still
// waited): which jobs waited, for a person with a spreadsheet or a script.
void WriteOutcomesCsv(const ReplayResult& r, std::ostream& out);

}  // namespace muster::sim
