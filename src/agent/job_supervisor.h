// The jobs on this node and their lives here: launch (spool directory, cgroup and GPU device
// filter, prolog, the batch script under its keeper), time limits, signals, termination (SIGTERM,
// grace, SIGKILL), cleanup (every process gone, epilog, cgroup removed) and re-adoption of what a
// previous agent left running. Reports each step to the controller.
//
// Io thread, but for the snapshots taken under their own lock (Register runs on the link thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent_context.h"
#include "job_spool.h"
#include "muster/v1/agent.pb.h"
#include "muster/v1/node.pb.h"
#include "muster/v1/step_supervisor.pb.h"

namespace muster::agent {

// One job on this node.
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
  bool prolog_running = false, epilog_running = false, epilog_done = false;
  std::string epilog_error, prolog_error;
  bool adopted = false;  // found in the spool dir at start
  bool started = false;
  bool exited = false;
  v1::BatchExited exit;
  bool timed_out = false;
  bool terminating = false;
  bool suspended = false;    // stopped by suspend preemption (SIGSTOP), its limit clock too
  int64_t killed_at_ms = 0;  // monotonic time SIGKILL was sent
  // Steps started here, with when their credentials expire: each credential starts its step
  // once (entries are dropped once the credential has expired and cannot be shown again).
  std::map<uint32_t, int64_t> started_steps;
  // Steps run by a supervisor process (muster-stepd), by step id: they outlive the agent.
  struct SupervisedStep {
    pid_t pid = -1;
    uint64_t start = 0;  // its start time (clock ticks), to tell a reused pid apart
  };
  std::map<uint32_t, SupervisedStep> supervised_steps;
  std::unique_ptr<boost::asio::steady_timer> limit_timer, kill_timer, poll_timer;
  std::unique_ptr<boost::asio::steady_timer> warn_timer;  // --signal=SIG@secs before the limit
  uint32_t run() const { return launch.requeue_count(); }
};

class JobSupervisor {
 public:
  JobSupervisor(AgentContext& ctx, JobSpool& spool) : ctx_(ctx), spool_(spool) {}

  // ---- Controller commands. ----
  void Launch(const v1::LaunchJob& launch);
  void Terminate(const v1::TerminateJob& t);
  void Signal(const v1::SignalJob& s);
  // Suspend preemption: SIGSTOP every process of the job and stop its time-limit clock, or
  // SIGCONT them with the limit extended by the time suspended.
  void Suspend(const v1::SuspendJob& s);

  // ---- Restart. ----
  // Jobs a previous agent left: their state files, their keepers, their process groups; job
  // cgroups no state speaks for are killed. The jobs that ran here but could not be re-adopted
  // are reported as lost at the next registration.
  void Readopt();
  // After a reconnect, what the controller may have missed: JobStarted for running jobs,
  // BatchExited for ended batch scripts (it ignores what it already knows).
  void ReportAll();

  // ---- For the other parts. ----
  LocalJob* Find(uint64_t id);
  std::vector<uint64_t> RunningJobIds() const;  // io thread (heartbeats)
  // Thread-safe snapshots for the registration.
  std::vector<uint64_t> JobIdsSnapshot() const;
  std::vector<uint64_t> LostJobIdsSnapshot() const;
  // What the spool said about each job re-adopted after a restart: the controller checks it.
  std::vector<v1::AdoptedJob> AdoptedJobsSnapshot() const;
  // A process of the job ended (step tasks report theirs): the job may be clean now.
  void CheckClean(uint64_t job_id);

  // ---- Steps under muster-stepd (job_steps.cc). ----
  // Starts the step's supervisor with the client's connection (`client_fd`, ours to close) and
  // `setup`; it runs the step from now on and the controller hears of its end from here.
  Status SuperviseStep(LocalJob& job, const v1::StepSupervisorSetup& setup, int client_fd);

  // ---- Stopping. ----
  // An agent restart: steps run in the agent end (their I/O runs through this process), timers
  // stop, batch scripts keep running under their keepers and steps under their supervisors.
  // Returns how many batch scripts and supervised steps keep running.
  size_t Detach();
  // Ending every job: SIGCONT and SIGTERM now; returns how many processes of ours still run.
  size_t TerminateAll();
  size_t LiveChildren() const;
  // SIGKILL to whatever is left, and the spool directories go.
  void KillAll();

 private:
  void StartJob(uint64_t id);  // after the prolog: the batch script, JobStarted
  void FailLaunch(uint64_t id, const std::string& why, bool node_fault);
  // SIGCONT, then `first_signal` (SIGTERM when 0; to the batch script alone with `batch_only`),
  // then SIGKILL after the grace.
  void StartKill(LocalJob& job, uint32_t grace_ms, int first_signal = 0, bool batch_only = false);
  void SignalJob(LocalJob& job, int sig);
  void ArmTimeLimit(LocalJob& job);
  void OnTimeLimit(uint64_t id);
  // The batch script's end, from its keeper's record (the keeper is our child, or adopted).
  void WatchBatch(LocalJob& job, int pidfd, bool our_child);
  void BatchEnded(uint64_t id);
  // The cgroup limits of the job's share of this node (what the controllers here can enforce).
  JobCgroups::Limits CgroupLimits(const v1::LaunchJob& l) const;
  // Only the job's GPUs' device files are open to it (where BPF device filters work).
  Status LimitGpuDevices(const LocalJob& job);
  Status SaveState(const LocalJob& job);
  void PublishJobIds();
  // Steps under muster-stepd (job_steps.cc): a supervisor's end (its record, or killed when it
  // left none), the process groups of their tasks (from the records the supervisors keep), the
  // supervisors a previous agent left, and their ends again after a reconnect.
  void WatchStepSupervisor(uint64_t job_id, uint32_t step_id, int pidfd, bool our_child);
  void StepSupervisorEnded(uint64_t job_id, uint32_t step_id);
  // The step's end as its supervisor recorded it; when it left none, a killed end (recorded now)
  // and whatever of its tasks is left killed.
  v1::StepEnded EndOf(const LocalJob& job, uint32_t step_id, pid_t supervisor);
  std::vector<pid_t> SupervisedTaskGroups(const LocalJob& job) const;
  void ReadoptSteps(LocalJob& job, const v1::AgentJobState& state);
  // The ends of its steps the supervisors recorded (the agent may not have reported them).
  std::vector<v1::StepEnded> RecordedStepEnds(const LocalJob& job) const;
  void ReportStepEnds(const LocalJob& job) const;

  AgentContext& ctx_;
  JobSpool& spool_;
  std::map<uint64_t, std::unique_ptr<LocalJob>> jobs_;  // io thread
  mutable std::mutex mu_;
  std::vector<uint64_t> job_ids_;        // mu_: what the registration reports as running here
  std::vector<uint64_t> lost_job_ids_;   // mu_: started here before, state lost (Readopt)
  std::vector<v1::AdoptedJob> adopted_;  // mu_: the re-adopted ones among job_ids_
};

}  // namespace muster::agent
