// The jobs: their table and indexes, the job state machine, and what agents report about them.
// Like Kudu's CatalogManager for tables, it is the one writer of job state: every state change
// goes through Transition (job_state_machine.cc), which persists the new record, updates memory
// and the indexes, and sends the commands that follow.
//
// Files: job_manager.cc (the table, submission, cancel, hold/release/requeue, retention),
// job_state_machine.cc (Transition and the requeue/failure rules, launch and terminate commands),
// job_events.cc (agents' reports, reconciliation after a reconnect, lost nodes and GPUs).
//
// Strand-confined.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine_context.h"
#include "job_entry.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/core/reason.h"
#include "muster/store/state_store.h"
#include "muster/v1/controller.pb.h"
#include "muster/v1/node.pb.h"
#include "node_manager.h"
#include "resource_ledger.h"
#include "stored_bytes.h"

namespace muster::controller {

class JobMail;

// A job state change, for JobManager::Transition. The table of legal changes is there.
struct JobChange {
  v1::JobState to = v1::JOB_STATE_UNSPECIFIED;
  core::JobReason reason = core::JobReason::kNone;
  std::optional<std::string> detail;  // the reason in words; nullopt keeps the current one
  std::optional<bool> hold;           // PENDING -> PENDING: held (true) or released (false)
  // PENDING -> RUNNING: where it runs, the credential its steps present, whether it runs on
  // quota lent by other accounts, and a time limit cut short (by its reservation's end).
  v1::Allocation allocation;
  std::string credential;
  bool borrowed = false;
  std::optional<int64_t> time_limit_ms;
};

class JobManager {
 public:
  JobManager(EngineContext& ctx, NodeManager& nodes, ResourceLedger& ledger);

  // ---- The table. ----
  JobEntry* Find(uint64_t id);
  const JobEntry* Find(uint64_t id) const;
  const std::map<uint64_t, JobEntry>& jobs() const { return jobs_; }
  // The same entries as a flat array in id order (a map's nodes never move): squeue walks all
  // of them, and a walk over cold records is memory-bound; an array can be fetched ahead.
  const std::vector<std::pair<uint64_t, const JobEntry*>>& order() const {
    if (order_stale_) RebuildOrder();
    return order_;
  }
  // The PENDING jobs by id, with their entries (a map's nodes never move): the scheduler walks
  // them at every pass, a lookup each would cost more than the walk.
  const std::map<uint64_t, JobEntry*>& pending() const { return pending_; }
  // How many PENDING jobs a user has (array tasks each count, waiting ones too).
  uint64_t PendingOf(uint32_t uid) const;
  const std::set<uint64_t>& interactive() const { return interactive_; }
  // A replacement engine's srun/salloc allocations: one whose client had gone under the previous
  // engine keeps the time it went (its grace does not start again at each reconfiguration).
  void ContinueOrphanTimes(const JobManager& previous);
  size_t size() const { return jobs_.size(); }
  // The scripts and environments the jobs in the table keep stored, by owner.
  const StoredBytes& stored() const { return stored_; }

  // ---- The one writer of a job's record. ----
  // A record changes as: a copy changed (by NextRecord for its life, or in other fields:
  // scontrol update, steps, dependency terms, nice), staged in a mutation here, the mutation
  // committed, then the copy applied (Apply after a transition, ApplyChange otherwise).
  // JobEntry::rec() is read-only elsewhere and no other file writes a job to the store, so the
  // compiler and state_writes_check hold this.
  // MUSTER_CHECKs, before anything is written, that `next` keeps `job`'s id, state and run.
  void StageChange(const JobEntry& job, const v1::JobRecord& next, store::Mutation& m) const;
  // A change of life (a start) staged: NextRecord makes the record from `before` (checking the
  // change against the state machine) and it goes into `m`; Apply makes it the job's once `m`
  // is committed.
  v1::JobRecord StageNext(const v1::JobRecord& before, const JobChange& change, TimeMs now,
                          store::Mutation& m) const {
    v1::JobRecord next = NextRecord(before, change, now);
    m.PutJob(next);
    return next;
  }
  // Swaps `next` in and refreshes what memory derives from it: the request and squeue's row,
  // and whom its stored bytes count for when its account or QoS changed. Its
  // state and run must be the entry's (they change only through Transition).
  void ApplyChange(JobEntry& job, v1::JobRecord next);
  // --mail-type: `bits` (MailType) were mailed for the job's current run (job_mail.h). The next
  // record, staged into `m`; ApplyChange makes it the job's once `m` is committed.
  v1::JobRecord StageMailSent(const JobEntry& job, uint32_t bits, store::Mutation& m) const;
  // Who decides the mail a change calls for (the engine's JobMail); null: none.
  void SetMail(JobMail* mail) { mail_ = mail; }

  // ---- Recovery. ----
  // A record from the store enters memory as it was (resources are the ledger's to restore).
  void Restore(v1::JobRecord rec, TimeMs now);
  // After every record: jobs that held a node the configuration no longer defines lose it.
  Status FinishRestore(TimeMs now);

  // ---- Submission (validated by the engine). ----
  // Persists `recs` (new, not yet PENDING: one job, an array's carrier, or one per array task)
  // with their payload and the next meta record, then adds them as PENDING. `tasks`: an
  // array's task list, parsed already. INTERNAL when the store fails: nothing was added.
  Status Submit(std::vector<v1::JobRecord> recs, const v1::JobPayload& payload,
                const core::JobRequest& request, const v1::MetaRecord& next_meta, TimeMs now,
                std::shared_ptr<const std::vector<uint32_t>> tasks = nullptr);

  // ---- Job arrays waiting as one record (job_arrays.cc; see array_tasks.h). ----
  // The entry whose record stands for job `id`: its own, or its carrier's while it waits in
  // one. nullptr when none does.
  const JobEntry* Covering(uint64_t id) const;
  // The carrier of the array whose ids start at or before `id` (whether or not `id` waits in
  // it): where a listing that stopped at `id` finds the tasks still waiting past it.
  const JobEntry* CarrierBefore(uint64_t id) const;
  // The jobs a request names, each once, ready to be acted on one by one. An array's id in
  // `ids` is every task of the array (a carrier once, for itself and its waiting tasks); any
  // other id, and each of `single_ids`, is that job alone: a task waiting in a carrier is
  // split off first, and a carrier named alone hands its waiting tasks on first (persisted).
  // A target comes with an error instead when the caller may not `verb` it (checked before
  // anything is split) or the split cannot be persisted.
  struct Target {
    uint64_t id = 0;
    Status status;
    bool by_array = false;  // named through its array's id
  };
  // With `refuse_waiting`, nothing is split: a waiting task or a carrier named alone comes
  // with that error instead (a signal for a job that has not started).
  std::vector<Target> Targets(const Caller& caller, std::string_view verb,
                              const std::vector<uint64_t>& ids,
                              const std::vector<uint64_t>& single_ids,
                              const Status* refuse_waiting = nullptr);
  // A scheduling pass starts `ids`, some of which may be tasks waiting in a carrier, or
  // carriers. SplitForStart puts into `m` what their carriers become (fewer waiting tasks, or
  // a new carrier where one starts) and returns the PENDING record each such start begins
  // from; after `m` is committed, AdoptSplit makes all of it memory's, and the starts can be
  // applied to Find(id) as for any job. Nothing changes before the commit.
  struct ArraySplit {
    std::map<uint64_t, v1::JobRecord> start_from;          // by the id that starts
    std::vector<std::pair<uint64_t, v1::JobRecord>> kept;  // carriers that go on waiting
    std::vector<v1::JobRecord> new_carriers;               // took over from one that starts
  };
  ArraySplit SplitForStart(const std::vector<uint64_t>& ids, store::Mutation& m) const;
  void AdoptSplit(ArraySplit split);
  // Entries split off a carrier that still had --dependency terms, since the last call (the
  // dependency tracker follows them).
  std::vector<uint64_t> TakeSplitWithDependencies() { return std::move(split_with_terms_); }
  // Tests: carriers hold only tasks that have no record of their own, one per array, indexed;
  // the pending counts match the pending jobs; the jobs by account, QoS and reservation, and
  // the active tasks by account and QoS, match the table.
  Status CheckArrayInvariants() const;

  // ---- The table by what a job names (is an account, a QoS, a reservation in use?). ----
  enum class Named { kAccount, kQos, kReservation };
  // The ids of the jobs in the table (any state, until archived) that name `name`.
  const std::set<uint64_t>& JobsNaming(Named what, const std::string& name) const;
  // The tasks pending or running, by account and QoS (what submit limits count).
  const ActiveTasks& active_tasks() const { return active_; }

  // ---- Requests. ----
  // scancel: per-job results NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION (a signal for a
  // job that is not running), or OK.
  v1::CancelJobResponse Cancel(const Caller& caller, const v1::CancelJobRequest& req, TimeMs now);
  // scontrol hold/release/requeue: per-job results NOT_FOUND, PERMISSION_DENIED,
  // FAILED_PRECONDITION (not pending / not running / not requeueable), INVALID_ARGUMENT.
  v1::UpdateJobResponse Update(const Caller& caller, const v1::UpdateJobRequest& req, TimeMs now);

  // ---- The state machine (job_state_machine.cc). ----
  // The record `job` has after `change`. Pure: nothing else changes. MUSTER_CHECKs that the
  // change is one the table allows.
  v1::JobRecord NextRecord(const v1::JobRecord& rec, const JobChange& change, TimeMs now) const;
  // Changes `job`. For a change the controller decides itself, the next record goes into `batch`
  // and memory changes at once; the caller commits the batch with CommitOrDie.
  void Transition(JobEntry& job, const JobChange& change, TimeMs now, store::Mutation& batch);
  // For a change a request asked for: committed here first; when the store fails nothing
  // changes and the error is returned.
  [[nodiscard]] Status Transition(JobEntry& job, const JobChange& change, TimeMs now);
  // A next record (from NextRecord at `now`) that the caller has persisted becomes the job's:
  // the indexes, then the commands (and mail) that follow.
  void Apply(JobEntry& job, v1::JobRecord next, TimeMs now);
  // A running job stops everywhere and is queued again (the whole gang), or ends NODE_FAIL when
  // it asked for --no-requeue or is an srun/salloc allocation, or CANCELLED when a cancel was
  // already under way.
  void RequeueOrFail(JobEntry& job, core::JobReason reason, const std::string& why, TimeMs now,
                     store::Mutation& m);
  // Whether the running job goes on without `node_name` when that node is lost (--no-kill).
  static bool KeepsRunningWithout(const v1::JobRecord& r, const std::string& node_name);
  // The lost node leaves the running job's allocation (--no-kill); the caller persists the record.
  void DropNode(JobEntry& job, const std::string& node_name, const std::string& why);
  // The running job gives way to job `preemptor`: requeued (with `requeue`, when it may be) or
  // ended PREEMPTED; its nodes get its --signal and `grace_ms` before SIGKILL.
  void Preempt(JobEntry& job, uint64_t preemptor, const std::string& why, bool requeue,
               uint32_t grace_ms, TimeMs now, store::Mutation& m);
  // Suspend preemption: the running job's processes stop on every node (SIGSTOP) and its CPUs
  // are lent to job `preemptor` (parked in the ledger); it stays RUNNING, shown SUSPENDED, with
  // its GPUs and memory. Resume continues it once its CPUs are free again; the time it spent
  // suspended extends its time limit.
  void Suspend(JobEntry& job, uint64_t preemptor, const std::string& why, TimeMs now,
               store::Mutation& m);
  void Resume(JobEntry& job, TimeMs now, store::Mutation& m);
  // scontrol suspend: the same stop, by an operator or admin, kept until one of them resumes it
  // (the scheduler never does). Their resume continues it at once when its CPUs are free, else
  // as soon as they are.
  void SuspendByAdmin(JobEntry& job, const std::string& who, TimeMs now, store::Mutation& m);
  void ResumeByAdmin(JobEntry& job, const std::string& who, TimeMs now, store::Mutation& m);
  // An srun/salloc allocation ends (its client released it, went away, or it timed out).
  void EndAllocation(JobEntry& job, v1::JobState state, core::JobReason reason,
                     const std::string& detail, TimeMs now, int32_t exit_code, int32_t signal);
  // The allocation is over: it leaves the index of active srun/salloc allocations.
  void ForgetAllocation(uint64_t id) { interactive_.erase(id); }
  // Pass reasons: memory only, recomputed by every pass.
  void SetWaitReason(JobEntry& job, core::JobReason reason, std::string detail);

  // ---- Agents (job_events.cc). ----
  void OnJobStarted(NodeEntry& node, const v1::JobStarted& e, TimeMs now);
  void OnLaunchFailed(NodeEntry& node, const v1::JobLaunchFailed& e, TimeMs now);
  void OnBatchExited(NodeEntry& node, const v1::BatchExited& e, TimeMs now);
  void OnJobCleaned(NodeEntry& node, const v1::JobCleaned& e, TimeMs now);
  // A node's session is up again: what its agent reported at registration is reconciled with
  // what this controller believes (stale jobs terminated, lost launches sent again, jobs whose
  // state the agent lost failed, finished jobs released).
  void ReconcileNode(NodeEntry& node, TimeMs now);
  // The node is lost: every job holding resources there loses it (requeued or failed).
  void NodeLost(NodeEntry& node, const std::string& why, TimeMs now);
  // muster node confirm-down: the jobs waiting for these lost nodes to confirm their old runs
  // ended stop waiting for them (`who` for the log).
  Result<v1::UpdateNodeResponse> ConfirmDown(const std::vector<NodeEntry*>& nodes,
                                             const std::string& who);
  // GPU `gpu` of the node turned unhealthy: the running jobs bound to it are requeued.
  void GpuFailed(NodeEntry& node, uint32_t gpu, const std::string& why, TimeMs now,
                 store::Mutation& m);

  // ---- Commands to agents. ----
  void SendLaunch(const JobEntry& job, size_t node_pos);
  void SendTerminate(const std::string& node, const JobEntry& job, const std::string& reason);
  void SendSuspend(const std::string& node, const JobEntry& job, bool resume);
  // A suspend's stop: recorded, its CPUs parked, its nodes told.
  void StopRun(JobEntry& job, TimeMs now, store::Mutation& m);

  // --deadline: pending jobs that can no longer end before their deadline (it passed, or their
  // time limit from now reaches past it) end DEADLINE.
  void EndPastDeadline(TimeMs now);

  // ---- Retention. ----
  // Finished jobs past finished_job_retention_ms move to the history family (bounded per call).
  void Archive(TimeMs now);

 private:
  // The job's share of `node_name` is gone (the node was lost or removed from the config).
  void LostOnNode(JobEntry& job, const std::string& node_name, const std::string& why, TimeMs now,
                  store::Mutation& m);
  // The lost node may still run the (requeued) job's old run: it does not start again until
  // Confirm says the node ended it.
  void MarkUnconfirmed(JobEntry& job, const std::string& node_name);
  // The job's old run no longer runs on `node` (`how` says why, for the log).
  void Confirm(NodeEntry& node, uint64_t id, const std::string& how, store::Mutation& m);
  // The job no longer holds anything on `node`: what was left of it there is clean.
  void ReleaseNode(JobEntry& job, const NodeEntry& node);
  JobEntry& Insert(JobEntry entry);
  void RebuildOrder() const;
  // pending_, the per-user counts and pending_with_deadline_, together.
  void MarkPending(JobEntry& job);
  void UnmarkPending(JobEntry& job);
  // `id` (named alone by a request) becomes a record of its own: split off its carrier, or,
  // when it is a carrier, with its waiting tasks handed on to the first of them.
  Status Separate(uint64_t id);
  // A record split off a carrier (or taking over from one) enters memory, PENDING.
  JobEntry& AdoptPending(v1::JobRecord rec, const JobEntry& from);
  // Keeps carriers_ true to `job`'s record.
  void NoteCarrier(const JobEntry& job);
  // Recovery: waiting tasks a carrier cannot hold (before it, past its array, or jobs with a
  // record of their own, as a damaged store could have it) are dropped, logged, into `m`.
  void RepairCarrier(JobEntry& job, store::Mutation& m);

  EngineContext& ctx_;
  NodeManager& nodes_;
  ResourceLedger& ledger_;
  JobMail* mail_ = nullptr;
  std::map<uint64_t, JobEntry> jobs_;  // live and recently finished jobs, by id
  // Rebuilt when next read after an entry entered out of id order (array tasks split off).
  mutable std::vector<std::pair<uint64_t, const JobEntry*>> order_;
  mutable bool order_stale_ = false;
  std::map<uint64_t, JobEntry*> pending_;  // PENDING jobs (the scheduler's input), into jobs_
  // The same, counted per user (a carrier counts its waiting tasks too).
  std::unordered_map<uint32_t, uint64_t> pending_per_uid_;
  // Each array's carrier (the one record its waiting tasks are in), by the array's id: how a
  // waiting task's id finds it. Kept until the carrier is archived.
  std::map<uint64_t, uint64_t> carriers_;
  std::vector<uint64_t> split_with_terms_;
  // The pending jobs with a --deadline (few): what EndPastDeadline looks at every tick.
  std::set<uint64_t> pending_with_deadline_;
  std::set<std::pair<TimeMs, uint64_t>> finished_;  // (end time, id) of finished jobs
  std::set<uint64_t> interactive_;                  // active srun/salloc allocations
  StoredBytes stored_;
  // The table by account, QoS and reservation: kept with it (entry, archive, ApplyChange).
  std::map<std::string, std::set<uint64_t>> naming_[3];
  void IndexNames(const v1::JobRecord& rec, bool add);
  // The tasks pending or running by account and QoS: kept with every record that enters memory
  // or changes (Insert, Restore, Apply, ApplyChange, carriers' splits and repairs, archive).
  ActiveTasks active_;
  void Recount(JobEntry& job) { active_.Recount(job.counted_active, job.rec_); }
};

}  // namespace muster::controller
