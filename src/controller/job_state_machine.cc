// JobManager: the job state machine. A job's state changes here and nowhere else:
//
//   (new)   -> PENDING      submitted (reason JobHeldUser with --hold)
//   PENDING -> PENDING      held or released
//   PENDING -> RUNNING      started by the scheduler
//   PENDING -> CANCELLED    cancelled, or an srun/salloc allocation ended, before it started
//   RUNNING -> COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | PREEMPTED     its end
//   RUNNING -> PENDING      requeued: the whole gang stops and it waits for every node to be clean
//
// NextRecord says what the record becomes; Transition persists it (or puts it into the caller's
// batch) and Apply makes it the job's, updates the indexes and sends what follows (launches,
// terminations) and asks for a scheduling pass.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "array_tasks.h"
#include "job_mail.h"
#include "job_manager.h"
#include "job_spec.h"
#include "muster/common/check.h"
#include "muster/common/duration.h"
#include "muster/common/job_limits.h"
#include "name_list.h"
#include "step_state.h"

namespace muster::controller {
namespace {

using core::JobReason;

bool Allowed(v1::JobState from, v1::JobState to) {
  switch (from) {
    case v1::JOB_STATE_UNSPECIFIED:
      return to == v1::PENDING;
    case v1::PENDING:
      return to == v1::PENDING || to == v1::RUNNING || to == v1::CANCELLED || to == v1::DEADLINE;
    case v1::RUNNING:
      return to == v1::COMPLETED || to == v1::FAILED || to == v1::CANCELLED || to == v1::TIMEOUT ||
             to == v1::NODE_FAIL || to == v1::PREEMPTED || to == v1::PENDING;
    default:
      return false;  // terminal states are final
  }
}

bool Ended(v1::JobState s) { return s != v1::PENDING && s != v1::RUNNING; }

// A run that ends while suspended: the suspension counts into its suspended time.
void FoldSuspension(v1::JobRecord& r, TimeMs now) {
  if (r.suspend_time_ms() == 0) return;
  r.set_suspended_ms(r.suspended_ms() + std::max<TimeMs>(0, now - r.suspend_time_ms()));
  r.set_suspend_time_ms(0);
  r.set_ended_suspended(true);
  r.set_admin_suspended(false);  // belongs to that run
}

}  // namespace

v1::JobRecord JobManager::NextRecord(const v1::JobRecord& rec, const JobChange& c,
                                     TimeMs now) const {
  const v1::JobState from = rec.state();
  MUSTER_CHECK_MSG(Allowed(from, c.to), "job state change not in the state machine");
  MUSTER_CHECK_MSG(c.to != v1::RUNNING || !Carries(rec),
                   "an array task starts only once the tasks waiting in its record moved on");
  v1::JobRecord r = rec;
  r.set_state(c.to);
  r.set_reason(core::ReasonName(c.reason));
  if (c.detail) r.set_reason_detail(*c.detail);
  if (c.to == v1::TIMEOUT) r.set_timed_out(true);
  // What a run still holds: the nodes that have not reported it clean.
  auto set_completing = [&] {
    r.clear_completing_nodes();
    for (const auto& na : r.allocation().nodes()) {
      std::optional<size_t> i = ctx_.NodeIndex(na.node());
      if (i && ledger_.Holds(*i, r.id())) r.add_completing_nodes(na.node());
    }
  };
  if (from == v1::PENDING && c.to == v1::PENDING && c.hold) {
    r.mutable_spec()->set_hold(*c.hold);
  } else if (c.to == v1::RUNNING) {
    r.set_start_time_ms(now);
    r.set_borrowed(c.borrowed);
    if (c.time_limit_ms) r.set_time_limit_ms(*c.time_limit_ms);
    r.clear_reason_detail();
    r.set_batch_started(false);
    r.set_credential(c.credential);
    r.set_next_step_id(0);
    r.set_preempt_time_ms(0);
    r.set_preempt_grace_ms(0);
    r.clear_preempted_by();
    r.set_suspend_time_ms(0);
    r.set_suspended_ms(0);
    r.set_ended_suspended(false);
    r.set_admin_suspended(false);
    r.set_mail_sent(0);  // a new run: its time-limit warnings are still to come
    *r.mutable_allocation() = c.allocation;
  } else if (from == v1::PENDING && Ended(c.to)) {
    r.set_end_time_ms(now);
  } else if (from == v1::RUNNING && Ended(c.to)) {
    FoldSuspension(r, now);
    // Steps still running are stopped with the job; each node reports how its tasks ended
    // before it reports the job clean there (one ordered stream), which settles what is left.
    r.set_end_time_ms(now);
    set_completing();
  } else if (from == v1::RUNNING && c.to == v1::PENDING) {
    FoldSuspension(r, now);
    EndRunningSteps(r, v1::CANCELLED, now);
    r.set_requeue_count(r.requeue_count() + 1);
    r.set_batch_started(false);
    set_completing();
  }
  return r;
}

void JobManager::Transition(JobEntry& job, const JobChange& change, TimeMs now,
                            store::Mutation& batch) {
  v1::JobRecord next = NextRecord(job.rec(), change, now);
  batch.PutJob(next);
  Apply(job, std::move(next), now);
}

Status JobManager::Transition(JobEntry& job, const JobChange& change, TimeMs now) {
  v1::JobRecord next = NextRecord(job.rec(), change, now);
  store::Mutation m;
  m.PutJob(next);
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  Apply(job, std::move(next), now);
  return Status::Ok();
}

void JobManager::Apply(JobEntry& job, v1::JobRecord next, TimeMs now) {
  const v1::JobState from = job.rec().state();
  MUSTER_CHECK_MSG(next.id() == job.id() && (next.state() == from || Allowed(from, next.state())),
                   "a job's record changes only as the state machine allows");
  job.rec_ = std::move(next);
  Recount(job);
  const v1::JobRecord& r = job.rec();
  const uint64_t id = r.id();
  const v1::JobState to = r.state();
  if (from == v1::PENDING && to != v1::PENDING) UnmarkPending(job);
  if (to == v1::PENDING) MarkPending(job);  // also when a modification changed its spec
  if (Ended(to)) finished_.insert({r.end_time_ms(), id});
  if (from == v1::RUNNING && to != v1::RUNNING && !ledger_.parked_jobs().empty()) {
    // A run that ended suspended: the CPUs it lent are not its own any more.
    for (const auto& na : r.allocation().nodes()) {
      if (std::optional<size_t> i = ctx_.NodeIndex(na.node())) ledger_.DropParked(id, *i);
    }
  }

  if (from == v1::PENDING && to == v1::PENDING) {
    job.request = ToCoreRequest(r);
    ctx_.RequestPass();
  } else if (to == v1::RUNNING) {
    job.started_nodes.clear();
    spdlog::info("start job={} nodes={} partition={}", id, r.allocation().nodes_size(),
                 r.allocation().partition());
    for (int i = 0; i < r.allocation().nodes_size(); ++i) SendLaunch(job, static_cast<size_t>(i));
  } else if (from == v1::PENDING && Ended(to)) {
    ctx_.RequestPass();  // it may have held back lower-priority jobs
  } else if (from == v1::RUNNING && Ended(to)) {
    const std::string why = to == v1::CANCELLED   ? "cancelled"
                            : to == v1::PREEMPTED ? "preempted"
                                                  : "job finished";
    for (const auto& n : r.completing_nodes()) SendTerminate(n, job, why);
    ctx_.RequestPass();
  } else if (from == v1::RUNNING && to == v1::PENDING) {
    // Old-run processes are terminated by run number, so a new run is never touched.
    for (const auto& n : r.completing_nodes()) SendTerminate(n, job, r.reason_detail());
    job.started_nodes.clear();
    ctx_.RequestPass();
    spdlog::warn("job={} requeued (count={}): {}", id, r.requeue_count(), r.reason_detail());
  }
  if (mail_) mail_->OnTransition(from, job, now);
}

void JobManager::SetWaitReason(JobEntry& job, JobReason reason, std::string detail) {
  job.rec_.set_reason(core::ReasonName(reason));
  job.rec_.set_reason_detail(std::move(detail));
}

void JobManager::RequeueOrFail(JobEntry& job, JobReason reason, const std::string& why, TimeMs now,
                               store::Mutation& m) {
  const v1::JobRecord& r = job.rec();
  if (r.state() != v1::RUNNING) return;
  if (r.cancel_requested()) {
    Transition(job, {.to = v1::CANCELLED}, now, m);
    return;
  }
  if (r.spec().no_requeue() || r.spec().interactive()) {
    // An srun/salloc allocation is not requeued: its client's tasks are gone.
    Transition(job, {.to = v1::NODE_FAIL, .reason = reason, .detail = why}, now, m);
    spdlog::warn("job={} NODE_FAIL: {}", r.id(), why);
    return;
  }
  Transition(job, {.to = v1::PENDING, .reason = reason, .detail = "requeued: " + why}, now, m);
}

void JobManager::Preempt(JobEntry& job, uint64_t preemptor, const std::string& why, bool requeue,
                         uint32_t grace_ms, TimeMs now, store::Mutation& m) {
  v1::JobRecord& r = job.rec_;
  // A job already on its way down (cancelled, or preempted before) is left to finish so.
  if (r.state() != v1::RUNNING || r.preempt_time_ms() > 0 || r.cancel_requested()) return;
  r.set_preempt_time_ms(now);
  r.set_preempt_grace_ms(grace_ms);
  r.set_preempted_by(preemptor);
  r.set_preempt_count(r.preempt_count() + 1);
  spdlog::warn("preempt job={} for job={} ({}): {}", r.id(), preemptor, requeue ? "requeue" : "end",
               why);
  if (r.spec().interactive()) {
    // An srun/salloc allocation cannot be requeued: its client's tasks end with it.
    Transition(job, {.to = v1::PREEMPTED, .reason = JobReason::kPreempted, .detail = why}, now, m);
    interactive_.erase(r.id());
    return;
  }
  if (requeue && !r.spec().no_requeue()) {
    Transition(job,
               {.to = v1::PENDING, .reason = JobReason::kPreempted, .detail = "requeued: " + why},
               now, m);
    return;
  }
  Transition(job, {.to = v1::PREEMPTED, .reason = JobReason::kPreempted, .detail = why}, now, m);
}

void JobManager::Suspend(JobEntry& job, uint64_t preemptor, const std::string& why, TimeMs now,
                         store::Mutation& m) {
  v1::JobRecord& r = job.rec_;
  if (r.state() != v1::RUNNING || r.preempt_time_ms() > 0 || r.cancel_requested() ||
      r.suspend_time_ms() > 0) {
    return;
  }
  r.set_admin_suspended(false);
  r.set_preempted_by(preemptor);
  r.set_preempt_count(r.preempt_count() + 1);
  r.set_reason(core::ReasonName(JobReason::kPreempted));
  r.set_reason_detail("suspended: " + why);
  spdlog::warn("suspend job={} for job={}: {}", r.id(), preemptor, why);
  StopRun(job, now, m);
}

void JobManager::SuspendByAdmin(JobEntry& job, const std::string& who, TimeMs now,
                                store::Mutation& m) {
  v1::JobRecord& r = job.rec_;
  if (r.state() != v1::RUNNING || r.preempt_time_ms() > 0 || r.cancel_requested() ||
      r.suspend_time_ms() > 0) {
    return;
  }
  r.set_admin_suspended(true);
  r.set_preempted_by(0);
  r.set_reason(core::ReasonName(JobReason::kNone));
  r.set_reason_detail("suspended by " + who + " (scontrol resume continues it)");
  spdlog::warn("suspend job={} by {}", r.id(), who);
  StopRun(job, now, m);
}

void JobManager::StopRun(JobEntry& job, TimeMs now, store::Mutation& m) {
  v1::JobRecord& r = job.rec_;
  r.set_suspend_time_ms(now);
  m.PutJob(r);
  for (const auto& na : r.allocation().nodes()) {
    if (std::optional<size_t> i = ctx_.NodeIndex(na.node())) ledger_.Park(r.id(), *i);
    SendSuspend(na.node(), job, /*resume=*/false);
  }
  ctx_.RequestPass();
}

void JobManager::ResumeByAdmin(JobEntry& job, const std::string& who, TimeMs now,
                               store::Mutation& m) {
  v1::JobRecord& r = job.rec_;
  if (r.state() != v1::RUNNING || r.suspend_time_ms() == 0) return;
  r.set_admin_suspended(false);
  bool cpus_back = true;
  for (const auto& na : r.allocation().nodes()) {
    std::optional<size_t> i = ctx_.NodeIndex(na.node());
    if (i && !ledger_.CpusBack(r.id(), *i)) cpus_back = false;
  }
  spdlog::info("resume job={} by {}{}", r.id(), who, cpus_back ? "" : " (waits for its CPUs)");
  if (cpus_back) return Resume(job, now, m);
  r.set_reason_detail("resumed by " + who + "; continues once its CPUs are free again");
  m.PutJob(r);
  ctx_.RequestPass();
}

void JobManager::Resume(JobEntry& job, TimeMs now, store::Mutation& m) {
  v1::JobRecord& r = job.rec_;
  if (r.state() != v1::RUNNING || r.suspend_time_ms() == 0) return;
  r.set_suspended_ms(r.suspended_ms() + std::max<TimeMs>(0, now - r.suspend_time_ms()));
  r.set_suspend_time_ms(0);
  r.set_admin_suspended(false);
  r.set_reason(core::ReasonName(JobReason::kNone));
  r.set_reason_detail("resumed after " + std::to_string(r.suspended_ms() / 1000) +
                      " s suspended in all");
  m.PutJob(r);
  spdlog::info("resume job={} (suspended {} ms in all)", r.id(), r.suspended_ms());
  for (const auto& na : r.allocation().nodes()) {
    if (std::optional<size_t> i = ctx_.NodeIndex(na.node())) ledger_.Unpark(r.id(), *i);
    SendSuspend(na.node(), job, /*resume=*/true);
  }
}

void JobManager::EndPastDeadline(TimeMs now) {
  std::vector<uint64_t> late;
  for (uint64_t id : pending_with_deadline_) {
    const v1::JobRecord& r = pending_.at(id)->rec();
    const int64_t deadline = r.spec().deadline_ms();
    if (deadline > 0 &&
        (now >= deadline || (r.time_limit_ms() > 0 && now + r.time_limit_ms() > deadline))) {
      late.push_back(id);
    }
  }
  if (late.empty()) return;
  store::Mutation m;
  for (uint64_t id : late) {
    JobEntry& job = jobs_.at(id);
    const std::string words =
        "it could not end before its deadline " + FormatTimestamp(job.rec().spec().deadline_ms()) +
        (job.rec().time_limit_ms() > 0
             ? " (time limit " + FormatDuration(job.rec().time_limit_ms()) + ")"
             : "");
    Transition(job, {.to = v1::DEADLINE, .reason = JobReason::kDeadLine, .detail = words}, now, m);
    spdlog::info("job={} DEADLINE: {}", id, words);
  }
  ctx_.CommitOrDie(m);
}

void JobManager::EndAllocation(JobEntry& job, v1::JobState state, JobReason reason,
                               const std::string& detail, TimeMs now, int32_t exit_code,
                               int32_t signal) {
  v1::JobRecord& r = job.rec_;
  if (r.end_time_ms() > 0 || (r.state() != v1::PENDING && r.state() != v1::RUNNING)) return;
  store::Mutation m;
  if (r.state() == v1::PENDING) {
    Transition(
        job,
        {.to = v1::CANCELLED,
         .detail = detail.empty() ? "released before it started" : detail + " while pending"},
        now, m);
  } else {
    r.set_exit_code(exit_code);
    r.set_exit_signal(signal);
    JobChange c{.to = state, .reason = reason};
    if (!detail.empty()) c.detail = detail;
    Transition(job, c, now, m);
  }
  interactive_.erase(r.id());
  ctx_.CommitOrDie(m);
  spdlog::info("allocation end job={} state={} {}", r.id(), v1::JobState_Name(r.state()), detail);
}

// ---------------------------------------------------------------------------------------------
// A job's share of one node

void JobManager::ReleaseNode(JobEntry& job, const NodeEntry& node) {
  if (ledger_.Release(job.id(), node.index)) ctx_.RequestPass();
}

void JobManager::LostOnNode(JobEntry& job, const std::string& node_name, const std::string& why,
                            TimeMs now, store::Mutation& m) {
  v1::JobRecord& r = job.rec_;
  // The lost node's share is gone with it: if the node comes back still running something of
  // this job, it is stale there and is terminated before the node takes new work.
  Remove(r.mutable_completing_nodes(), node_name);
  if (const NodeEntry* node = nodes_.Find(node_name)) ReleaseNode(job, *node);
  StepsEndedOnNode(r, node_name, /*lost=*/true, now);
  if (r.state() != v1::RUNNING) {
    if (r.completing_nodes_size() == 0) EndRunningSteps(r, v1::CANCELLED, now);
  } else if (r.cancel_requested()) {
    Transition(job, {.to = v1::CANCELLED}, now, m);
  } else if (KeepsRunningWithout(r, node_name)) {
    DropNode(job, node_name, why);
  } else {
    RequeueOrFail(job, JobReason::kNodeFail, why, now, m);
  }
  // The node is cut off, not known to be off: it may go on running what it ran of this job. A
  // job that may run again waits for it (no job on two sets of nodes at once).
  if (job.rec().state() == v1::PENDING) MarkUnconfirmed(job, node_name);
  m.PutJob(job.rec());
}

bool JobManager::KeepsRunningWithout(const v1::JobRecord& r, const std::string& node_name) {
  // --no-kill, as Slurm's: the job goes on while it has a node left, but never without the node
  // its batch script runs on (an srun/salloc allocation has none: its client is elsewhere).
  const auto& nodes = r.allocation().nodes();
  if (!r.spec().no_kill() || nodes.size() < 2) return false;
  return r.spec().interactive() || nodes[0].node() != node_name;
}

void JobManager::DropNode(JobEntry& job, const std::string& node_name, const std::string& why) {
  // The node leaves the allocation for good: its share was released, new steps and the pass see
  // only the nodes left, and if it comes back still running something of this job, that is stale
  // there (it no longer holds resources for the job) and is terminated.
  auto* nodes = job.rec_.mutable_allocation()->mutable_nodes();
  for (int i = 0; i < nodes->size(); ++i) {
    if ((*nodes)[i].node() != node_name) continue;
    nodes->erase(nodes->begin() + i);
    break;
  }
  job.started_nodes.erase(node_name);
  spdlog::warn("job={} lost node {} ({}); --no-kill: it goes on with {} node(s)", job.id(),
               node_name, why, nodes->size());
}

void JobManager::MarkUnconfirmed(JobEntry& job, const std::string& node_name) {
  NodeEntry* node = nodes_.Find(node_name);
  if (!node) return;  // gone from the configuration: it cannot come back to run anything
  node->unconfirmed_jobs.insert(job.id());
  if (Contains(job.rec().unconfirmed_nodes(), node_name)) return;
  job.rec_.add_unconfirmed_nodes(node_name);
  job.rec_.set_reason_detail(job.rec_.reason_detail() + "; it starts again once " + node_name +
                             " is back and has ended its run there, or an administrator confirms " +
                             node_name + " is down (muster node confirm-down " + node_name + ")");
}

void JobManager::Confirm(NodeEntry& node, uint64_t id, const std::string& how, store::Mutation& m) {
  if (!node.unconfirmed_jobs.erase(id)) return;
  JobEntry* job = Find(id);
  if (!job || !Contains(job->rec().unconfirmed_nodes(), node.name())) return;
  Remove(job->rec_.mutable_unconfirmed_nodes(), node.name());
  m.PutJob(job->rec());
  spdlog::info("job={}: node={} {}; {}", id, node.name(), how,
               job->rec().unconfirmed_nodes_size() == 0 ? "it may start again"
                                                        : "other lost nodes still unconfirmed");
  ctx_.RequestPass();
}

// ---------------------------------------------------------------------------------------------
// Commands

void JobManager::SendLaunch(const JobEntry& job, size_t pos) {
  const v1::JobRecord& r = job.rec();
  v1::ControllerMessage msg;
  v1::LaunchJob* l = msg.mutable_launch_job();
  l->set_job_id(r.id());
  *l->mutable_spec() = r.spec();
  *l->mutable_allocation() = r.allocation();
  l->set_node_id(static_cast<uint32_t>(pos));
  l->set_batch_node(pos == 0 && !r.spec().interactive());
  if (r.has_array()) *l->mutable_array() = r.array();
  if (pos != 0 || r.spec().interactive()) {
    // Only the first node runs the script; the others need the allocation and the identity.
    l->mutable_spec()->clear_script();
    l->mutable_spec()->clear_environment();
  } else if (r.spec().script().empty()) {
    // An array's tasks share one payload under the array's id (records written before that
    // have one per task).
    auto payload = ctx_.store().ReadJobPayload(r.has_array() ? r.array().array_job_id() : r.id());
    if (!payload.ok() && r.has_array()) payload = ctx_.store().ReadJobPayload(r.id());
    if (payload.ok()) {
      l->mutable_spec()->set_script(std::move(*payload->mutable_script()));
      *l->mutable_spec()->mutable_environment() = std::move(*payload->mutable_environment());
    } else {
      // The agent refuses a launch without a script and reports it; the job then fails with
      // that reason rather than running something else.
      spdlog::error("job={}: cannot read its batch script: {}", r.id(),
                    payload.status().ToString());
    }
  }
  l->set_time_limit_ms(r.time_limit_ms());
  l->set_kill_grace_ms(ctx_.scheduling().kill_grace_ms);
  l->set_credential(r.credential());
  l->set_cluster_name(ctx_.config().cluster_name);
  l->set_start_time_ms(r.start_time_ms());
  l->set_suspended_ms(r.suspended_ms());
  l->set_requeue_count(r.requeue_count());
  const std::string& node = r.allocation().nodes(static_cast<int>(pos)).node();
  if (const NodeEntry* n = nodes_.Find(node)) l->set_topology(n->config.topology);
  if (msg.ByteSizeLong() > kMaxAgentMessageBytes) {
    // Cannot happen for a job that passed the submission limits; were it sent, the agent's
    // channel would break on it again at every reconnect. Without its script the agent refuses
    // the launch and the job fails.
    spdlog::error(
        "job={}: its launch is {} bytes, over the agent channel's {}; sent without "
        "its script",
        r.id(), msg.ByteSizeLong(), kMaxAgentMessageBytes);
    l->mutable_spec()->clear_script();
    l->mutable_spec()->clear_environment();
  }
  ctx_.Send(node, std::move(msg));
}

void JobManager::SendTerminate(const std::string& node, const JobEntry& job,
                               const std::string& reason) {
  const v1::JobRecord& r = job.rec();
  v1::ControllerMessage msg;
  auto* t = msg.mutable_terminate_job();
  t->set_job_id(r.id());
  t->set_reason(reason);
  t->set_kill_grace_ms(ctx_.scheduling().kill_grace_ms);
  if (r.preempt_time_ms() > 0) {
    // A preempted run: its --signal (or SIGTERM), then its QoS's grace time to checkpoint.
    t->set_kill_grace_ms(r.preempt_grace_ms());
    t->set_signal(r.spec().signal());
    t->set_signal_batch_only(r.spec().signal_batch_only());
  }
  // A requeued job pends with its old run still cleaning up: that run is the one to stop.
  t->set_run(r.state() == v1::PENDING && r.requeue_count() > 0 ? r.requeue_count() - 1
                                                               : r.requeue_count());
  ctx_.Send(node, std::move(msg));
}

void JobManager::SendSuspend(const std::string& node, const JobEntry& job, bool resume) {
  v1::ControllerMessage msg;
  v1::SuspendJob* s = msg.mutable_suspend_job();
  s->set_job_id(job.id());
  s->set_run(job.rec().requeue_count());
  s->set_resume(resume);
  s->set_suspended_ms(job.rec().suspended_ms());
  ctx_.Send(node, std::move(msg));
}

}  // namespace muster::controller
