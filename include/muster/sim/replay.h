// Replays a workload through the controller musterctld runs: the ControllerRunner with its engine,
// pass policy and scheduling core, on a ManualExecutor's virtual clock and an in-memory store. The
// agents are stand-ins that start what they are told at once and end each job when its recorded
// run time is up, or kill it at its time limit (as a real agent does). No sockets, no threads, no
// wall clock: the same inputs give the same result.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/sim/trace.h"

namespace muster::sim {

// What became of one job of the trace.
struct JobOutcome {
  int64_t trace_id = 0;
  uint64_t job_id = 0;  // the engine's id; 0 when it refused the submission
  std::string refused;  // why the engine refused it (it asks for more than the cluster has, ...)
  std::string waiting;  // why it still waited when the replay ended (it never started)
  int64_t submit_ms = 0;
  int64_t start_ms = -1;  // its last run's start; -1: it never started
  int64_t end_ms = -1;
  uint32_t procs = 0, gpus = 0, nodes = 0;  // what it held (its request where it never ran)
  int64_t req_time_ms = 0;
  std::string user, account;
  bool killed_at_limit = false;
  uint32_t preemptions = 0;  // runs ended early by preemption (then requeued)
  // [start, end) of those runs (ms, as start_ms): what they held while they ran.
  std::vector<std::pair<int64_t, int64_t>> preempted_runs;
  double lost_gpu_seconds = 0;  // GPU time those runs had used
  double lost_cpu_seconds = 0;
  // Where its last run went: how many leaf switches and NVLink domains its nodes span, and
  // whether, when it started, one leaf (domain) had room for all of it.
  uint32_t leaves = 0, nvlink_domains = 0;
  bool one_leaf_had_room = false, one_domain_had_room = false;
};

// A moment of the run, sampled at each change: for the plots and the time-weighted metrics.
struct Sample {
  int64_t t_ms = 0;
  uint64_t busy_cpus = 0, busy_gpus = 0;
  uint32_t queued = 0;  // submitted, not yet started
  // Free GPUs on nodes that are partly in use, while a job that wants whole nodes' GPUs waits
  // (0 when none waits): capacity stranded by fragmentation.
  uint64_t stranded_gpus = 0;
};

struct ReplayOptions {
  // Called now and then with the jobs finished so far (the CLI's progress line).
  std::function<void(size_t finished, size_t total, int64_t virtual_ms)> progress;
  // How often (virtual) the controller's tick runs: liveness and limits; the replay's agents
  // never fall silent, so it need not be often.
  uint32_t tick_ms = 600'000;
  // Keep samples no closer than this (virtual ms); 0: every change.
  int64_t sample_every_ms = 0;
};

// An account of the config, as the metrics judge its usage: its share of the cluster (its shares
// over its siblings', times its parent's share, down from the root) and the GPUs its quotas
// guarantee it (all types together).
struct AccountTerms {
  double share = 0;
  bool has_quota = false;
  uint64_t guaranteed_gpus = 0;
};

struct ReplayResult {
  std::vector<JobOutcome> jobs;                  // in trace order
  std::map<std::string, AccountTerms> accounts;  // the config's accounts; empty: none
  std::vector<Sample> samples;
  uint64_t total_cpus = 0, total_gpus = 0;
  uint32_t total_nodes = 0;
  uint64_t passes = 0;      // scheduling passes the engine ran
  double wall_seconds = 0;  // how long the replay took (not part of the deterministic output)
};

// Replays `jobs` (in submit order) on the cluster `config` describes. The controller logs as the
// process's logger is set (see QuietControllerLogs). Replays on separate threads share nothing.
// INVALID_ARGUMENT for a config the controller refuses; a job the engine refuses is reported in its
// outcome, not fatal.
//
// QuietControllerLogs sets the controller's log to errors only: its info lines come per job and
// its warnings per preemption (a quota replay has thousands), which would cost more than the
// replay; what they say is in the outcomes and the metrics.
void QuietControllerLogs();

Result<ReplayResult> Replay(const Config& config, const std::vector<SimJob>& jobs,
                            const ReplayOptions& options = {});

}  // namespace muster::sim
