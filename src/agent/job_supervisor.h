// The jobs on this node and their lives here (each a LocalJob moving through its JobPhases):
// launch (spool directory, cgroup and GPU device filter, prolog, the batch script under its
// keeper), time limits, suspension, signals, termination (SIGTERM, grace, SIGKILL), cleanup (every
// process gone, epilog, cgroup removed) and re-adoption of what a previous agent left running.
// Reports each step to the controller. Its timers run on the context's executor and clock, so
// tests drive a job's whole life on a virtual clock.
//
// Io thread, but for the snapshots taken under their own lock (Register runs on the link thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent_context.h"
#include "job_spool.h"
#include "local_job.h"
#include "muster/v1/agent.pb.h"
#include "muster/v1/node.pb.h"
#include "muster/v1/step_supervisor.pb.h"

namespace muster::agent {

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
  const std::map<uint64_t, std::unique_ptr<LocalJob>>& jobs() const { return jobs_; }
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
  // After the prolog: --get-user-env's login environment read (asynchronously), then StartJob.
  void ReadUserEnvThenStart(uint64_t id);
  void StartJob(uint64_t id);  // after the prolog: the batch script, JobStarted
  // Moves the job to `to`, or logs the refused move and leaves it. Callers move only from a
  // phase the state machine allows (commands check the phase first), so a refusal is a bug
  // here, never a crash.
  bool Move(LocalJob& job, JobPhase to);
  // Runs `fn` on the job after `ms` unless it is gone or the generation `gen` points to moved on.
  void After(LocalJob& job, int64_t ms, uint64_t LocalJob::*gen, std::function<void(LocalJob&)> fn);
  void FailLaunch(uint64_t id, const std::string& why, bool node_fault);
  // SIGCONT, then `first_signal` (SIGTERM when 0; to the batch script alone with `batch_only`),
  // then SIGKILL after the grace.
  void StartKill(LocalJob& job, uint32_t grace_ms, int first_signal = 0, bool batch_only = false);
  void SignalJob(LocalJob& job, int sig);
  // The job's steps' tasks only; the batch script's shell process only.
  void SignalSteps(LocalJob& job, int sig);
  void SignalBatchShell(LocalJob& job, int sig);
  void ArmTimeLimit(LocalJob& job);
  void OnTimeLimit(LocalJob& job);
  // Every process gone (or given up on): the epilog, then the job is released.
  void Release(LocalJob& job);
  // The batch script's end, from its keeper's record (the keeper is our child, or adopted).
  void WatchBatch(LocalJob& job, int pidfd, bool our_child);
  void BatchEnded(uint64_t id);
  // The cgroup limits of the job's share of this node (what the controllers here can enforce).
  JobCgroups::Limits CgroupLimits(const LocalJob& job) const;
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
  uint64_t serials_ = 0;                                // io thread: LocalJob::serial
  mutable std::mutex mu_;
  std::vector<uint64_t> job_ids_;        // mu_: what the registration reports as running here
  std::vector<uint64_t> lost_job_ids_;   // mu_: started here before, state lost (Readopt)
  std::vector<v1::AdoptedJob> adopted_;  // mu_: the re-adopted ones among job_ids_
};

}  // namespace muster::agent
