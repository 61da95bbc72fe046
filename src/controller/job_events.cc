// JobManager: what agents report about jobs, what a reconnecting agent's report means, and what
// losing a node or a GPU does to the jobs there.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "job_manager.h"
#include "muster/common/strings.h"
#include "name_list.h"
#include "step_state.h"

namespace muster::controller {
namespace {

using core::JobReason;

// TerminateJob.run for "whatever run of this job you have".
constexpr uint32_t kAnyRun = 0xffffffffu;

// Whether the running job's allocation still holds `node` (a node dropped under --no-kill that
// comes back speaks for the same run, but is no longer the job's).
bool Holds(const v1::JobRecord& r, const std::string& node) {
  for (const auto& na : r.allocation().nodes()) {
    if (na.node() == node) return true;
  }
  return false;
}

}  // namespace

void JobManager::OnJobStarted(NodeEntry& node, const v1::JobStarted& e, TimeMs) {
  JobEntry* job = Find(e.job_id());
  if (!job || job->rec().state() != v1::RUNNING || e.run() != job->rec().requeue_count()) return;
  if (!Holds(job->rec(), node.name())) return;
  job->started_nodes.insert(node.name());
  const auto& nodes = job->rec().allocation().nodes();
  if (!nodes.empty() && nodes[0].node() == node.name() && !job->rec().batch_started()) {
    job->rec_.set_batch_started(true);
    store::Mutation m;
    m.PutJob(job->rec());
    // Buffered: if a crash loses it, reconciliation relaunches (or requeues) instead; nothing that
    // was acknowledged depends on it.
    ctx_.CommitOrDie(m, store::Durability::kBuffered);
  }
}

void JobManager::OnLaunchFailed(NodeEntry& node, const v1::JobLaunchFailed& e, TimeMs now) {
  JobEntry* job = Find(e.job_id());
  if (!job || job->rec().state() != v1::RUNNING || e.run() != job->rec().requeue_count()) return;
  if (!Holds(job->rec(), node.name())) return;
  spdlog::warn("job={} failed to launch on node={}: {}", e.job_id(), node.name(), e.message());
  store::Mutation m;
  if (e.node_fault()) {
    // Slurm's rule for a failed prolog: the node is suspect, the job is not.
    nodes_.SetCheckDrain(node, "prolog", e.message(), now, m);
    RequeueOrFail(*job, JobReason::kProlog, node.name() + ": " + e.message(), now, m);
    ctx_.CommitOrDie(m);
    return;
  }
  job->rec_.set_exit_code(1);
  Transition(*job,
             {.to = v1::FAILED,
              .reason = JobReason::kJobLaunchFailure,
              .detail = node.name() + ": " + e.message()},
             now, m);
  ctx_.CommitOrDie(m);
}

void JobManager::OnBatchExited(NodeEntry& node, const v1::BatchExited& e, TimeMs now) {
  JobEntry* job = Find(e.job_id());
  if (!job || job->rec().state() != v1::RUNNING || e.run() != job->rec().requeue_count()) return;
  const auto& nodes = job->rec().allocation().nodes();
  if (nodes.empty() || nodes[0].node() != node.name()) return;
  job->rec_.set_exit_code(e.exit_code());
  job->rec_.set_exit_signal(e.signal());
  JobChange c;
  if (job->rec().cancel_requested()) {
    c.to = v1::CANCELLED;
  } else if (e.timed_out()) {
    c.to = v1::TIMEOUT;
    c.reason = JobReason::kTimeLimit;
  } else if (e.exit_code() == 0 && e.signal() == 0) {
    c.to = v1::COMPLETED;
  } else {
    c.to = v1::FAILED;
    c.reason = e.signal() ? JobReason::kSignal : JobReason::kNonZeroExitCode;
  }
  store::Mutation m;
  Transition(*job, c, now, m);
  ctx_.CommitOrDie(m);
  spdlog::info("end job={} state={} exit={}:{}", e.job_id(), v1::JobState_Name(c.to), e.exit_code(),
               e.signal());
}

void JobManager::OnJobCleaned(NodeEntry& node, const v1::JobCleaned& e, TimeMs now) {
  if (!e.prolog_error().empty()) {
    store::Mutation m;
    nodes_.SetCheckDrain(node, "prolog", e.prolog_error(), now, m);
    ctx_.CommitOrDie(m);
  }
  if (!e.epilog_error().empty()) {
    store::Mutation m;
    nodes_.SetCheckDrain(
        node, "epilog",
        "epilog failed after job " + std::to_string(e.job_id()) + ": " + e.epilog_error(), now, m);
    ctx_.CommitOrDie(m);
  }
  if (node.stale_jobs.erase(e.job_id())) {
    spdlog::info("node={} cleaned stale job={}", node.name(), e.job_id());
    ctx_.RequestPass();
  }
  if (node.unconfirmed_jobs.count(e.job_id())) {
    // Buffered: the job's next start is a synced write after it; a crash before that leaves the
    // job waiting until the node registers again without it.
    store::Mutation m;
    Confirm(node, e.job_id(), "ended its old run", m);
    ctx_.CommitOrDie(m, store::Durability::kBuffered);
  }
  JobEntry* job = Find(e.job_id());
  // Only nodes still cleaning up are released; a requeued job cannot run again before all of its
  // old nodes are clean, so a running job never has completing nodes.
  if (!job || !Contains(job->rec().completing_nodes(), node.name())) return;
  Remove(job->rec_.mutable_completing_nodes(), node.name());
  ReleaseNode(*job, node);
  StepsEndedOnNode(job->rec_, node.name(), /*lost=*/false, now);
  if (job->rec_.completing_nodes_size() == 0) EndRunningSteps(job->rec_, v1::CANCELLED, now);
  // Recorded with each node, not only the last: the node's resources may go to another job at
  // once, and a recovery that read this node as still completing would hold them for this job
  // too. Buffered: the log is sequential, so any later synced write (that job's start) makes
  // this durable first; after a crash before that, the node's registration says it again.
  store::Mutation m;
  m.PutJob(job->rec());
  ctx_.CommitOrDie(m, store::Durability::kBuffered);
}

void JobManager::ReconcileNode(NodeEntry& node, TimeMs now) {
  const std::string& name = node.name();
  std::set<uint64_t> reported(node.reported_jobs.begin(), node.reported_jobs.end());
  // A job the agent re-adopted from its spool runs only if what it read back is what the
  // controller launched there: the same run, user and credential. One that differs is ended and
  // counts as lost there (never launched again: something ran).
  std::set<uint64_t> forged;
  for (const v1::AdoptedJob& a : node.adopted_jobs) {
    if (!reported.count(a.job_id()) || !ledger_.Holds(node.index, a.job_id())) continue;
    const JobEntry* job = Find(a.job_id());
    if (!job || job->rec().state() != v1::RUNNING) continue;  // being ended there anyway
    if (a.run() == job->rec().requeue_count() && a.uid() == job->rec().spec().uid() &&
        ConstantTimeEquals(a.credential(), job->rec().credential())) {
      continue;
    }
    forged.insert(a.job_id());
    spdlog::error(
        "node={} re-adopted job={} with a run, user or credential that the controller never "
        "launched there; ending it",
        name, a.job_id());
  }
  for (uint64_t id : reported) {
    if (ledger_.Holds(node.index, id) && !forged.count(id)) {
      // Ours. A terminate sent while the node had no session was lost: send it again.
      JobEntry* job = Find(id);
      if (job && (job->rec().state() != v1::RUNNING || job->rec().cancel_requested())) {
        SendTerminate(name, *job, job->rec().cancel_requested() ? "cancelled" : "job finished");
      } else if (job && (job->rec().suspend_time_ms() > 0 || job->rec().suspended_ms() > 0)) {
        // A suspend or resume sent while the node had no session was lost: say it again (the
        // agent acts on the state it is told, so a repeat changes nothing).
        SendSuspend(name, *job, /*resume=*/job->rec().suspend_time_ms() == 0);
      }
      continue;
    }
    node.stale_jobs.insert(id);
    if (!forged.count(id)) {
      spdlog::warn("node={} runs job={}, which does not hold resources there; terminating it", name,
                   id);
    }
    v1::ControllerMessage msg;
    auto* t = msg.mutable_terminate_job();
    t->set_job_id(id);
    t->set_reason(forged.count(id) ? "its state here does not match the controller's record"
                                   : "unknown to the controller");
    t->set_kill_grace_ms(ctx_.scheduling().kill_grace_ms);
    t->set_run(kAnyRun);
    ctx_.Send(name, std::move(msg));
  }
  store::Mutation m;
  // Jobs requeued while this node was lost: one it no longer runs is confirmed now; one it still
  // runs is stale (terminated above) and confirmed when the node reports it cleaned.
  const std::set<uint64_t> unconfirmed = node.unconfirmed_jobs;
  for (uint64_t id : unconfirmed) {
    if (!reported.count(id)) Confirm(node, id, "came back without it", m);
  }
  std::vector<uint64_t> held;
  for (const auto& [id, placement] : ledger_.held(node.index)) held.push_back(id);
  for (uint64_t id : held) {
    if (reported.count(id) && !forged.count(id)) continue;
    JobEntry* job = Find(id);
    if (!job) continue;
    if (job->rec().state() == v1::RUNNING) {
      if (!job->started_nodes.count(name) && !node.lost_jobs.count(id) && !forged.count(id)) {
        // The launch never arrived (or the controller restarted before sending it): send again.
        // Not when the agent says it ran there and lost its state: its JobStarted may simply
        // have been lost with the old session, and the script must not run twice.
        const auto& nodes = job->rec().allocation().nodes();
        for (int i = 0; i < nodes.size(); ++i) {
          if (nodes[i].node() == name) SendLaunch(*job, static_cast<size_t>(i));
        }
      } else if (job->rec().cancel_requested()) {
        Transition(*job, {.to = v1::CANCELLED}, now, m);
      } else {
        // The agent came back without it (its spool state was lost, corrupt or not what the
        // controller launched): what ran there is gone and how it ended is unknown, so the job
        // fails and says why.
        const std::string why =
            forged.count(id)
                ? "the agent on " + name +
                      " restarted and re-adopted it with a state that does not match the "
                      "controller's record (ended there)"
                : "the agent on " + name +
                      " restarted and no longer runs it (its state there was lost)";
        Transition(*job, {.to = v1::FAILED, .reason = JobReason::kNodeFail, .detail = why}, now, m);
        spdlog::warn("job={} FAILED: {}", id, why);
      }
    } else {
      // Finished (or requeued) and the agent has nothing left of it: it is clean there (and
      // recorded so before the node takes new work, as in JobCleaned).
      Remove(job->rec_.mutable_completing_nodes(), name);
      ReleaseNode(*job, node);
      m.PutJob(job->rec());
    }
  }
  ctx_.CommitOrDie(m);
  node.reported_jobs.clear();
  node.lost_jobs.clear();
  node.adopted_jobs.clear();
  ctx_.RequestPass();
}

void JobManager::NodeLost(NodeEntry& node, const std::string& why, TimeMs now) {
  std::vector<uint64_t> ids;
  for (const auto& [id, placement] : ledger_.held(node.index)) ids.push_back(id);
  spdlog::warn("node={} DOWN: {}; {} job(s) affected", node.name(), why, ids.size());
  nodes_.MarkDown(node);
  store::Mutation m;
  for (uint64_t id : ids) {
    if (JobEntry* job = Find(id)) {
      LostOnNode(*job, node.name(), "node " + node.name() + " " + why, now, m);
    }
  }
  ctx_.CommitOrDie(m);
}

Result<v1::UpdateNodeResponse> JobManager::ConfirmDown(const std::vector<NodeEntry*>& nodes,
                                                       const std::string& who) {
  // Written first, applied after: a request's failed write changes nothing.
  std::map<uint64_t, v1::JobRecord> next;
  for (const NodeEntry* node : nodes) {
    for (uint64_t id : node->unconfirmed_jobs) {
      const JobEntry* job = Find(id);
      if (!job) continue;
      Remove(next.try_emplace(id, job->rec()).first->second.mutable_unconfirmed_nodes(),
             node->name());
    }
  }
  store::Mutation m;
  for (const auto& [id, rec] : next) m.PutJob(rec);
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  store::Mutation committed;  // the same records again
  v1::UpdateNodeResponse resp;
  for (NodeEntry* node : nodes) {
    const std::set<uint64_t> ids = node->unconfirmed_jobs;
    for (uint64_t id : ids) Confirm(*node, id, "confirmed down by " + who, committed);
    resp.add_updated(node->name());
  }
  return resp;
}

void JobManager::GpuFailed(NodeEntry& node, uint32_t gpu, const std::string& why, TimeMs now,
                           store::Mutation& m) {
  std::vector<uint64_t> ids;
  for (const auto& [id, placement] : ledger_.held(node.index)) ids.push_back(id);
  for (uint64_t id : ids) {
    JobEntry* job = Find(id);
    if (!job || job->rec().state() != v1::RUNNING) continue;
    for (const auto& na : job->rec().allocation().nodes()) {
      if (na.node() != node.name()) continue;
      bool uses = std::find(na.gpu_indices().begin(), na.gpu_indices().end(), gpu) !=
                  na.gpu_indices().end();
      for (const auto& gr : na.gres()) {
        uses = uses || std::find(gr.on_gpu().begin(), gr.on_gpu().end(), gpu) != gr.on_gpu().end();
      }
      if (uses) RequeueOrFail(*job, JobReason::kGpuFail, why, now, m);
    }
  }
}

}  // namespace muster::controller
