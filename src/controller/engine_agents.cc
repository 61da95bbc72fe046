// Engine: node agents (registration, sessions, liveness) and the running-job state machine.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "muster/common/check.h"
#include "muster/common/strings.h"
#include "muster/controller/engine.h"

namespace muster::controller {
namespace {

constexpr uint32_t kAnyRun = 0xffffffffu;

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void Remove(google::protobuf::RepeatedPtrField<std::string>* v, const std::string& s) {
  auto it = std::find(v->begin(), v->end(), s);
  if (it != v->end()) v->erase(it);
}

std::string Seconds(TimeMs ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace

void Engine::CommitOrDie(const store::Mutation& m, store::Durability durability) {
  Status s = Commit(m, durability);
  if (!s.ok()) {
    spdlog::critical(
        "state store write failed: {}; exiting so that recovery restarts from the "
        "last durable state",
        s.ToString());
    spdlog::default_logger()->flush();
    std::abort();
  }
}

// ---------------------------------------------------------------------------------------------
// Registration and sessions

Result<v1::RegisterResponse> Engine::RegisterNode(const v1::RegisterRequest& req, TimeMs now) {
  const v1::NodeInventory& inv = req.inventory();
  NodeEntry* node = FindNode(inv.name());
  if (!node) {
    return NotFound("node '" + inv.name() + "' is not in the controller's configuration (" +
                    options_.config.source + ")");
  }
  if (req.instance_id().empty()) return InvalidArgument("register without an instance id");
  bool restarted = node->registered && node->instance_id != req.instance_id();
  node->registered = true;
  node->session = false;  // until the new stream says Hello
  node->instance_id = req.instance_id();
  node->step_address = inv.step_address();
  node->inventory = inv;
  node->last_heard_ms = now;
  if (node->down || node->not_responding) {
    spdlog::info("node={} is back ({})", inv.name(),
                 node->down ? "was DOWN" : "was not responding");
  }
  node->down = false;
  node->not_responding = false;
  node->reported_jobs.assign(req.running_job_ids().begin(), req.running_job_ids().end());
  node->lost_jobs = {req.lost_job_ids().begin(), req.lost_job_ids().end()};
  const NodeConfig& c = node->config;
  store::Mutation m;
  ApplyNodeChecks(*node, now, m);
  if (restarted) StepsLostOnNode(*node, now, m);
  MUSTER_RETURN_IF_ERROR(Commit(m));
  spdlog::info("register node={} instance={} gpus={} ({}) step_address={} restarted={} jobs={}",
               inv.name(), req.instance_id(), inv.gpus_size(), inv.gpu_source(), inv.step_address(),
               restarted, req.running_job_ids_size());
  v1::RegisterResponse resp;
  resp.set_epoch(meta_.epoch());
  resp.set_cpus(c.cpus);
  resp.set_memory_mb(c.memory_mb);
  resp.set_gpus(c.gpus);
  resp.set_gpu_type(c.gpu_type);
  for (const auto& p : options_.config.partitions) {
    if (std::find(p.nodes.begin(), p.nodes.end(), c.name) != p.nodes.end()) {
      resp.add_partitions(p.name);
    }
  }
  resp.set_topology(c.topology);
  resp.set_heartbeat_interval_ms(options_.config.scheduling.heartbeat_interval_ms);
  resp.set_cluster_name(options_.config.cluster_name);
  return resp;
}

Status Engine::AttachSession(const v1::Hello& hello, TimeMs now) {
  NodeEntry* node = FindNode(hello.node());
  if (!node || !node->registered || node->instance_id != hello.instance_id()) {
    return FailedPrecondition("node '" + hello.node() +
                              "' has not registered with this instance id; register first");
  }
  node->session = true;
  node->last_heard_ms = now;

  // Reconcile what the agent holds with what this controller believes.
  std::set<uint64_t> reported(node->reported_jobs.begin(), node->reported_jobs.end());
  for (uint64_t id : reported) {
    if (node->jobs.count(id)) {
      // Ours. A terminate sent while the node had no session was lost: send it again.
      JobEntry* job = FindJob(id);
      if (job && (job->rec.state() != v1::RUNNING || job->rec.cancel_requested())) {
        SendTerminate(node->config.name, *job,
                      job->rec.cancel_requested() ? "cancelled" : "job finished");
      }
      continue;
    }
    node->stale_jobs.insert(id);
    spdlog::warn("node={} runs job={}, which does not hold resources there; terminating it",
                 node->config.name, id);
    v1::ControllerMessage msg;
    auto* t = msg.mutable_terminate_job();
    t->set_job_id(id);
    t->set_reason("unknown to the controller");
    t->set_kill_grace_ms(options_.config.scheduling.kill_grace_ms);
    t->set_run(kAnyRun);
    Send(node->config.name, std::move(msg));
  }
  store::Mutation m;
  std::vector<uint64_t> held(node->jobs.begin(), node->jobs.end());
  for (uint64_t id : held) {
    if (reported.count(id)) continue;
    JobEntry* job = FindJob(id);
    if (!job) continue;
    if (job->rec.state() == v1::RUNNING) {
      if (!job->started_nodes.count(node->config.name) && !node->lost_jobs.count(id)) {
        // The launch never arrived (or the controller restarted before sending it): send again.
        // Not when the agent says it ran there and lost its state: its JobStarted may simply
        // have been lost with the old session, and the script must not run twice.
        auto& nodes = job->rec.allocation().nodes();
        for (int i = 0; i < nodes.size(); ++i) {
          if (nodes[i].node() == node->config.name) SendLaunch(*job, static_cast<size_t>(i));
        }
      } else {
        // The agent came back without it (its spool state was lost or corrupt): what ran there
        // is gone and how it ended is unknown, so the job fails and says why.
        const std::string why = "the agent on " + node->config.name +
                                " restarted and no longer runs it (its state there was lost)";
        if (job->rec.cancel_requested()) {
          FinishJob(*job, v1::CANCELLED, "None", now, m);
        } else {
          job->rec.set_reason_detail(why);
          FinishJob(*job, v1::FAILED, "NodeFail", now, m);
          spdlog::warn("job={} FAILED: {}", id, why);
        }
      }
    } else {
      // Finished (or requeued) and the agent has nothing left of it: it is clean there.
      Remove(job->rec.mutable_completing_nodes(), node->config.name);
      ReleaseNode(*job, *node);
      if (job->rec.completing_nodes_size() == 0) m.PutJob(job->rec);
    }
  }
  CommitOrDie(m);
  node->reported_jobs.clear();
  node->lost_jobs.clear();
  schedule_requested_ = true;
  return Status::Ok();
}

void Engine::DetachSession(const std::string& name, const std::string& instance_id) {
  NodeEntry* node = FindNode(name);
  if (node && node->instance_id == instance_id && node->session) {
    node->session = false;
    spdlog::info("node={} session closed; liveness decides what happens next", name);
  }
}

void Engine::OnAgentMessage(const std::string& name, const v1::AgentMessage& msg, TimeMs now) {
  NodeEntry* node = FindNode(name);
  if (!node) return;
  if (node->down) {
    // Declared lost, but talking again on its old session: it must register anew so that what
    // it still runs is reconciled (its jobs were requeued meanwhile).
    outgoing_.push_back({name, {}, true});
    return;
  }
  node->last_heard_ms = now;
  if (node->not_responding && !node->down) {
    node->not_responding = false;
    schedule_requested_ = true;
    spdlog::info("node={} is responding again", name);
  }
  switch (msg.msg_case()) {
    case v1::AgentMessage::kHeartbeat:
      break;
    case v1::AgentMessage::kJobStarted:
      OnJobStarted(*node, msg.job_started(), now);
      break;
    case v1::AgentMessage::kJobLaunchFailed:
      OnLaunchFailed(*node, msg.job_launch_failed(), now);
      break;
    case v1::AgentMessage::kBatchExited:
      OnBatchExited(*node, msg.batch_exited(), now);
      break;
    case v1::AgentMessage::kJobCleaned:
      OnJobCleaned(*node, msg.job_cleaned(), now);
      break;
    case v1::AgentMessage::kGpuHealth:
      OnGpuHealth(*node, msg.gpu_health(), now);
      break;
    case v1::AgentMessage::kNodeHealth:
      OnNodeHealth(*node, msg.node_health(), now);
      break;
    case v1::AgentMessage::kStepEnded:
      OnStepEnded(*node, msg.step_ended(), now);
      break;
    case v1::AgentMessage::kHello:
    case v1::AgentMessage::MSG_NOT_SET:
      spdlog::warn("node={} sent an unexpected message ({}); ignored", name,
                   static_cast<int>(msg.msg_case()));
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Job events from agents

void Engine::OnJobStarted(NodeEntry& node, const v1::JobStarted& e, TimeMs) {
  JobEntry* job = FindJob(e.job_id());
  if (!job || job->rec.state() != v1::RUNNING || e.run() != job->rec.requeue_count()) return;
  job->started_nodes.insert(node.config.name);
  const auto& nodes = job->rec.allocation().nodes();
  if (!nodes.empty() && nodes[0].node() == node.config.name && !job->rec.batch_started()) {
    job->rec.set_batch_started(true);
    store::Mutation m;
    m.PutJob(job->rec);
    // Buffered: if a crash loses it, reconciliation relaunches (or requeues) instead; nothing that
    // was acknowledged depends on it.
    CommitOrDie(m, store::Durability::kBuffered);
  }
}

void Engine::OnLaunchFailed(NodeEntry& node, const v1::JobLaunchFailed& e, TimeMs now) {
  JobEntry* job = FindJob(e.job_id());
  if (!job || job->rec.state() != v1::RUNNING || e.run() != job->rec.requeue_count()) return;
  spdlog::warn("job={} failed to launch on node={}: {}", e.job_id(), node.config.name, e.message());
  store::Mutation m;
  if (e.node_fault()) {
    // Slurm's rule for a failed prolog: the node is suspect, the job is not.
    SetCheckDrain(node, "prolog", e.message(), now, m);
    RequeueOrFail(*job, "Prolog", node.config.name + ": " + e.message(), now, m);
    CommitOrDie(m);
    return;
  }
  job->rec.set_exit_code(1);
  FinishJob(*job, v1::FAILED, "JobLaunchFailure", now, m);
  job->rec.set_reason_detail(node.config.name + ": " + e.message());
  m.PutJob(job->rec);
  CommitOrDie(m);
}

void Engine::OnBatchExited(NodeEntry& node, const v1::BatchExited& e, TimeMs now) {
  JobEntry* job = FindJob(e.job_id());
  if (!job || job->rec.state() != v1::RUNNING || e.run() != job->rec.requeue_count()) return;
  const auto& nodes = job->rec.allocation().nodes();
  if (nodes.empty() || nodes[0].node() != node.config.name) return;
  job->rec.set_exit_code(e.exit_code());
  job->rec.set_exit_signal(e.signal());
  v1::JobState state;
  std::string reason = "None";
  if (job->rec.cancel_requested()) {
    state = v1::CANCELLED;
  } else if (e.timed_out()) {
    state = v1::TIMEOUT;
    reason = "TimeLimit";
    job->rec.set_timed_out(true);
  } else if (e.exit_code() == 0 && e.signal() == 0) {
    state = v1::COMPLETED;
  } else {
    state = v1::FAILED;
    reason = e.signal() ? "Signal" : "NonZeroExitCode";
  }
  store::Mutation m;
  FinishJob(*job, state, reason, now, m);
  CommitOrDie(m);
  spdlog::info("end job={} state={} exit={}:{}", e.job_id(), v1::JobState_Name(state),
               e.exit_code(), e.signal());
}

void Engine::OnJobCleaned(NodeEntry& node, const v1::JobCleaned& e, TimeMs now) {
  if (!e.prolog_error().empty()) {
    store::Mutation m;
    SetCheckDrain(node, "prolog", e.prolog_error(), now, m);
    CommitOrDie(m);
  }
  if (!e.epilog_error().empty()) {
    store::Mutation m;
    SetCheckDrain(node, "epilog",
                  "epilog failed after job " + std::to_string(e.job_id()) + ": " + e.epilog_error(),
                  now, m);
    CommitOrDie(m);
  }
  if (node.stale_jobs.erase(e.job_id())) {
    spdlog::info("node={} cleaned stale job={}", node.config.name, e.job_id());
    schedule_requested_ = true;
  }
  JobEntry* job = FindJob(e.job_id());
  // Only nodes still cleaning up are released; a requeued job cannot run again before all of its
  // old nodes are clean, so a running job never has completing nodes.
  if (!job || !Contains(job->rec.completing_nodes(), node.config.name)) return;
  Remove(job->rec.mutable_completing_nodes(), node.config.name);
  ReleaseNode(*job, node);
  StepsEndedOnNode(*job, node.config.name, /*lost=*/false, now);
  if (job->rec.completing_nodes_size() == 0) {
    EndRunningSteps(job->rec, v1::CANCELLED, now);
    store::Mutation m;
    m.PutJob(job->rec);
    // Buffered: after a crash the node's next registration tells again that it is clean.
    CommitOrDie(m, store::Durability::kBuffered);
  }
}

// ---------------------------------------------------------------------------------------------
// The job state machine

void Engine::FinishJob(JobEntry& job, v1::JobState state, const std::string& reason, TimeMs now,
                       store::Mutation& m) {
  v1::JobRecord& r = job.rec;
  r.set_state(state);
  r.set_reason(reason);
  r.set_end_time_ms(now);
  finished_.insert({now, r.id()});
  // Steps still running are stopped with the job; each node reports how its tasks ended before
  // it reports the job clean there (one ordered stream), which settles what is left.
  r.clear_completing_nodes();
  for (const auto& na : r.allocation().nodes()) {
    NodeEntry* node = FindNode(na.node());
    if (node && node->jobs.count(r.id())) r.add_completing_nodes(na.node());
  }
  m.PutJob(r);
  TerminateOnNodes(job, state == v1::CANCELLED ? "cancelled" : "job finished");
  schedule_requested_ = true;
}

void Engine::TerminateOnNodes(JobEntry& job, const std::string& reason) {
  for (const auto& n : job.rec.completing_nodes()) SendTerminate(n, job, reason);
}

void Engine::SendTerminate(const std::string& node, const JobEntry& job,
                           const std::string& reason) {
  const v1::JobRecord& r = job.rec;
  v1::ControllerMessage msg;
  auto* t = msg.mutable_terminate_job();
  t->set_job_id(r.id());
  t->set_reason(reason);
  t->set_kill_grace_ms(options_.config.scheduling.kill_grace_ms);
  // A requeued job pends with its old run still cleaning up: that run is the one to stop.
  t->set_run(r.state() == v1::PENDING && r.requeue_count() > 0 ? r.requeue_count() - 1
                                                               : r.requeue_count());
  Send(node, std::move(msg));
}

void Engine::JobLostOnNode(JobEntry& job, const std::string& node_name, const std::string& why,
                           TimeMs now, store::Mutation& m) {
  v1::JobRecord& r = job.rec;
  // The lost node's share is gone with it: if the node comes back still running something of
  // this job, it is stale there and is terminated before the node takes new work.
  Remove(r.mutable_completing_nodes(), node_name);
  if (NodeEntry* node = FindNode(node_name)) ReleaseNode(job, *node);
  StepsEndedOnNode(job, node_name, /*lost=*/true, now);
  if (r.state() != v1::RUNNING) {
    if (r.completing_nodes_size() == 0) EndRunningSteps(r, v1::CANCELLED, now);
    m.PutJob(r);
    return;
  }
  if (r.cancel_requested()) {
    FinishJob(job, v1::CANCELLED, "None", now, m);
    return;
  }
  RequeueOrFail(job, "NodeFail", why, now, m);
}

void Engine::RequeueOrFail(JobEntry& job, const std::string& reason, const std::string& why,
                           TimeMs now, store::Mutation& m) {
  v1::JobRecord& r = job.rec;
  if (r.state() != v1::RUNNING) return;
  if (r.cancel_requested()) {
    FinishJob(job, v1::CANCELLED, "None", now, m);
    return;
  }
  if (r.spec().no_requeue() || r.spec().interactive()) {
    // An srun/salloc allocation is not requeued: its client's tasks are gone.
    FinishJob(job, v1::NODE_FAIL, reason, now, m);
    r.set_reason_detail(why);
    m.PutJob(r);
    spdlog::warn("job={} NODE_FAIL: {}", r.id(), why);
    return;
  }
  // Requeue the whole gang: stop it everywhere, then it pends until every node is clean.
  EndRunningSteps(r, v1::CANCELLED, now);
  r.set_state(v1::PENDING);
  pending_.insert(r.id());
  r.set_requeue_count(r.requeue_count() + 1);
  r.set_reason(reason);
  r.set_reason_detail("requeued: " + why);
  r.set_batch_started(false);
  r.clear_completing_nodes();
  for (const auto& na : r.allocation().nodes()) {
    NodeEntry* other = FindNode(na.node());
    if (other && other->jobs.count(r.id())) r.add_completing_nodes(na.node());
  }
  m.PutJob(r);
  // Old-run processes are terminated by run number, so a new run is never touched.
  TerminateOnNodes(job, "requeued: " + why);
  job.started_nodes.clear();
  schedule_requested_ = true;
  spdlog::warn("job={} requeued (count={}): {}", r.id(), r.requeue_count(), why);
}

void Engine::NodeLost(NodeEntry& node, const std::string& why, TimeMs now) {
  node.down = true;
  node.not_responding = true;
  spdlog::warn("node={} DOWN: {}; {} job(s) affected", node.config.name, why, node.jobs.size());
  store::Mutation m;
  std::vector<uint64_t> ids(node.jobs.begin(), node.jobs.end());
  for (uint64_t id : ids) {
    JobEntry* job = FindJob(id);
    if (job) JobLostOnNode(*job, node.config.name, "node " + node.config.name + " " + why, now, m);
  }
  node.stale_jobs.clear();  // whatever ran there is re-examined when it registers again
  CommitOrDie(m);
  outgoing_.push_back({node.config.name, {}, true});
}

void Engine::Tick(TimeMs now) {
  const SchedulingConfig& s = options_.config.scheduling;
  // Priorities age and forecasts drift: pending work gets a pass at least this often.
  if (!pending_.empty() && now - last_pass_ms_ >= static_cast<TimeMs>(s.sched_max_interval_ms)) {
    schedule_requested_ = true;
  }
  for (auto& node : nodes_) {
    if (node.down) continue;
    TimeMs silent = now - node.last_heard_ms;
    if (!node.registered) {
      // Never registered since this controller started.
      if (silent > static_cast<TimeMs>(s.node_down_ms)) {
        NodeLost(node,
                 "did not register within " + Seconds(s.node_down_ms) + " of the controller start",
                 now);
      }
      continue;
    }
    if (silent > static_cast<TimeMs>(s.node_down_ms)) {
      NodeLost(node, "not responding for " + Seconds(silent), now);
    } else if (silent > static_cast<TimeMs>(s.node_not_responding_ms) && !node.not_responding) {
      node.not_responding = true;
      spdlog::warn("node={} NOT_RESPONDING: silent for {}", node.config.name, Seconds(silent));
    }
  }
  // Finished jobs leave the live set after the retention time; their records move to history.
  store::Mutation m;
  std::vector<std::pair<TimeMs, uint64_t>> purge;
  for (const auto& entry : finished_) {
    if (now - entry.first < static_cast<TimeMs>(s.finished_job_retention_ms)) break;
    const JobEntry& job = jobs_.at(entry.second);
    if (IsActive(job.rec)) continue;  // still cleaning up somewhere
    m.ArchiveJob(job.rec);
    purge.push_back(entry);
    if (purge.size() >= 10'000) break;  // bound one write
  }
  if (!purge.empty()) {
    // Buffered: a lost archive write only means the jobs are archived again later.
    Status st = Commit(m, store::Durability::kBuffered);
    if (st.ok()) {
      for (const auto& entry : purge) {
        jobs_.erase(entry.second);
        finished_.erase(entry);
      }
      std::erase_if(job_order_, [&](const auto& e) { return !jobs_.count(e.first); });
    } else {
      spdlog::error("cannot archive {} finished jobs (will retry): {}", purge.size(),
                    st.ToString());
    }
  }
  if (!interactive_.empty()) CheckAllocations(now);
  PurgeHistory(now);
}

void Engine::PurgeHistory(TimeMs now) {
  const uint32_t days = options_.config.scheduling.accounting_retention_days;
  constexpr TimeMs kEvery = 3'600'000;  // hourly is plenty for a retention counted in days
  if (days == 0 || (last_history_purge_ms_ != 0 && now - last_history_purge_ms_ < kEvery)) return;
  last_history_purge_ms_ = now;
  const TimeMs cutoff = now - static_cast<TimeMs>(days) * 86'400'000;
  store::Mutation m;
  // Ids grow with time, so the old records come first; a late-ending job with a small id waits
  // for a later purge. Bounded so that one purge never holds the strand for long.
  Status s = store_->ScanHistory(0, [&](const v1::JobRecord& r) {
    const TimeMs ended = r.end_time_ms() > 0 ? r.end_time_ms() : r.submit_time_ms();
    if (ended >= cutoff) return false;
    m.DeleteHistory(r.id());
    return m.size() < 10'000;
  });
  if (s.ok()) s = Commit(m, store::Durability::kBuffered);
  if (!s.ok()) spdlog::error("accounting retention purge failed (will retry): {}", s.ToString());
  if (!m.empty() && s.ok()) {
    spdlog::info("accounting: dropped {} job record(s) older than {} days", m.size(), days);
  }
}

}  // namespace muster::controller

namespace muster::controller {

// ---------------------------------------------------------------------------------------------
// Hardware reconciliation and health

std::string Engine::HardwareShortfall(const NodeEntry& node) const {
  const NodeConfig& c = node.config;
  const v1::NodeInventory& inv = node.inventory;
  std::vector<std::string> missing;
  if (inv.cpus() < c.cpus) {
    missing.push_back("CPUs: " + std::to_string(inv.cpus()) + " of " + std::to_string(c.cpus) +
                      " configured");
  }
  if (inv.memory_mb() < c.memory_mb) {
    missing.push_back("memory: " + std::to_string(inv.memory_mb()) + " of " +
                      std::to_string(c.memory_mb) + " MB configured");
  }
  if (c.gpus > 0) {
    // Whole GPUs of the configured type (a GPU in MIG mode is used as its slices).
    uint32_t usable = 0;
    std::map<std::string, uint32_t> other_types;
    for (const auto& g : inv.gpus()) {
      if (g.mig_enabled()) continue;
      if (c.gpu_type.empty() || EqualsIgnoreCase(g.type(), c.gpu_type)) {
        ++usable;
      } else {
        ++other_types[g.type()];
      }
    }
    if (usable < c.gpus) {
      std::string what = "GPUs: " + std::to_string(usable) +
                         (c.gpu_type.empty() ? "" : " " + c.gpu_type) + " of " +
                         std::to_string(c.gpus) + " configured";
      for (const auto& [type, n] : other_types)
        what += " (found " + std::to_string(n) + " " + type + ")";
      missing.push_back(what);
    }
  }
  // MIG slices, checked when the agent reports MIG at all (fixtures without MIG say nothing).
  bool reports_mig = false;
  std::map<std::string, uint32_t> slices;
  for (const auto& g : inv.gpus()) {
    reports_mig = reports_mig || g.mig_enabled();
    for (const auto& d : g.mig_devices()) ++slices[ToLower(d.profile())];
  }
  if (reports_mig) {
    for (const auto& gr : c.gres) {
      if (gr.name != "gpu" || gr.type.empty()) continue;
      uint32_t have = slices[ToLower(gr.type)];
      if (have < gr.count) {
        missing.push_back("MIG " + gr.type + ": " + std::to_string(have) + " of " +
                          std::to_string(gr.count) + " configured");
      }
    }
  }
  return Join(missing, "; ");
}

void Engine::SetCheckDrain(NodeEntry& node, const std::string& by, const std::string& reason,
                           TimeMs now, store::Mutation& m) {
  v1::NodeRecord& r = node.rec;
  if (!reason.empty()) {
    if (r.drain() && r.drained_by().empty()) {
      // An admin's drain stays, with the admin's reason; the finding is logged.
      spdlog::warn("node={} {} check: {} (already drained by an admin)", node.config.name, by,
                   reason);
      return;
    }
    if (r.drain() && r.drained_by() != by) return;  // another check holds it; first reason wins
    if (r.drain() && r.reason() == reason) return;
    r.set_drain(true);
    r.set_reason(reason);
    r.set_reason_user("muster");
    r.set_reason_time_ms(now);
    r.set_drained_by(by);
    m.PutNode(r);
    spdlog::warn("node={} drained: {}", node.config.name, reason);
    schedule_requested_ = true;
    return;
  }
  if (r.drain() && r.drained_by() == by) {
    spdlog::info("node={} resumed: the {} check passes again (was: {})", node.config.name, by,
                 r.reason());
    r.set_drain(false);
    r.clear_reason();
    r.clear_reason_user();
    r.clear_reason_time_ms();
    r.clear_drained_by();
    m.PutNode(r);
    schedule_requested_ = true;
  }
}

void Engine::ApplyNodeChecks(NodeEntry& node, TimeMs now, store::Mutation& m) {
  const v1::NodeInventory& inv = node.inventory;
  std::string shortfall = HardwareShortfall(node);
  SetCheckDrain(node, "hardware", shortfall.empty() ? "" : "Low " + shortfall, now, m);
  std::vector<std::string> sick;
  for (const auto& g : inv.gpus()) {
    if (!g.health().empty()) sick.push_back("gpu" + std::to_string(g.index()) + ": " + g.health());
  }
  SetCheckDrain(node, "gpu_health", Join(sick, "; "), now, m);
  if (inv.cpus() > node.config.cpus || inv.memory_mb() > node.config.memory_mb ||
      static_cast<uint32_t>(inv.gpus_size()) > node.config.gpus) {
    spdlog::info(
        "node={} has more than configured ({} CPUs, {} MB, {} GPUs; config {}, {}, {}): "
        "scheduling the configured amounts",
        node.config.name, inv.cpus(), inv.memory_mb(), inv.gpus_size(), node.config.cpus,
        node.config.memory_mb, node.config.gpus);
  }
}

void Engine::OnGpuHealth(NodeEntry& node, const v1::GpuHealth& h, TimeMs now) {
  v1::GpuDevice* gpu = nullptr;
  for (auto& g : *node.inventory.mutable_gpus()) {
    if (g.index() == h.index()) gpu = &g;
  }
  if (!gpu) {
    spdlog::warn("node={} reports health for gpu{}, which it never reported; ignored",
                 node.config.name, h.index());
    return;
  }
  if (gpu->health() == h.health()) return;
  gpu->set_health(h.health());
  store::Mutation m;
  ApplyNodeChecks(node, now, m);
  if (!h.health().empty()) {
    // Jobs bound to the GPU lose it now: requeue them (or fail them, per --no-requeue).
    const std::string why =
        node.config.name + " gpu" + std::to_string(h.index()) + ": " + h.health();
    std::vector<uint64_t> ids(node.jobs.begin(), node.jobs.end());
    for (uint64_t id : ids) {
      JobEntry* job = FindJob(id);
      if (!job || job->rec.state() != v1::RUNNING) continue;
      for (const auto& na : job->rec.allocation().nodes()) {
        if (na.node() != node.config.name) continue;
        bool uses = std::find(na.gpu_indices().begin(), na.gpu_indices().end(), h.index()) !=
                    na.gpu_indices().end();
        for (const auto& gr : na.gres()) {
          uses = uses ||
                 std::find(gr.on_gpu().begin(), gr.on_gpu().end(), h.index()) != gr.on_gpu().end();
        }
        if (uses) RequeueOrFail(*job, "GpuFail", why, now, m);
      }
    }
  }
  CommitOrDie(m);
}

void Engine::OnNodeHealth(NodeEntry& node, const v1::NodeHealth& h, TimeMs now) {
  store::Mutation m;
  std::string reason = h.ok() ? "" : Trim(h.reason()).empty() ? "health check failed" : h.reason();
  SetCheckDrain(node, "health_check", reason, now, m);
  CommitOrDie(m);
}

}  // namespace muster::controller
