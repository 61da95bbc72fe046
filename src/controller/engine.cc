// Engine: creation, recovery, the user API and the scheduling pass. Agent events and the job state
// machine are in engine_agents.cc; views for clients in engine_views.cc.
#include "muster/controller/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "job_spec.h"
#include "muster/common/check.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "muster/core/scheduler.h"

namespace muster::controller {
namespace {

constexpr size_t kMaxScriptBytes = 4 << 20;

// The node's GRES pools from its config: MIG slices and other GRES as configured, then the
// shards of every whole GPU.
std::vector<core::GresView> GresPools(const NodeConfig& nc) {
  std::vector<core::GresView> pools;
  for (const auto& g : nc.gres) {
    core::GresView v;
    v.name = g.name;
    v.type = g.type;
    v.free.assign(g.count, true);
    pools.push_back(std::move(v));
  }
  if (nc.shards_per_gpu > 0 && nc.gpus > 0) {
    core::GresView v;
    v.name = "shard";
    v.free.assign(nc.gpus * nc.shards_per_gpu, true);
    for (uint32_t u = 0; u < nc.gpus * nc.shards_per_gpu; ++u) {
      v.on_gpu.push_back(u / nc.shards_per_gpu);
    }
    pools.push_back(std::move(v));
  }
  return pools;
}

// The pool of `view` that GRES units recorded under (name, type) belong to, or -1.
int32_t PoolOf(const core::NodeView& view, const v1::GresUnits& g) {
  for (size_t p = 0; p < view.gres.size(); ++p) {
    if (view.gres[p].name == g.name() && view.gres[p].type == g.type()) {
      return static_cast<int32_t>(p);
    }
  }
  return -1;
}

// A recorded allocation as the core's placement on `view`; units the node no longer has (the
// config changed) are left out.
core::NodePlacement ToPlacement(const v1::NodeAllocation& na, const core::NodeView& view,
                                core::NodeIndex index) {
  core::NodePlacement np;
  np.node = index;
  for (uint32_t c : na.cpu_ids()) {
    if (c < view.cpus) np.cpus.push_back(c);
  }
  for (uint32_t g : na.gpu_indices()) {
    if (g < view.gpus) np.gpus.push_back(g);
  }
  np.mem_mb = na.mem_mb();
  np.ntasks = na.ntasks();
  for (const v1::GresUnits& g : na.gres()) {
    int32_t pool = PoolOf(view, g);
    if (pool < 0) continue;
    std::vector<uint32_t> units;
    for (uint32_t u : g.units()) {
      if (u < view.gres[static_cast<size_t>(pool)].free.size()) units.push_back(u);
    }
    np.gres.emplace_back(static_cast<uint32_t>(pool), std::move(units));
  }
  return np;
}

}  // namespace

Engine::Engine(EngineOptions options, store::StateStore* store)
    : options_(std::move(options)), store_(store) {
  if (!options_.make_credential) options_.make_credential = [] { return RandomHex(16); };
  const Config& c = options_.config;
  for (const NodeConfig& nc : c.nodes) {
    NodeEntry e;
    e.config = nc;
    e.rec.set_name(nc.name);
    e.view =
        core::NodeView::Empty(nc.name, nc.cpus, nc.memory_mb, nc.gpus, nc.gpu_type, nc.topology);
    e.view.schedulable = false;
    e.view.features = nc.features;
    e.view.nvlink_domain = nc.nvlink_domain;
    e.view.gres = GresPools(nc);
    node_index_[nc.name] = nodes_.size();
    nodes_.push_back(std::move(e));
  }
  for (const PartitionConfig& pc : c.partitions) {
    core::PartitionView pv;
    pv.name = pc.name;
    pv.max_time_ms = pc.max_time_ms;
    pv.priority_tier = pc.priority_tier;
    for (const std::string& n : pc.nodes) {
      pv.nodes.push_back(static_cast<core::NodeIndex>(node_index_.at(n)));
    }
    base_view_.partitions.push_back(std::move(pv));
  }
  capacity_view_ = base_view_;
  for (const auto& n : nodes_) capacity_view_.nodes.push_back(n.view);
  priority_scale_ = core::PriorityScale::Of(capacity_view_);
  partition_limits_ = ComputePartitionLimits(c);
  const SchedulingConfig& sc = c.scheduling;
  sched_config_.backfill_depth = sc.backfill_depth;
  sched_config_.weights.age = sc.priority_weight_age;
  sched_config_.weights.size = sc.priority_weight_size;
  sched_config_.weights.partition = sc.priority_weight_partition;
  sched_config_.weights.qos = sc.priority_weight_qos;
  sched_config_.weights.fairshare = sc.priority_weight_fairshare;
  sched_config_.weights.max_age_ms = static_cast<TimeMs>(sc.priority_max_age_ms);
}

Result<std::unique_ptr<Engine>> Engine::Create(EngineOptions options, store::StateStore* store,
                                               TimeMs now) {
  auto engine = std::unique_ptr<Engine>(new Engine(std::move(options), store));
  MUSTER_RETURN_IF_ERROR(engine->Recover(now));
  return engine;
}

Status Engine::Recover(TimeMs now) {
  MUSTER_ASSIGN_OR_RETURN(store::LoadedState state, store_->LoadAll());
  recovery_problems_ = state.problems;
  for (const auto& p : recovery_problems_) spdlog::error("recovery: {}", p);

  uint64_t max_id = state.max_history_job_id;
  for (const auto& j : state.jobs) max_id = std::max(max_id, j.id());
  if (state.meta) meta_ = *state.meta;
  meta_.set_next_job_id(std::max<uint64_t>({meta_.next_job_id(), max_id + 1, 1}));
  meta_.set_epoch(meta_.epoch() + 1);
  store::Mutation m;
  m.PutMeta(meta_);
  MUSTER_RETURN_IF_ERROR_PREPEND(store_->Commit(m), "cannot record the new controller epoch");

  for (const auto& nr : state.nodes) {
    auto it = node_index_.find(nr.name());
    if (it == node_index_.end()) {
      spdlog::warn("recovery: node record for '{}', which the config no longer defines; ignored",
                   nr.name());
      continue;
    }
    nodes_[it->second].rec = nr;
  }
  for (auto& rec : state.jobs) {
    JobEntry e;
    e.rec = std::move(rec);
    e.request = ToCoreRequest(e.rec);
    e.brief_spec_fields = BriefSpecFields(e.rec);
    JobEntry& job = jobs_.emplace(e.rec.id(), std::move(e)).first->second;
    if (job.rec.state() == v1::PENDING) pending_.insert(job.rec.id());
    if (job.rec.spec().interactive() && job.rec.end_time_ms() == 0 &&
        (job.rec.state() == v1::PENDING || job.rec.state() == v1::RUNNING)) {
      // Its client lost the connection with the old controller: it may attach again.
      job.orphan_since_ms = now;
      interactive_.insert(job.rec.id());
    }
    if (job.rec.state() != v1::PENDING && job.rec.state() != v1::RUNNING) {
      finished_.insert({job.rec.end_time_ms(), job.rec.id()});
    }
    HoldResources(job.rec);
    if (job.rec.state() == v1::RUNNING && job.rec.batch_started()) {
      for (const auto& na : job.rec.allocation().nodes()) job.started_nodes.insert(na.node());
    }
  }
  RebuildJobOrder();
  // A node removed from the config while it held a job is lost to that job: a running job is
  // requeued (or ends NODE_FAIL), a finished one stops waiting for that node to clean up.
  store::Mutation lost;
  for (auto& [id, job] : jobs_) {
    std::set<std::string> gone;
    for (const auto& na : job.rec.allocation().nodes()) {
      if (!FindNode(na.node()) &&
          (job.rec.state() == v1::RUNNING ||
           std::find(job.rec.completing_nodes().begin(), job.rec.completing_nodes().end(),
                     na.node()) != job.rec.completing_nodes().end())) {
        gone.insert(na.node());
      }
    }
    for (const auto& n : gone) {
      spdlog::warn("recovery: job={} held node {}, which the config no longer defines", id, n);
      JobLostOnNode(job, n, "node " + n + " is no longer in the configuration", now, lost);
    }
  }
  MUSTER_RETURN_IF_ERROR_PREPEND(Commit(lost), "cannot record jobs of removed nodes");
  start_time_ms_ = now;
  for (auto& n : nodes_) n.last_heard_ms = now;  // nodes get node_down_ms to register
  spdlog::info("recovered epoch={} jobs={} next_job_id={} problems={}", meta_.epoch(), jobs_.size(),
               meta_.next_job_id(), recovery_problems_.size());
  schedule_requested_ = true;
  return Status::Ok();
}

Status Engine::Commit(const store::Mutation& m, store::Durability durability) {
  if (m.empty()) return Status::Ok();
  return store_->Commit(m, durability);
}

bool Engine::IsActive(const v1::JobRecord& rec) const {
  return rec.state() == v1::PENDING || rec.state() == v1::RUNNING ||
         rec.completing_nodes_size() > 0;
}

Engine::NodeEntry* Engine::FindNode(const std::string& name) {
  auto it = node_index_.find(name);
  return it == node_index_.end() ? nullptr : &nodes_[it->second];
}

Engine::JobEntry* Engine::FindJob(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void Engine::HoldResources(const v1::JobRecord& rec) {
  std::set<std::string> holding;
  if (rec.state() == v1::RUNNING) {
    for (const auto& na : rec.allocation().nodes()) holding.insert(na.node());
  }
  for (const auto& n : rec.completing_nodes()) holding.insert(n);
  for (const auto& na : rec.allocation().nodes()) {
    if (!holding.count(na.node())) continue;
    NodeEntry* node = FindNode(na.node());
    if (!node) continue;
    core::NodeView& v = node->view;
    core::NodePlacement np = ToPlacement(na, v, 0);
    // Never hold anything twice: drop (and report) what the node does not have (the config
    // changed) or what is already held.
    auto keep = [&](const std::string& what, std::vector<uint32_t>& ids, auto&& is_free,
                    size_t recorded) {
      if (ids.size() < recorded) {
        spdlog::error("job={} node={} holds {} {} unit(s) the node does not have", rec.id(),
                      na.node(), recorded - ids.size(), what);
      }
      std::erase_if(ids, [&](uint32_t i) {
        if (is_free(i)) return false;
        spdlog::error("job={} node={} {} {} is already held; not held twice", rec.id(), na.node(),
                      what, i);
        return true;
      });
    };
    keep(
        "cpu", np.cpus, [&](uint32_t c) { return v.cpu_free[c]; },
        static_cast<size_t>(na.cpu_ids_size()));
    keep(
        "gpu", np.gpus, [&](uint32_t g) { return v.gpu_free[g]; },
        static_cast<size_t>(na.gpu_indices_size()));
    for (const v1::GresUnits& g : na.gres()) {
      if (PoolOf(v, g) < 0) {
        spdlog::error("job={} node={} holds {} unit(s) of {}:{}, which the node no longer has",
                      rec.id(), na.node(), g.units_size(), g.name(), g.type());
      }
    }
    for (auto& [pool, units] : np.gres) {
      const core::GresView& gv = v.gres[pool];
      size_t recorded = 0;
      for (const v1::GresUnits& g : na.gres()) {
        if (PoolOf(v, g) == static_cast<int32_t>(pool)) recorded += g.units_size();
      }
      keep(
          gv.name, units, [&](uint32_t u) { return gv.free[u]; }, recorded);
    }
    v.Take(np);
    node->jobs.insert(rec.id());
  }
}

void Engine::ReleaseNode(JobEntry& job, NodeEntry& node) {
  if (!node.jobs.erase(job.rec.id())) return;
  for (const auto& na : job.rec.allocation().nodes()) {
    if (na.node() != node.config.name) continue;
    node.view.Give(ToPlacement(na, node.view, 0));
  }
  schedule_requested_ = true;
}

void Engine::Send(const std::string& node, v1::ControllerMessage msg) {
  msg.set_epoch(meta_.epoch());
  outgoing_.push_back({node, std::move(msg)});
}

std::vector<Outgoing> Engine::TakeOutgoing() {
  std::vector<Outgoing> out;
  out.swap(outgoing_);
  return out;
}

// ---------------------------------------------------------------------------------------------
// User API

Result<v1::SubmitJobResponse> Engine::SubmitJob(const Caller& caller,
                                                const v1::SubmitJobRequest& req, TimeMs now) {
  v1::JobSpec spec = req.spec();
  // The transport's credentials decide who the job runs as; only root may submit for others.
  bool on_behalf = caller.uid == 0 && spec.uid() != 0 && !spec.user().empty();
  if (!on_behalf) {
    spec.set_uid(caller.uid);
    spec.set_gid(caller.gid);
    spec.set_user(caller.user);
  }
  if (spec.script().size() > kMaxScriptBytes) {
    return InvalidArgument("batch script is larger than 4 MiB");
  }
  if (spec.interactive()) {
    if (!spec.script().empty()) {
      return InvalidArgument("an interactive allocation (srun/salloc) carries no batch script");
    }
  } else if (!StartsWith(spec.script(), "#!")) {
    return InvalidArgument(
        "this does not look like a batch script: the first line must start with #! "
        "(e.g. #!/bin/bash)");
  }
  if (spec.work_dir().empty() || spec.work_dir()[0] != '/') {
    return InvalidArgument("working directory must be an absolute path");
  }
  // Like Slurm's MaxJobCount, recently finished jobs still count until they are archived.
  if (jobs_.size() >= options_.config.scheduling.max_job_count) {
    return ResourceExhausted("the controller tracks " + std::to_string(jobs_.size()) +
                             " jobs, its limit (scheduling.max_job_count); try again later");
  }
  int64_t time_limit = 0;
  MUSTER_RETURN_IF_ERROR(NormalizeJobSpec(spec, options_.config, partition_limits_, &time_limit));

  v1::JobRecord rec;
  rec.set_id(meta_.next_job_id());
  *rec.mutable_spec() = spec;
  rec.set_state(v1::PENDING);
  rec.set_submit_time_ms(now);
  rec.set_time_limit_ms(time_limit);
  if (spec.hold()) {
    rec.set_reason("JobHeldUser");
    rec.set_reason_detail("held at submission (--hold)");
  } else {
    rec.set_reason("None");
  }
  rec.set_priority(0);  // multifactor; an admin may fix it later

  core::JobRequest request = ToCoreRequest(rec);
  // Capacity comes from the configuration only, so the answer is cached per request shape: a
  // submission must not walk every node.
  const std::string shape = core::ShapeKey(request);
  auto cached = ever_cache_.find(shape);
  if (cached == ever_cache_.end()) {
    if (ever_cache_.size() >= 4096) ever_cache_.clear();
    cached =
        ever_cache_
            .emplace(shape, core::Place(request, capacity_view_, core::PlaceMode::kEver).status())
            .first;
  }
  if (!cached->second.ok()) {
    return Status(cached->second.code(), "job can never run: " + cached->second.message());
  }
  if (req.test_only()) {
    v1::SubmitJobResponse resp;
    resp.set_job_id(rec.id());
    *resp.mutable_test_only() = TestOnly(rec, request, now);
    return resp;
  }

  // A job array is one job per task id, with consecutive job ids from the array's own.
  std::vector<uint32_t> tasks;
  v1::ArrayTask array;
  if (!spec.array().empty()) {
    if (spec.interactive()) return InvalidArgument("an srun/salloc allocation cannot be an array");
    MUSTER_ASSIGN_OR_RETURN(
        tasks, ParseArraySpec(spec.array(), options_.config.scheduling.max_array_size, &array));
    if (jobs_.size() + tasks.size() > options_.config.scheduling.max_job_count) {
      return ResourceExhausted("an array of " + std::to_string(tasks.size()) +
                               " tasks would pass the controller's job limit "
                               "(scheduling.max_job_count); try again later");
    }
    array.set_array_job_id(rec.id());
  }
  const uint64_t count = tasks.empty() ? 1 : tasks.size();
  v1::MetaRecord next_meta = meta_;
  next_meta.set_next_job_id(meta_.next_job_id() + count);
  // The script and environment go to their own record, read back at launch only.
  v1::JobPayload payload;
  payload.set_script(std::move(*rec.mutable_spec()->mutable_script()));
  *payload.mutable_environment() = std::move(*rec.mutable_spec()->mutable_environment());
  rec.mutable_spec()->clear_script();
  rec.mutable_spec()->clear_environment();
  std::vector<v1::JobRecord> recs;
  for (uint64_t k = 0; k < count; ++k) {
    recs.push_back(rec);
    recs.back().set_id(rec.id() + k);
    if (!tasks.empty()) {
      *recs.back().mutable_array() = array;
      recs.back().mutable_array()->set_task_id(tasks[k]);
    }
  }
  store::Mutation m;
  for (const v1::JobRecord& r : recs) {
    m.PutJob(r);
    m.PutJobPayload(r.id(), payload);
  }
  m.PutMeta(next_meta);
  MUSTER_RETURN_IF_ERROR_PREPEND(Commit(m), "job not accepted: cannot persist it");
  meta_ = next_meta;
  const uint64_t id = rec.id();
  spdlog::info("submit job={} user={} nodes={} gpus_per_node={} partition={}{}", id,
               rec.spec().user(), rec.spec().nodes(), rec.spec().gpus_per_node(),
               Join({rec.spec().partitions().begin(), rec.spec().partitions().end()}, ","),
               tasks.empty() ? "" : " array=" + spec.array());
  for (v1::JobRecord& r : recs) {
    JobEntry e;
    e.rec = std::move(r);
    e.request = request;
    e.brief_spec_fields = BriefSpecFields(e.rec);
    if (e.rec.spec().interactive()) {
      e.orphan_since_ms = now;  // its client attaches next
      interactive_.insert(e.rec.id());
    }
    pending_.insert(e.rec.id());
    const uint64_t job_id = e.rec.id();
    const JobEntry* entry = &jobs_.emplace(job_id, std::move(e)).first->second;
    if (job_order_.empty() || job_order_.back().first < job_id) {
      job_order_.emplace_back(job_id, entry);  // ids only grow
    } else {
      RebuildJobOrder();
    }
  }
  schedule_requested_ = true;
  v1::SubmitJobResponse resp;
  resp.set_job_id(id);
  return resp;
}

Result<v1::CancelJobResponse> Engine::CancelJob(const Caller& caller,
                                                const v1::CancelJobRequest& req, TimeMs now) {
  v1::CancelJobResponse resp;
  // A job array's id stands for all its tasks (they follow it, with consecutive ids).
  std::vector<uint64_t> targets;
  for (uint64_t id : req.job_ids()) {
    bool array = false;
    for (auto it = jobs_.lower_bound(id); it != jobs_.end() && it->second.rec.has_array() &&
                                          it->second.rec.array().array_job_id() == id;
         ++it) {
      targets.push_back(it->first);
      array = true;
    }
    if (!array) targets.push_back(id);
  }
  targets.insert(targets.end(), req.single_job_ids().begin(), req.single_job_ids().end());
  for (uint64_t id : targets) {
    v1::CancelJobResult* r = resp.add_results();
    r->set_job_id(id);
    JobEntry* job = FindJob(id);
    if (!job) {
      r->set_code(static_cast<int>(StatusCode::kNotFound));
      r->set_message("job " + std::to_string(id) + " does not exist");
      continue;
    }
    if (!caller.is_admin && caller.uid != job->rec.spec().uid()) {
      r->set_code(static_cast<int>(StatusCode::kPermissionDenied));
      r->set_message("job " + std::to_string(id) + " belongs to " + job->rec.spec().user() +
                     "; you may cancel only your own jobs");
      continue;
    }
    const v1::JobState st = job->rec.state();
    if (req.signal() != 0) {
      // A signal, not a cancel: nothing changes in the job's record.
      if (st != v1::RUNNING || job->rec.cancel_requested()) {
        r->set_code(static_cast<int>(StatusCode::kFailedPrecondition));
        r->set_message(st == v1::PENDING ? "Job is pending execution"
                                         : "Job/step already completing or completed");
        continue;
      }
      const auto& nodes = job->rec.allocation().nodes();
      for (int i = 0; i < nodes.size(); ++i) {
        v1::ControllerMessage msg;
        v1::SignalJob* s = msg.mutable_signal_job();
        s->set_job_id(id);
        s->set_signal(req.signal());
        s->set_run(job->rec.requeue_count());
        s->set_steps(!req.batch_only() || req.full());
        s->set_batch((req.batch_only() || req.full()) && i == 0);
        Send(nodes[i].node(), std::move(msg));
      }
      spdlog::info("signal job={} sig={} user={}", id, req.signal(), caller.user);
      continue;
    }
    if (st != v1::PENDING && (st != v1::RUNNING || job->rec.cancel_requested())) {
      continue;  // finished or already on its way down: nothing to do (Slurm is silent too)
    }
    if (job->rec.spec().interactive()) {
      // No batch script to wait for: the allocation ends now and its tasks are stopped.
      EndAllocation(*job, v1::CANCELLED, "None",
                    "cancelled by " + caller.user + (st == v1::PENDING ? "" : " while running"),
                    now, 0, 0);
      continue;
    }
    v1::JobRecord next = job->rec;
    if (st == v1::PENDING) {
      next.set_state(v1::CANCELLED);
      next.set_end_time_ms(now);
      next.set_reason("None");
      next.set_reason_detail("cancelled by " + caller.user + " while pending");
    } else {
      next.set_cancel_requested(true);  // it ends CANCELLED when its batch script is gone
    }
    store::Mutation m;
    m.PutJob(next);
    Status s = Commit(m);
    if (!s.ok()) {
      r->set_code(static_cast<int>(s.code()));
      r->set_message(s.message());
      continue;
    }
    job->rec = std::move(next);
    spdlog::info("cancel job={} user={} state={}", id, caller.user, v1::JobState_Name(st));
    if (st == v1::PENDING) {
      pending_.erase(id);
      finished_.insert({now, id});
      schedule_requested_ = true;  // it may have held back lower-priority jobs
    } else {
      for (const auto& na : job->rec.allocation().nodes()) {
        SendTerminate(na.node(), *job, "cancelled");
      }
    }
  }
  return resp;
}

Result<v1::UpdateJobResponse> Engine::UpdateJob(const Caller& caller,
                                                const v1::UpdateJobRequest& req, TimeMs now) {
  v1::UpdateJobResponse resp;
  for (uint64_t id : req.job_ids()) {
    v1::CancelJobResult* r = resp.add_results();
    r->set_job_id(id);
    auto fail = [&](StatusCode code, const std::string& m) {
      r->set_code(static_cast<int>(code));
      r->set_message(m);
    };
    JobEntry* job = FindJob(id);
    const std::string jid = std::to_string(id);
    if (!job) {
      fail(StatusCode::kNotFound, "job " + jid + " does not exist");
      continue;
    }
    if (!caller.is_admin && caller.uid != job->rec.spec().uid()) {
      fail(StatusCode::kPermissionDenied, "job " + jid + " belongs to " + job->rec.spec().user());
      continue;
    }
    v1::JobRecord& rec = job->rec;
    store::Mutation m;
    switch (req.action()) {
      case v1::UpdateJobRequest::HOLD:
      case v1::UpdateJobRequest::RELEASE: {
        const bool hold = req.action() == v1::UpdateJobRequest::HOLD;
        if (rec.state() != v1::PENDING) {
          fail(StatusCode::kFailedPrecondition,
               "job " + jid + " is not pending (" + v1::JobState_Name(rec.state()) + ")");
          continue;
        }
        if (rec.spec().hold() == hold) continue;  // already so: nothing to do, as Slurm
        if (!hold && rec.reason() == "JobHeldAdmin" && !caller.is_admin) {
          fail(StatusCode::kPermissionDenied, "job " + jid + " was held by an admin");
          continue;
        }
        v1::JobRecord next = rec;
        next.mutable_spec()->set_hold(hold);
        next.set_reason(hold ? (caller.is_admin && caller.uid != rec.spec().uid() ? "JobHeldAdmin"
                                                                                  : "JobHeldUser")
                             : "None");
        next.set_reason_detail(hold ? "held by " + caller.user : "");
        m.PutJob(next);
        if (Status s = Commit(m); !s.ok()) {
          fail(s.code(), s.message());
          continue;
        }
        rec = std::move(next);
        job->request = ToCoreRequest(rec);
        schedule_requested_ = true;
        break;
      }
      case v1::UpdateJobRequest::REQUEUE: {
        if (rec.state() != v1::RUNNING || rec.cancel_requested()) {
          fail(StatusCode::kFailedPrecondition,
               "job " + jid + " is not running (" + v1::JobState_Name(rec.state()) + ")");
          continue;
        }
        if (rec.spec().no_requeue() || rec.spec().interactive()) {
          fail(StatusCode::kFailedPrecondition,
               "job " + jid +
                   (rec.spec().interactive() ? " is an srun/salloc allocation"
                                             : " was submitted with --no-requeue") +
                   "; it cannot be requeued");
          continue;
        }
        RequeueOrFail(*job, "JobRequeued", "requeued by " + caller.user, now, m);
        CommitOrDie(m);
        break;
      }
      default:
        fail(StatusCode::kInvalidArgument, "unknown job update action");
        continue;
    }
    spdlog::info("update job={} action={} user={}", id,
                 v1::UpdateJobRequest::Action_Name(req.action()), caller.user);
  }
  return resp;
}

Result<v1::UpdateNodeResponse> Engine::UpdateNode(const Caller& caller,
                                                  const v1::UpdateNodeRequest& req, TimeMs now) {
  if (!caller.is_admin) {
    return PermissionDenied(
        "draining and resuming nodes needs an admin (root or listed in admins)");
  }
  MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandHostlist(req.nodes()));
  if (names.empty()) return InvalidArgument("no node names given");
  std::vector<std::string> unknown;
  for (const auto& n : names) {
    if (!FindNode(n)) unknown.push_back(n);
  }
  if (!unknown.empty()) return NotFound("unknown node(s): " + CompressHostlist(unknown));
  store::Mutation m;
  std::vector<v1::NodeRecord> next;
  for (const auto& n : names) {
    NodeEntry* node = FindNode(n);
    v1::NodeRecord r = node->rec;
    if (req.action() == v1::UpdateNodeRequest::DRAIN) {
      if (Trim(req.reason()).empty()) {
        return InvalidArgument("a reason is required to drain a node (--reason)");
      }
      r.set_drain(true);
      r.set_reason(req.reason());
      r.set_reason_user(caller.user);
      r.set_reason_time_ms(now);
      r.clear_drained_by();  // an admin's drain now: only an admin lifts it
    } else if (req.action() == v1::UpdateNodeRequest::RESUME) {
      if (!r.drain() && !node->down) {
        return InvalidArgument("node " + n + " is not drained or down; nothing to resume");
      }
      for (const auto& g : node->inventory.gpus()) {
        if (!g.health().empty()) {
          return FailedPrecondition("node " + n + " still reports gpu" + std::to_string(g.index()) +
                                    " unhealthy (" + g.health() +
                                    "); fix or reset the GPU and restart musterd there first");
        }
      }
      r.set_drain(false);
      r.clear_reason();
      r.clear_reason_user();
      r.clear_reason_time_ms();
      r.clear_drained_by();
    } else {
      return InvalidArgument("unknown node update action");
    }
    m.PutNode(r);
    next.push_back(std::move(r));
  }
  MUSTER_RETURN_IF_ERROR(Commit(m));
  v1::UpdateNodeResponse resp;
  for (auto& r : next) {
    NodeEntry* node = FindNode(r.name());
    if (req.action() == v1::UpdateNodeRequest::RESUME && node->down) {
      // Give a node that was declared lost another chance; liveness decides again.
      node->down = false;
      node->not_responding = false;
      node->last_heard_ms = now;
    }
    spdlog::info("node={} {} by user={} reason='{}'", r.name(), r.drain() ? "drained" : "resumed",
                 caller.user, r.reason());
    node->rec = std::move(r);
    resp.add_updated(node->config.name);
  }
  schedule_requested_ = true;
  return resp;
}

// ---------------------------------------------------------------------------------------------
// Scheduling

bool Engine::Schedulable(const NodeEntry& node) const {
  return node.registered && node.session && !node.down && !node.not_responding &&
         !node.rec.drain() && node.stale_jobs.empty();
}

std::string Engine::WhyUnschedulable(const NodeEntry& node) const {
  if (node.down) return "down";
  if (!node.registered) return "not registered (its agent has not started)";
  if (node.not_responding || !node.session) return "not responding";
  if (node.rec.drain())
    return "drained" + (node.rec.reason().empty() ? "" : ": " + node.rec.reason());
  if (!node.stale_jobs.empty()) return "cleaning up jobs it should not run";
  return "";
}

core::ClusterView Engine::LiveView(TimeMs now) const {
  core::ClusterView view = base_view_;
  view.nodes.reserve(nodes_.size());
  for (const auto& n : nodes_) {
    view.nodes.push_back(n.view);
    view.nodes.back().schedulable = Schedulable(n);
    if (!view.nodes.back().schedulable) view.nodes.back().unavailable = WhyUnschedulable(n);
  }
  AddRunningUse(view, now);
  return view;
}

core::PendingJob Engine::ToPendingJob(const JobEntry& job) const {
  const v1::JobRecord& r = job.rec;
  core::PendingJob pj;
  pj.id = r.id();
  pj.submit_time_ms = r.submit_time_ms();
  pj.request = job.request;
  pj.priority.fixed = r.priority();
  if (r.spec().max_switches() > 0) {
    // --switches=N[@time]: the wait is capped by (and defaults to) max_switch_wait_ms.
    const int64_t cap = options_.config.scheduling.max_switch_wait_ms;
    const int64_t asked = r.spec().switches_wait_ms();
    pj.max_leaves_wait_ms = asked > 0 ? std::min(asked, cap) : cap;
  }
  pj.had_reservation = job.had_reservation;
  return pj;
}

bool Engine::InPass(const v1::JobRecord& r) {
  // A requeued job waits until its old run has left every node.
  return r.state() == v1::PENDING && !r.spec().hold() && r.completing_nodes_size() == 0;
}

void Engine::AddRunningUse(core::ClusterView& view, TimeMs now) const {
  const TimeMs overdue = now + options_.config.scheduling.kill_grace_ms;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (uint64_t id : nodes_[i].jobs) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) continue;
      const v1::JobRecord& r = it->second.rec;
      // Running: until its time limit. Ended but still cleaning up, or over its limit and being
      // killed: about one kill grace from now.
      TimeMs end = core::kNever;
      if (r.state() == v1::RUNNING && r.time_limit_ms() > 0) {
        end = r.start_time_ms() + r.time_limit_ms();
      }
      if (r.state() != v1::RUNNING || end <= now) end = overdue;
      for (const auto& na : r.allocation().nodes()) {
        if (na.node() != nodes_[i].config.name) continue;
        core::RunningUse use{id,
                             static_cast<core::NodeIndex>(i),
                             end,
                             static_cast<uint32_t>(na.cpu_ids_size()),
                             static_cast<uint32_t>(na.gpu_indices_size()),
                             na.mem_mb(),
                             {}};
        if (na.gres_size() > 0) {
          use.gres.assign(nodes_[i].view.gres.size(), 0);
          for (const auto& [pool, units] : ToPlacement(na, nodes_[i].view, 0).gres) {
            use.gres[pool] += static_cast<uint32_t>(units.size());
          }
        }
        view.running.push_back(std::move(use));
      }
    }
  }
}

bool Engine::StartStillValid(const core::JobStart& start) const {
  auto it = jobs_.find(start.job);
  if (it == jobs_.end() || it->second.rec.state() != v1::PENDING || it->second.rec.spec().hold() ||
      it->second.rec.completing_nodes_size() > 0) {
    return false;
  }
  for (const core::NodePlacement& np : start.placement.nodes) {
    if (np.node >= nodes_.size()) return false;
    const NodeEntry& node = nodes_[np.node];
    if (!Schedulable(node)) return false;
    for (uint32_t c : np.cpus) {
      if (c >= node.view.cpu_free.size() || !node.view.cpu_free[c]) return false;
    }
    for (uint32_t g : np.gpus) {
      if (g >= node.view.gpu_free.size() || !node.view.gpu_free[g]) return false;
    }
    if (node.view.memory_free_mb < np.mem_mb) return false;
    for (const auto& [pool, units] : np.gres) {
      if (pool >= node.view.gres.size()) return false;
      for (uint32_t u : units) {
        if (u >= node.view.gres[pool].free.size() || !node.view.gres[pool].free[u]) return false;
      }
    }
  }
  return true;
}

void Engine::RunSchedulePass(TimeMs now) {
  if (auto in = PreparePass(now)) ApplyPass(ComputePass(*in), now);
}

core::SchedulePass Engine::ComputePass(const PassInput& in) {
  return core::Schedule(in.view, in.queue, in.now, in.config);
}

std::optional<Engine::PassInput> Engine::PreparePass(TimeMs now) {
  schedule_requested_ = false;
  last_pass_ms_ = now;
  PassInput in;
  in.now = now;
  in.config = sched_config_;
  std::vector<core::PendingJob>& queue = in.queue;
  // Job arrays with %N: how many more of their tasks may start in this pass.
  std::map<uint64_t, int64_t> array_room;
  for (uint64_t id : pending_) {
    const v1::JobRecord& r = jobs_.at(id).rec;
    if (r.has_array() && r.array().max_running() > 0) {
      array_room.emplace(r.array().array_job_id(), r.array().max_running());
    }
  }
  if (!array_room.empty()) {
    for (const auto& [id, job] : jobs_) {
      const v1::JobRecord& r = job.rec;
      if (!r.has_array() || (r.state() != v1::RUNNING && r.completing_nodes_size() == 0)) continue;
      if (auto it = array_room.find(r.array().array_job_id()); it != array_room.end()) --it->second;
    }
  }
  for (uint64_t id : pending_) {
    JobEntry& job = jobs_.at(id);
    if (!InPass(job.rec)) {
      job.had_reservation = false;  // out of this pass: it holds no reservation in it
      continue;
    }
    if (job.rec.has_array() && job.rec.array().max_running() > 0 &&
        array_room[job.rec.array().array_job_id()]-- <= 0) {
      job.had_reservation = false;
      job.rec.set_reason("JobArrayTaskLimit");
      job.rec.set_reason_detail("the array runs at most " +
                                std::to_string(job.rec.array().max_running()) +
                                " tasks at once (--array=" + job.rec.array().spec() + ")");
      continue;
    }
    core::PendingJob pj = ToPendingJob(job);
    job.priority = core::ComputePriority(pj, core::TierOf(pj.request, capacity_view_),
                                         priority_scale_, now, sched_config_.weights);
    queue.push_back(std::move(pj));
  }
  if (queue.empty()) return std::nullopt;
  in.view = LiveView(now);
  return in;
}

void Engine::ApplyPass(const core::SchedulePass& pass, TimeMs now) {
  // Persist every start of the pass in one batch, then apply and launch.
  store::Mutation m;
  std::vector<v1::JobRecord> started;
  for (const core::JobStart& s : pass.starts) {
    if (!StartStillValid(s)) {
      spdlog::warn("scheduling pass: start of job={} no longer fits the live state; next pass",
                   s.job);
      schedule_requested_ = true;
      continue;
    }
    JobEntry* job = FindJob(s.job);
    v1::JobRecord next = job->rec;
    next.set_state(v1::RUNNING);
    next.set_start_time_ms(now);
    next.set_reason("None");
    next.clear_reason_detail();
    next.set_batch_started(false);
    next.set_credential(options_.make_credential());
    next.set_next_step_id(0);
    v1::Allocation* a = next.mutable_allocation();
    a->Clear();
    a->set_partition(s.placement.partition);
    for (const core::NodePlacement& np : s.placement.nodes) {
      v1::NodeAllocation* na = a->add_nodes();
      na->set_node(nodes_[np.node].config.name);
      for (uint32_t c : np.cpus) na->add_cpu_ids(c);
      for (uint32_t g : np.gpus) na->add_gpu_indices(g);
      na->set_mem_mb(np.mem_mb);
      na->set_ntasks(np.ntasks);
      const core::NodeView& v = nodes_[np.node].view;
      for (const auto& [pool, units] : np.gres) {
        const core::GresView& gv = v.gres[pool];
        v1::GresUnits* g = na->add_gres();
        g->set_name(gv.name);
        g->set_type(gv.type);
        for (uint32_t u : units) {
          g->add_units(u);
          if (gv.shards()) g->add_on_gpu(gv.on_gpu[u]);
        }
      }
    }
    m.PutJob(next);
    started.push_back(std::move(next));
  }
  if (!started.empty()) {
    Status s = Commit(m);
    if (!s.ok()) {
      spdlog::error("scheduling pass: cannot persist {} job starts, retrying next pass: {}",
                    started.size(), s.ToString());
      schedule_requested_ = true;
      return;
    }
  }
  for (auto& rec : started) {
    JobEntry* job = FindJob(rec.id());
    job->rec = std::move(rec);
    pending_.erase(job->rec.id());
    job->started_nodes.clear();
    HoldResources(job->rec);
    spdlog::info("start job={} nodes={} partition={}", job->rec.id(),
                 job->rec.allocation().nodes_size(), job->rec.allocation().partition());
    for (int i = 0; i < job->rec.allocation().nodes_size(); ++i)
      SendLaunch(*job, static_cast<size_t>(i));
  }
  // Reasons only for jobs that still wait (one may have been cancelled or held meanwhile).
  auto waiting = [&](core::JobId id) -> JobEntry* {
    JobEntry* job = FindJob(id);
    return job && job->rec.state() == v1::PENDING && !job->rec.spec().hold() ? job : nullptr;
  };
  for (const core::PendingReason& p : pass.pending) {
    JobEntry* job = waiting(p.job);
    if (!job) continue;
    job->rec.set_reason(p.reason);
    job->rec.set_reason_detail(p.detail);
    job->expected_start_ms = p.expected_start_ms;
    job->had_reservation = false;
  }
  reservations_.clear();
  for (const core::Reservation& r : pass.reservations) {
    if (JobEntry* job = waiting(r.job)) {
      job->had_reservation = true;
      reservations_.push_back(r);
    }
  }
}

void Engine::SendLaunch(const JobEntry& job, size_t pos) {
  const v1::JobRecord& r = job.rec;
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
    auto payload = store_->ReadJobPayload(r.id());
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
  l->set_kill_grace_ms(options_.config.scheduling.kill_grace_ms);
  l->set_credential(r.credential());
  l->set_cluster_name(options_.config.cluster_name);
  l->set_start_time_ms(r.start_time_ms());
  l->set_requeue_count(r.requeue_count());
  const std::string& node = r.allocation().nodes(static_cast<int>(pos)).node();
  if (const NodeEntry* n = FindNode(node)) {
    l->set_topology(n->config.topology);
  }
  Send(node, std::move(msg));
}

void Engine::RebuildJobOrder() {
  job_order_.clear();
  job_order_.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) job_order_.emplace_back(id, &job);
}

Status Engine::CheckInvariantsForTest() const {
  if (job_order_.size() != jobs_.size()) return Internal("job_order_ does not mirror jobs_");
  {
    size_t k = 0;
    for (const auto& [id, job] : jobs_) {
      if (job_order_[k].first != id || job_order_[k].second != &job) {
        return Internal("job_order_ differs from jobs_ at job " + std::to_string(id));
      }
      ++k;
    }
  }
  for (const auto& node : nodes_) {
    std::vector<int> cpu_use(node.view.cpus, 0), gpu_use(node.view.gpus, 0);
    std::vector<int> shard_use(node.view.gpus, 0);
    std::vector<std::vector<int>> gres_use;
    for (const core::GresView& gv : node.view.gres) gres_use.emplace_back(gv.free.size(), 0);
    uint64_t mem = 0;
    for (uint64_t id : node.jobs) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) return Internal("node " + node.config.name + " holds unknown job");
      for (const auto& na : it->second.rec.allocation().nodes()) {
        if (na.node() != node.config.name) continue;
        for (uint32_t c : na.cpu_ids()) {
          if (c >= cpu_use.size() || ++cpu_use[c] > 1) {
            return Internal("cpu " + std::to_string(c) + " on " + node.config.name +
                            " is held twice");
          }
        }
        for (uint32_t g : na.gpu_indices()) {
          if (g >= gpu_use.size() || ++gpu_use[g] > 1) {
            return Internal("gpu " + std::to_string(g) + " on " + node.config.name +
                            " is held twice");
          }
        }
        mem += na.mem_mb();
        for (const v1::GresUnits& g : na.gres()) {
          int32_t pool = PoolOf(node.view, g);
          if (pool < 0) return Internal("job holds an unknown GRES on " + node.config.name);
          for (uint32_t u : g.units()) {
            auto& use = gres_use[static_cast<size_t>(pool)];
            if (u >= use.size() || ++use[u] > 1) {
              return Internal(g.name() + " unit " + std::to_string(u) + " on " + node.config.name +
                              " is held twice");
            }
            const core::GresView& gv = node.view.gres[static_cast<size_t>(pool)];
            if (gv.shards()) ++shard_use[gv.on_gpu[u]];
          }
        }
      }
    }
    for (size_t p = 0; p < gres_use.size(); ++p) {
      const core::GresView& gv = node.view.gres[p];
      for (size_t u = 0; u < gres_use[p].size(); ++u) {
        const bool closed = gv.shards() && gpu_use[gv.on_gpu[u]] > 0;
        if ((gres_use[p][u] == 0 && !closed) != static_cast<bool>(gv.free[u])) {
          return Internal(gv.name + " free map of " + node.config.name +
                          " disagrees with its jobs");
        }
      }
    }
    for (size_t g = 0; g < shard_use.size(); ++g) {
      if (shard_use[g] > 0 && gpu_use[g] > 0) {
        return Internal("gpu " + std::to_string(g) + " on " + node.config.name +
                        " is held whole and as shards");
      }
      gpu_use[g] += shard_use[g];
    }
    for (size_t c = 0; c < cpu_use.size(); ++c) {
      if ((cpu_use[c] == 0) != static_cast<bool>(node.view.cpu_free[c])) {
        return Internal("cpu free map of " + node.config.name + " disagrees with its jobs");
      }
    }
    for (size_t g = 0; g < gpu_use.size(); ++g) {
      if ((gpu_use[g] == 0) != static_cast<bool>(node.view.gpu_free[g])) {
        return Internal("gpu free map of " + node.config.name + " disagrees with its jobs");
      }
    }
    if (node.view.memory_free_mb != node.view.memory_mb - std::min(mem, node.view.memory_mb)) {
      return Internal("memory of " + node.config.name + " disagrees with its jobs");
    }
  }
  // Every running job holds all of its nodes.
  for (const auto& [id, job] : jobs_) {
    if (job.rec.state() != v1::RUNNING) continue;
    for (const auto& na : job.rec.allocation().nodes()) {
      auto it = node_index_.find(na.node());
      if (it != node_index_.end() && !nodes_[it->second].jobs.count(id) &&
          !nodes_[it->second].down) {
        return Internal("running job " + std::to_string(id) + " does not hold node " + na.node());
      }
    }
  }
  return Status::Ok();
}

}  // namespace muster::controller
