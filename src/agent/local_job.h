// One job on this node and its life here, as an explicit state machine (as the controller's
// job_state_machine is): which phase it is in decides what a controller command, a timer or a
// process's end may do to it. The batch script's end is a fact beside the phase: the script may
// end in any phase after it started, and the job ends only when the controller says so.
//
// Io thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "muster/v1/agent.pb.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

enum class JobPhase {
  kProlog,             // launched here, its prolog runs: nothing of the job's runs yet
  kRunning,            // started: its batch script (on the batch node) and steps; the limit runs
  kSuspended,          // stopped by suspend preemption (SIGSTOP), its limit clock with it
  kTimedOut,           // past its limit: told to end, SIGKILL after the grace
  kCancelledInProlog,  // ended by the controller while its prolog ran: ends once it returns
  kEnding,             // ended by the controller: signalled, waiting for every process to go
  kEpilog,             // every process gone; its epilog runs, then it is released
};

const char* PhaseName(JobPhase p);
// The moves the agent makes. Released (JobCleaned) is not a phase: the job is forgotten from
// kEnding or kEpilog, a launch that fails before its job runs from kProlog (JobLaunchFailed),
// and a launch of a newer run replaces it from any phase (its processes killed).
bool PhaseMoveAllowed(JobPhase from, JobPhase to);

// How far the end of its processes has come once it was told to end.
enum class KillStage {
  kNone,     // not told to end
  kGrace,    // SIGTERM (or the chosen signal) sent; SIGKILL when the grace is over
  kKilled,   // SIGKILL sent; processes get a little while to be reaped
  kGivenUp,  // some survived SIGKILL (zombies of another reaper): released anyway
};

struct LocalJob {
  v1::LaunchJob launch;
  std::string visible_devices;  // CUDA_VISIBLE_DEVICES: GPU indices and MIG UUIDs
  std::string dir;              // its spool directory
  std::set<pid_t> children;     // our direct children (or adopted keepers) still running
  std::set<pid_t> pgids;        // process groups to signal (a group outlives its leader)
  std::set<pid_t> step_pgids;   // the step tasks among them (they end with the agent)
  pid_t keeper = -1;            // the batch script's keeper, which records its exit status
  uint64_t keeper_start = 0;
  pid_t task_pid = -1;  // the batch script
  std::string cgroup;   // the job's cgroup directory ("" without cgroups)
  // -S/--core-spec, --thread-spec: the CPUs left to it here (job_cpus.h); empty: it sets none
  // aside, and runs where its allocation (or, without a cgroup, anything) lets it.
  std::vector<uint32_t> cpus;
  std::string epilog_error, prolog_error;
  // --get-user-env: the user's login environment read on this node (none: not asked for, or it
  // could not be read and the script starts from the submitted environment alone).
  std::optional<std::vector<std::string>> login_env;
  bool adopted = false;    // found in the spool dir at start
  bool timed_out = false;  // its limit ended it (stays so when the controller ends it after)
  std::optional<v1::BatchExited> exit;  // the batch script's end, once it ended
  // Steps started here, with when their credentials expire: each credential starts its step
  // once (entries are dropped once the credential has expired and cannot be shown again).
  std::map<uint32_t, int64_t> started_steps;
  // Steps run by a supervisor process (muster-stepd), by step id: they outlive the agent.
  struct SupervisedStep {
    pid_t pid = -1;
    uint64_t start = 0;  // its start time (clock ticks), to tell a reused pid apart
  };
  std::map<uint32_t, SupervisedStep> supervised_steps;

  // This supervisor's number for it, new for every LocalJob: a timer set for a job released
  // since is never taken for one launched later with the same id and run.
  uint64_t serial = 0;
  // Its timers: one runs only while its generation is still the job's, so re-arming or
  // disarming (suspend, resume, the controller's end, the agent stopping) voids those set before.
  uint64_t limit_timers = 0;  // the time limit and the --signal warning
  uint64_t end_timers = 0;    // SIGKILL after the grace, the polls for a clean end
  bool poll_armed = false;
  KillStage kill = KillStage::kNone;
  // Suspended while its prolog ran (nothing of it to stop yet): it starts stopped.
  bool suspend_at_start = false;
  // When its LaunchJob came (the launch latency of the agent's metrics).
  std::chrono::steady_clock::time_point launch_received{};

  JobPhase phase() const { return phase_; }
  // Moves to `to`; false (and no move) where the state machine has no such move.
  bool MoveTo(JobPhase to);
  // Started and not ended: what a repeated launch and a reconnect confirm as running.
  bool Runs() const {
    return phase_ == JobPhase::kRunning || phase_ == JobPhase::kSuspended ||
           phase_ == JobPhase::kTimedOut;
  }
  // The controller ended it.
  bool Ending() const {
    return phase_ == JobPhase::kCancelledInProlog || phase_ == JobPhase::kEnding ||
           phase_ == JobPhase::kEpilog;
  }
  bool batch_exited() const { return exit.has_value(); }
  // New steps start in a running job, or one whose prolog still runs (the controller may hand
  // out steps before its JobStarted): never in a suspended one, which would run them unstopped,
  // one past its limit, one whose batch script ended, or one ended.
  bool TakesSteps() const {
    return (phase_ == JobPhase::kRunning || phase_ == JobPhase::kProlog) && !batch_exited();
  }
  uint32_t run() const { return launch.requeue_count(); }

  // A job a previous agent left running (or suspended), re-adopted.
  void Readopted(bool suspended) { phase_ = suspended ? JobPhase::kSuspended : JobPhase::kRunning; }

 private:
  JobPhase phase_ = JobPhase::kProlog;
};

}  // namespace muster::agent
