// Engine: job steps (srun inside an allocation) and interactive allocations (srun/salloc outside
// a job). A step takes part of its job's allocation: its tasks, the CPUs it holds so that
// parallel steps do not share them (Slurm's --exact/--overlap rules), and GPUs when it asks for
// them. Its tasks run on the agents, which report when they ended on each node.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "muster/common/strings.h"
#include "muster/controller/engine.h"

namespace muster::controller {
namespace {

// A job record keeps this many steps; older finished ones are dropped first (a job running
// thousands of sruns would otherwise rewrite an ever larger record with every step).
constexpr int kMaxStepsKept = 1000;

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What a new step may use on one node of the job.
struct NodeRoom {
  int pos = 0;                 // index in the job's allocation
  std::vector<uint32_t> cpus;  // free for this step (all of the job's with --overlap)
  std::vector<uint32_t> gpus;  // free for this step's own GPUs
  uint32_t all_cpus = 0;       // the job's CPUs there
  uint32_t all_gpus = 0;
};

}  // namespace

Result<v1::CreateStepResponse> Engine::CreateStep(const Caller& caller,
                                                  const v1::CreateStepRequest& req, TimeMs now) {
  JobEntry* job = FindJob(req.job_id());
  const std::string jid = std::to_string(req.job_id());
  if (!job) return NotFound("job " + jid + " does not exist");
  if (!caller.is_admin && caller.uid != job->rec.spec().uid()) {
    return PermissionDenied("job " + jid + " is not yours");
  }
  if (job->rec.state() == v1::PENDING) {
    return Unavailable("job " + jid + " is still pending (waiting for its allocation)");
  }
  if (job->rec.state() != v1::RUNNING || job->rec.cancel_requested()) {
    return FailedPrecondition("job " + jid + " is not running (" +
                              v1::JobState_Name(job->rec.state()) + ")");
  }
  const auto& alloc = job->rec.allocation().nodes();
  if (job->started_nodes.size() < static_cast<size_t>(alloc.size())) {
    return Unavailable("job " + jid + "'s nodes are still starting");
  }
  // --overlap with --exact is allowed, as in Slurm: --overlap wins (the step holds no CPUs).
  const bool want_gpus = req.gpus_per_task() > 0 || req.gpus_per_node() > 0 || req.gpus() > 0;
  if (want_gpus) {
    for (const auto& na : alloc) {
      for (const auto& g : na.gres()) {
        if (g.name() == "gpu" || g.name() == "shard") {
          return Unimplemented(
              "GPU options for a step of a job that holds MIG slices or shards are not supported "
              "yet; leave them out and the step uses all of the job's GPUs");
        }
      }
    }
  }

  // What running steps hold.
  std::map<std::string, std::set<uint32_t>> busy_cpus, busy_gpus;
  for (const v1::StepRecord& s : job->rec.steps()) {
    if (s.state() != v1::RUNNING) continue;
    for (const auto& na : s.nodes()) {
      busy_cpus[na.node()].insert(na.cpu_ids().begin(), na.cpu_ids().end());
      if (s.gpus_given())
        busy_gpus[na.node()].insert(na.gpu_indices().begin(), na.gpu_indices().end());
    }
  }
  // Candidate nodes, in allocation order.
  std::set<std::string> in_job;
  for (const auto& na : alloc) in_job.insert(na.node());
  for (const auto& n : req.nodelist()) {
    if (!in_job.count(n)) {
      return InvalidArgument("node " + n + " is not part of job " + jid + "'s allocation");
    }
  }
  std::set<std::string> only(req.nodelist().begin(), req.nodelist().end());
  std::set<std::string> skip(req.exclude().begin(), req.exclude().end());
  std::vector<NodeRoom> rooms;
  for (int i = 0; i < alloc.size(); ++i) {
    const auto& na = alloc[i];
    if ((!only.empty() && !only.count(na.node())) || skip.count(na.node())) continue;
    NodeRoom r;
    r.pos = i;
    r.all_cpus = static_cast<uint32_t>(na.cpu_ids_size());
    r.all_gpus = static_cast<uint32_t>(na.gpu_indices_size());
    for (uint32_t c : na.cpu_ids()) {
      if (req.overlap() || !busy_cpus[na.node()].count(c)) r.cpus.push_back(c);
    }
    for (uint32_t g : na.gpu_indices()) {
      if (req.overlap() || !busy_gpus[na.node()].count(g)) r.gpus.push_back(g);
    }
    rooms.push_back(std::move(r));
  }
  if (rooms.empty()) return InvalidArgument("no node of job " + jid + " is left to run the step");

  // Counts come from the client: bound them, so no product below can overflow.
  constexpr uint32_t kMaxCount = 1u << 20;
  for (uint32_t v : {req.nodes(), req.ntasks(), req.ntasks_per_node(), req.cpus_per_task(),
                     req.gpus_per_task(), req.gpus_per_node(), req.gpus()}) {
    if (v > kMaxCount) {
      return InvalidArgument("step request out of range: " + std::to_string(v) + " (at most " +
                             std::to_string(kMaxCount) + ")");
    }
  }
  const uint32_t job_cpt = std::max<uint32_t>(1, job->rec.spec().cpus_per_task());
  const uint32_t cpt = req.cpus_per_task() > 0 ? req.cpus_per_task() : job_cpt;
  uint32_t nodes = req.nodes();
  uint32_t ntasks = req.ntasks();
  const uint32_t tpn = req.ntasks_per_node();
  if (nodes > rooms.size()) {
    return FailedPrecondition("the step asks for " + std::to_string(nodes) + " nodes; job " + jid +
                              " has " + std::to_string(rooms.size()) +
                              (only.empty() && skip.empty() ? "" : " of those selected"));
  }
  // Defaults as srun has them inside an allocation.
  std::vector<uint32_t> shares;  // tasks per chosen node, largest first; empty: fill in order
  if (!nodes && !ntasks && !tpn) {
    if (cpt == job_cpt) {
      for (const NodeRoom& r : rooms) shares.push_back(alloc[r.pos].ntasks());
      nodes = static_cast<uint32_t>(shares.size());
      for (uint32_t s : shares) ntasks += s;
    } else {
      for (const NodeRoom& r : rooms) ntasks += alloc[r.pos].ntasks();
    }
  }
  if (tpn) {
    if (!nodes) {
      nodes = ntasks ? (ntasks + tpn - 1) / tpn : static_cast<uint32_t>(rooms.size());
    }
    if (!ntasks) ntasks = nodes * tpn;
    if (uint64_t{ntasks} > uint64_t{nodes} * tpn) {
      return InvalidArgument(std::to_string(ntasks) + " tasks do not fit " + std::to_string(nodes) +
                             " nodes at --ntasks-per-node=" + std::to_string(tpn));
    }
  }
  if (nodes && !ntasks) ntasks = nodes;  // srun -N without -n: one task per node
  if (nodes > ntasks) {
    return InvalidArgument("the step asks for more nodes (" + std::to_string(nodes) +
                           ") than tasks (" + std::to_string(ntasks) + ")");
  }
  if (nodes > rooms.size()) {
    return FailedPrecondition("the step needs " + std::to_string(nodes) + " nodes; job " + jid +
                              " has " + std::to_string(rooms.size()));
  }
  if (shares.empty() && nodes) {
    for (uint32_t k = 0, left = ntasks; k < nodes; ++k) {
      uint32_t s = tpn ? std::min(tpn, left) : ntasks / nodes + (k < ntasks % nodes ? 1 : 0);
      shares.push_back(s);
      left -= s;
    }
  }
  auto gpus_for = [&](uint32_t tasks) -> uint64_t {
    if (req.gpus_per_task()) return uint64_t{req.gpus_per_task()} * tasks;
    return req.gpus_per_node();  // -G is checked once the node count is known
  };

  // Lay the tasks out on the first nodes that hold their share; `live` counts only what other
  // steps leave free, otherwise everything the job has (to tell "busy" from "never").
  struct Pick {
    size_t room;
    uint32_t tasks;
  };
  auto lay_out = [&](bool live) -> std::vector<Pick> {
    std::vector<Pick> picks;
    auto cpus_of = [&](const NodeRoom& r) {
      return live ? static_cast<uint32_t>(r.cpus.size()) : r.all_cpus;
    };
    auto gpus_of = [&](const NodeRoom& r) {
      return live ? static_cast<uint32_t>(r.gpus.size()) : r.all_gpus;
    };
    if (!shares.empty()) {
      size_t k = 0;
      for (size_t i = 0; i < rooms.size() && k < shares.size(); ++i) {
        if (cpus_of(rooms[i]) < uint64_t{shares[k]} * cpt) continue;
        if (want_gpus && gpus_of(rooms[i]) < gpus_for(shares[k])) continue;
        picks.push_back({i, shares[k++]});
      }
      if (k < shares.size()) picks.clear();
      return picks;
    }
    uint32_t left = ntasks;
    for (size_t i = 0; i < rooms.size() && left > 0; ++i) {
      uint32_t fit = cpus_of(rooms[i]) / cpt;
      if (req.gpus_per_task()) fit = std::min(fit, gpus_of(rooms[i]) / req.gpus_per_task());
      if (req.gpus_per_node() && gpus_of(rooms[i]) < req.gpus_per_node()) fit = 0;
      fit = std::min(fit, left);
      if (fit == 0) continue;
      picks.push_back({i, fit});
      left -= fit;
    }
    if (left > 0) picks.clear();
    return picks;
  };
  std::vector<Pick> picks = lay_out(true);
  if (picks.empty()) {
    if (lay_out(false).empty()) {
      std::string what = std::to_string(ntasks) + " task(s) x " + std::to_string(cpt) + " CPU(s)";
      if (want_gpus) what += " with GPUs";
      return FailedPrecondition("more processors requested than permitted: the step asks for " +
                                what + (nodes ? " on " + std::to_string(nodes) + " node(s)" : "") +
                                ", more than job " + jid + " holds");
    }
    return Unavailable("Requested nodes are busy");
  }
  uint32_t gpus_per_picked = 0;
  if (req.gpus()) {
    if (req.gpus() % picks.size() != 0) {
      return InvalidArgument("-G/--gpus=" + std::to_string(req.gpus()) + " does not divide over " +
                             std::to_string(picks.size()) + " nodes; give --gpus-per-node");
    }
    gpus_per_picked = req.gpus() / static_cast<uint32_t>(picks.size());
    for (const Pick& p : picks) {
      if (rooms[p.room].gpus.size() < gpus_per_picked)
        return Unavailable("Requested nodes are busy");
    }
  }

  v1::StepRecord step;
  const uint32_t step_id = job->rec.next_step_id();
  step.set_id(step_id);
  step.set_name(req.name().empty() ? "step" : BaseName(req.name()));
  step.set_state(v1::RUNNING);
  step.set_cpus_per_task(cpt);
  step.set_start_time_ms(now);
  step.set_overlap(req.overlap());
  step.set_gpus_given(want_gpus);
  v1::CreateStepResponse resp;
  resp.set_job_id(job->rec.id());
  resp.set_step_id(step_id);
  resp.set_credential(job->rec.credential());
  resp.set_gpus_given(want_gpus);
  resp.set_cpus_per_task(cpt);
  resp.set_name(step.name());
  resp.set_run(job->rec.requeue_count());
  uint32_t first = 0;
  uint32_t node_id = 0;
  for (const Pick& p : picks) {
    const NodeRoom& r = rooms[p.room];
    const std::string& name = alloc[r.pos].node();
    v1::NodeAllocation* use = step.add_nodes();
    use->set_node(name);
    use->set_ntasks(p.tasks);
    if (!req.overlap()) {
      // --exact: just what the tasks need; otherwise every CPU of the job left free here.
      size_t n = req.exact() ? static_cast<size_t>(p.tasks) * cpt : r.cpus.size();
      n = std::min(n, r.cpus.size());  // the layout checked the room; never read past it
      use->mutable_cpu_ids()->Add(r.cpus.begin(), r.cpus.begin() + static_cast<long>(n));
    }
    if (want_gpus) {
      size_t n = gpus_per_picked ? gpus_per_picked : static_cast<size_t>(gpus_for(p.tasks));
      n = std::min(n, r.gpus.size());
      use->mutable_gpu_indices()->Add(r.gpus.begin(), r.gpus.begin() + static_cast<long>(n));
    }
    step.add_running_nodes(name);
    step.set_ntasks(step.ntasks() + p.tasks);

    v1::StepNode* sn = resp.add_nodes();
    sn->set_node(name);
    if (const NodeEntry* node = FindNode(name)) sn->set_step_address(node->step_address);
    sn->set_node_id(node_id++);
    sn->set_ntasks(p.tasks);
    sn->set_first_task(first);
    *sn->mutable_gpu_indices() = use->gpu_indices();
    *sn->mutable_cpu_ids() = use->cpu_ids();
    first += p.tasks;
  }
  resp.set_total_tasks(first);

  v1::JobRecord next = job->rec;
  next.set_next_step_id(step_id + 1);
  *next.add_steps() = step;
  if (next.steps_size() > kMaxStepsKept) {
    for (int i = 0; i < next.steps_size(); ++i) {
      if (next.steps(i).state() != v1::RUNNING) {
        next.mutable_steps()->erase(next.mutable_steps()->begin() + i);
        break;
      }
    }
  }
  store::Mutation m;
  m.PutJob(next);
  MUSTER_RETURN_IF_ERROR(Commit(m));
  job->rec = std::move(next);
  spdlog::info("step job={} step={} tasks={} nodes={} name={}", job->rec.id(), step_id, first,
               picks.size(), step.name());
  return resp;
}

void Engine::OnStepEnded(NodeEntry& node, const v1::StepEnded& e, TimeMs now) {
  JobEntry* job = FindJob(e.job_id());
  if (!job || e.run() != job->rec.requeue_count()) return;
  for (v1::StepRecord& s : *job->rec.mutable_steps()) {
    if (s.id() != e.step_id()) continue;
    if (s.state() != v1::RUNNING || !Contains(s.running_nodes(), node.config.name)) return;
    auto* running = s.mutable_running_nodes();
    running->erase(std::find(running->begin(), running->end(), node.config.name));
    s.set_exit_code(std::max(s.exit_code(), e.exit_code()));
    if (e.signal() && !s.exit_signal()) s.set_exit_signal(e.signal());
    if (e.killed()) s.set_killed(true);
    if (running->empty()) {
      s.set_end_time_ms(now);
      // A task that failed by itself makes the step FAILED even when the others were then
      // killed (srun -K); killed alone is CANCELLED.
      if (s.node_lost()) {
        s.set_state(v1::NODE_FAIL);
      } else if (s.exit_code() != 0) {
        s.set_state(v1::FAILED);
      } else if (s.killed()) {
        s.set_state(v1::CANCELLED);
      } else if (s.exit_signal() != 0) {
        s.set_state(v1::FAILED);
      } else {
        s.set_state(v1::COMPLETED);
      }
      spdlog::info("step end job={} step={} state={} exit={}:{}", e.job_id(), s.id(),
                   v1::JobState_Name(s.state()), s.exit_code(), s.exit_signal());
    }
    store::Mutation m;
    m.PutJob(job->rec);
    // Buffered: accounting only; a crash before the next synced write leaves the step RUNNING
    // until its job ends, which then ends it.
    CommitOrDie(m, store::Durability::kBuffered);
    return;
  }
}

void Engine::EndRunningSteps(v1::JobRecord& r, v1::JobState state, TimeMs now) {
  for (v1::StepRecord& s : *r.mutable_steps()) {
    if (s.state() != v1::RUNNING) continue;
    s.set_state(state);
    s.set_end_time_ms(now);
    s.clear_running_nodes();
  }
}

bool Engine::StepsEndedOnNode(JobEntry& job, const std::string& node, bool lost, TimeMs now) {
  bool changed = false;
  for (v1::StepRecord& s : *job.rec.mutable_steps()) {
    if (s.state() != v1::RUNNING || !Contains(s.running_nodes(), node)) continue;
    auto* running = s.mutable_running_nodes();
    running->erase(std::find(running->begin(), running->end(), node));
    s.set_killed(true);
    if (lost) s.set_node_lost(true);
    if (running->empty()) {
      s.set_state(s.node_lost() ? v1::NODE_FAIL : v1::CANCELLED);
      s.set_end_time_ms(now);
    }
    changed = true;
  }
  return changed;
}

void Engine::StepsLostOnNode(NodeEntry& node, TimeMs now, store::Mutation& m) {
  for (uint64_t id : node.jobs) {
    // Step tasks talk to their client through the agent: they ended with it.
    JobEntry* job = FindJob(id);
    if (job && StepsEndedOnNode(*job, node.config.name, /*lost=*/true, now)) m.PutJob(job->rec);
  }
}

// ---------------------------------------------------------------------------------------------
// Interactive allocations

Result<Engine::JobEntry*> Engine::CallersAllocation(const Caller& caller, uint64_t job_id) {
  JobEntry* job = FindJob(job_id);
  const std::string jid = std::to_string(job_id);
  if (!job) return NotFound("job " + jid + " does not exist");
  if (!caller.is_admin && caller.uid != job->rec.spec().uid()) {
    return PermissionDenied("job " + jid + " is not yours");
  }
  if (!job->rec.spec().interactive()) {
    return FailedPrecondition("job " + jid +
                              " is a batch job, not an srun/salloc allocation (it ends with its "
                              "script, or cancel it)");
  }
  return job;
}

Result<v1::ReleaseAllocationResponse> Engine::ReleaseAllocation(
    const Caller& caller, const v1::ReleaseAllocationRequest& req, TimeMs now) {
  MUSTER_ASSIGN_OR_RETURN(JobEntry * job, CallersAllocation(caller, req.job_id()));
  const bool ok = req.exit_code() == 0 && req.signal() == 0;
  EndAllocation(*job, ok ? v1::COMPLETED : v1::FAILED, ok ? "None" : "NonZeroExitCode", "", now,
                req.exit_code(), req.signal());
  return v1::ReleaseAllocationResponse();
}

Result<v1::AttachAllocationResponse> Engine::AttachAllocation(
    const Caller& caller, const v1::AttachAllocationRequest& req) {
  MUSTER_ASSIGN_OR_RETURN(JobEntry * job, CallersAllocation(caller, req.job_id()));
  const std::string jid = std::to_string(req.job_id());
  if (!IsActive(job->rec) || job->rec.end_time_ms() > 0) {
    return FailedPrecondition("job " + jid + " has ended (" + v1::JobState_Name(job->rec.state()) +
                              ")");
  }
  job->client_attached = true;
  v1::AttachAllocationResponse resp;
  *resp.mutable_job() = ToJobInfo(*job);
  return resp;
}

void Engine::AllocationClientGone(uint64_t job_id, TimeMs now) {
  JobEntry* job = FindJob(job_id);
  if (!job || !job->client_attached) return;
  job->client_attached = false;
  job->orphan_since_ms = now;
  EndAllocation(*job, v1::CANCELLED, "None", "its srun/salloc went away", now, 0, 0);
}

void Engine::EndAllocation(JobEntry& job, v1::JobState state, const std::string& reason,
                           const std::string& detail, TimeMs now, int32_t exit_code,
                           int32_t signal) {
  v1::JobRecord& r = job.rec;
  if (r.end_time_ms() > 0 || (r.state() != v1::PENDING && r.state() != v1::RUNNING)) return;
  store::Mutation m;
  if (r.state() == v1::PENDING) {
    pending_.erase(r.id());
    r.set_state(v1::CANCELLED);
    r.set_reason("None");
    r.set_end_time_ms(now);
    r.set_reason_detail(detail.empty() ? "released before it started" : detail + " while pending");
    finished_.insert({now, r.id()});
    m.PutJob(r);
    schedule_requested_ = true;
  } else {
    r.set_exit_code(exit_code);
    r.set_exit_signal(signal);
    if (!detail.empty()) r.set_reason_detail(detail);
    FinishJob(job, state, reason, now, m);
  }
  interactive_.erase(r.id());
  CommitOrDie(m);
  spdlog::info("allocation end job={} state={} {}", r.id(), v1::JobState_Name(r.state()), detail);
}

void Engine::CheckAllocations(TimeMs now) {
  const auto& s = options_.config.scheduling;
  std::vector<uint64_t> ids(interactive_.begin(), interactive_.end());
  for (uint64_t id : ids) {
    JobEntry* job = FindJob(id);
    if (!job || job->rec.end_time_ms() > 0 ||
        (job->rec.state() != v1::PENDING && job->rec.state() != v1::RUNNING)) {
      interactive_.erase(id);
      continue;
    }
    const v1::JobRecord& r = job->rec;
    if (r.state() == v1::RUNNING && r.time_limit_ms() > 0 &&
        now >= r.start_time_ms() + r.time_limit_ms()) {
      // The agents stop the tasks at the limit themselves; the allocation ends here.
      job->rec.set_timed_out(true);
      EndAllocation(*job, v1::TIMEOUT, "TimeLimit", "", now, 0, 0);
      continue;
    }
    if (!job->client_attached &&
        now - job->orphan_since_ms >= static_cast<TimeMs>(s.allocation_grace_ms)) {
      EndAllocation(*job, v1::CANCELLED, "None",
                    "its srun/salloc did not connect within " +
                        std::to_string(s.allocation_grace_ms / 1000) + "s",
                    now, 0, 0);
    }
  }
}

}  // namespace muster::controller
