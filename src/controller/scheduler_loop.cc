#include "scheduler_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "array_tasks.h"
#include "job_views.h"
#include "muster/common/duration.h"
#include "muster/core/scheduler.h"

namespace muster::controller {
namespace {

std::string ThrottleDetail(const v1::JobRecord& r) {
  return "the array runs at most " + std::to_string(r.array().max_running()) +
         " tasks at once (--array=" + r.array().spec() + ")";
}

}  // namespace

SchedulerLoop::SchedulerLoop(EngineContext& ctx, JobManager& jobs, const NodeManager& nodes,
                             ResourceLedger& ledger)
    : ctx_(ctx), jobs_(jobs), nodes_(nodes), ledger_(ledger) {
  const Config& c = ctx.config();
  for (const PartitionConfig& pc : c.partitions) {
    core::PartitionView pv;
    pv.name = pc.name;
    pv.max_time_ms = pc.max_time_ms;
    pv.priority_tier = pc.priority_tier;
    for (const std::string& n : pc.nodes) {
      pv.nodes.push_back(static_cast<core::NodeIndex>(*ctx.NodeIndex(n)));
    }
    base_view_.partitions.push_back(std::move(pv));
  }
  capacity_view_ = base_view_;
  for (size_t i = 0; i < ledger.size(); ++i) capacity_view_.nodes.push_back(ledger.node(i));
  priority_scale_ = core::PriorityScale::Of(capacity_view_);
  for (const core::PartitionView& pv : capacity_view_.partitions) {
    std::string type;
    bool mixed = false;
    for (core::NodeIndex n : pv.nodes) {
      const core::NodeView& nv = capacity_view_.nodes[n];
      if (nv.gpus == 0) continue;
      if (!type.empty() && nv.gpu_type != type) mixed = true;
      type = nv.gpu_type;
    }
    partition_gpu_type_[pv.name] = mixed ? "" : type;
  }
  const SchedulingConfig& sc = c.scheduling;
  config_.backfill_depth = sc.backfill_depth;
  config_.weights.age = sc.priority_weight_age;
  config_.weights.size = sc.priority_weight_size;
  config_.weights.partition = sc.priority_weight_partition;
  config_.weights.qos = sc.priority_weight_qos;
  config_.weights.fairshare = sc.priority_weight_fairshare;
  config_.weights.max_age_ms = static_cast<TimeMs>(sc.priority_max_age_ms);
}

void SchedulerLoop::Tick(TimeMs now) {
  if (!jobs_.pending().empty() &&
      now - last_pass_ms_ >= static_cast<TimeMs>(ctx_.scheduling().sched_max_interval_ms)) {
    ctx_.RequestPass();
  }
}

bool SchedulerLoop::InPass(const v1::JobRecord& r) {
  // A requeued job waits until its old run has left every node, lost ones included.
  return r.state() == v1::PENDING && !r.spec().hold() && r.completing_nodes_size() == 0 &&
         r.unconfirmed_nodes_size() == 0 && r.dependency_terms_size() == 0;
}

core::ClusterView SchedulerLoop::LiveView(TimeMs now) const {
  core::ClusterView view = base_view_;
  view.nodes.reserve(ledger_.size());
  for (size_t i = 0; i < ledger_.size(); ++i) {
    const NodeEntry& n = nodes_.at(i);
    view.nodes.push_back(ledger_.node(i));
    view.nodes.back().schedulable = nodes_.Schedulable(n);
    if (!view.nodes.back().schedulable) view.nodes.back().unavailable = nodes_.WhyUnschedulable(n);
  }
  // Running: until its time limit. Ended but still cleaning up, or over its limit and being
  // killed: about one kill grace from now.
  const TimeMs overdue = now + ctx_.scheduling().kill_grace_ms;
  ledger_.AddRunningUse(view, [&](uint64_t id) {
    const JobEntry* job = jobs_.Find(id);
    if (!job) return overdue;
    const v1::JobRecord& r = job->rec();
    TimeMs end = LimitEnd(r);
    if (r.state() != v1::RUNNING || end <= now) end = overdue;
    return end;
  });
  if (advance_) advance_->AddWindows(view, now);
  return view;
}

std::string SchedulerLoop::GpuTypeOf(const core::JobRequest& r) const {
  if (!r.gpu_type.empty() || r.gpus_per_node == 0) return r.gpu_type;
  // Any type will do, but where every candidate node has one type, that is the one it gets.
  std::string type;
  for (const std::string& p : r.partitions) {
    auto it = partition_gpu_type_.find(p);
    if (it == partition_gpu_type_.end() || it->second.empty()) return "";
    if (!type.empty() && type != it->second) return "";
    type = it->second;
  }
  return type;
}

core::PendingJob SchedulerLoop::ToPendingJob(const JobEntry& job) const {
  const v1::JobRecord& r = job.rec();
  core::PendingJob pj;
  pj.id = r.id();
  pj.submit_time_ms = r.submit_time_ms();
  if (fairshare_of_) pj.priority.fairshare = fairshare_of_(r.spec());
  if (qos_of_) pj.priority.qos = qos_of_(r.spec());
  pj.request = job.request;
  pj.priority.fixed = r.priority();
  pj.priority.nice = r.spec().nice();
  if (r.spec().max_switches() > 0) {
    // --switches=N[@time]: the wait is capped by (and defaults to) max_switch_wait_ms.
    const int64_t cap = ctx_.scheduling().max_switch_wait_ms;
    const int64_t asked = r.spec().switches_wait_ms();
    pj.max_leaves_wait_ms = asked > 0 ? std::min(asked, cap) : cap;
  }
  pj.had_reservation = job.had_reservation;
  pj.preempting = job.preempting;
  // --gpus-per-node=h100:8|a100:8: its types in order (Prepare adds limits and quotas).
  for (const std::string& type : r.spec().gpu_types()) pj.choices.push_back({type, {}, -1});
  return pj;
}

bool SchedulerLoop::StartStillValid(const core::JobStart& start) const {
  // An array task waiting in its carrier's record is as its carrier is.
  const JobEntry* job = jobs_.Covering(start.job);
  if (!job || !InPass(job->rec())) return false;
  for (const core::NodePlacement& np : start.placement.nodes) {
    if (np.node >= nodes_.size() || !nodes_.Schedulable(nodes_.at(np.node))) return false;
  }
  return ledger_.Fits(start.placement);
}

Status SchedulerLoop::CanEverRun(const core::JobRequest& asked) {
  // Reservations come and go (and change their nodes): they are not the configuration's, so
  // the answer, cached per shape, leaves them out; the pass says when one does not fit.
  core::JobRequest request = asked;
  request.reservation.clear();
  const std::string shape = core::ShapeKey(request);
  auto cached = ever_cache_.find(shape);
  if (cached == ever_cache_.end()) {
    if (ever_cache_.size() >= 4096) ever_cache_.clear();
    cached =
        ever_cache_
            .emplace(shape, core::Place(request, capacity_view_, core::PlaceMode::kEver).status())
            .first;
  }
  if (cached->second.ok()) return Status::Ok();
  return Status(cached->second.code(), "job can never run: " + cached->second.message());
}

// ---------------------------------------------------------------------------------------------
// The pass

std::optional<Engine::PassInput> SchedulerLoop::Prepare(TimeMs now) {
  ctx_.PassStarted();
  last_pass_ms_ = now;
  throttled_.clear();
  Engine::PassInput in;
  in.now = now;
  in.config = config_;
  // Job arrays with %N: how many more of their tasks may start in this pass.
  std::map<uint64_t, int64_t> array_room;
  for (const auto& [id, job] : jobs_.pending()) {
    const v1::JobRecord& r = job->rec();
    if (r.has_array() && r.array().max_running() > 0) {
      array_room.emplace(r.array().array_job_id(), r.array().max_running());
    }
  }
  if (!array_room.empty()) {
    // A task counts while it runs or still cleans up somewhere, that is while it holds
    // resources on a node: the ledger knows those jobs, far fewer than the jobs in memory.
    std::set<uint64_t> holding;
    for (size_t i = 0; i < ledger_.size(); ++i) {
      for (const auto& [id, held] : ledger_.held(i)) holding.insert(id);
    }
    for (uint64_t id : holding) {
      const JobEntry* job = jobs_.Find(id);
      if (!job || !job->rec().has_array()) continue;
      if (auto it = array_room.find(job->rec().array().array_job_id()); it != array_room.end()) {
        --it->second;
      }
    }
  }
  std::optional<uint64_t> free_cpus;  // on schedulable nodes, summed when an array needs it
  std::vector<core::LimitCounter> counters;
  if (limits_) limits_->BeginPass(&counters);
  core::ClusterView quota_view;  // its quotas and cohorts go into the pass's view
  const bool quotas = quotas_ && quotas_->any();
  if (quotas) quotas_->Fill(&quota_view);
  for (const auto& [id, entry] : jobs_.pending()) {
    JobEntry& job = *entry;
    if (!InPass(job.rec())) {
      job.had_reservation = false;  // out of this pass: it holds no reservation in it
      continue;
    }
    if (job.rec().spec().begin_time_ms() > now) {
      job.had_reservation = false;
      jobs_.SetWaitReason(
          job, core::JobReason::kBeginTime,
          "not before " + FormatTimestamp(job.rec().spec().begin_time_ms()) + " (--begin)");
      continue;
    }
    const JobUse use{job.request.nodes, job.request.nodes * job.request.gpus_per_node,
                     GpuTypeOf(job.request)};
    if (limits_) {
      std::string detail;
      const core::JobReason over =
          limits_->PerJobLimit(job.rec().spec(), job.rec().time_limit_ms(), use, &detail);
      if (over != core::JobReason::kNone) {
        job.had_reservation = false;
        jobs_.SetWaitReason(job, over, std::move(detail));
        continue;
      }
    }
    if (job.rec().has_array() && job.rec().array().max_running() > 0 &&
        array_room[job.rec().array().array_job_id()]-- <= 0) {
      job.had_reservation = false;
      jobs_.SetWaitReason(job, core::JobReason::kJobArrayTaskLimit, ThrottleDetail(job.rec()));
      continue;
    }
    core::PendingJob pj = ToPendingJob(job);
    if (quotas || !pj.choices.empty()) {
      // Each GPU type it may run on is a choice with its own limit charges and quota.
      pj.choices.clear();
      for (std::string& type : quotas
                                   ? quotas_->ChoiceTypes(job)
                                   : std::vector<std::string>(job.rec().spec().gpu_types().begin(),
                                                              job.rec().spec().gpu_types().end())) {
        core::PendingJob::Choice c;
        if (limits_) {
          JobUse typed = use;
          if (!type.empty()) typed.gpu_type = type;
          c.limits = limits_->ChargesOf(job.rec().spec(), typed);
        }
        if (quotas && use.gpus > 0) c.quota = quotas_->QuotaIndex(job.rec().spec().account(), type);
        c.gpu_type = std::move(type);
        pj.choices.push_back(std::move(c));
      }
    } else if (limits_) {
      pj.limits = limits_->ChargesOf(job.rec().spec(), use);
    }
    job.priority = core::ComputePriority(pj, core::TierOf(pj.request, capacity_view_),
                                         priority_scale_, now, config_.weights);
    if (Carries(job.rec()) && job.array_tasks) {
      // The tasks waiting in its record go in as jobs of their own, as many as the free CPUs
      // could start now (with the carrier, one more than that holds the array's place): a
      // 100,000-task array is not 100,000 entries in every pass.
      if (!free_cpus) {
        free_cpus = 0;
        for (size_t i = 0; i < ledger_.size(); ++i) {
          if (nodes_.Schedulable(nodes_.at(i))) *free_cpus += ledger_.node(i).FreeCpus();
        }
      }
      uint64_t copies = *free_cpus / std::max<uint64_t>(1, TotalsOf(job.request).cpus);
      if (job.rec().array().max_running() > 0) {
        int64_t& left = array_room[job.rec().array().array_job_id()];
        if (left < static_cast<int64_t>(std::min<uint64_t>(copies, TasksOf(job.rec()) - 1))) {
          // The task that takes over from this carrier, should it start, waits for the %N.
          throttled_.insert(job.rec().array().array_job_id());
        }
        copies = std::min<uint64_t>(copies, static_cast<uint64_t>(std::max<int64_t>(0, left)));
        left -= static_cast<int64_t>(copies);
      }
      const core::PendingJob carrier = pj;
      in.queue.push_back(std::move(pj));
      ForEachWaiting(job.rec(), *job.array_tasks, [&](uint64_t task_job, uint32_t) {
        if (copies == 0) return false;
        --copies;
        in.queue.push_back(carrier);
        in.queue.back().id = task_job;
        return true;
      });
      continue;
    }
    in.queue.push_back(std::move(pj));
  }
  if (in.queue.empty()) return std::nullopt;
  in.view = LiveView(now);
  in.view.limits = std::move(counters);
  in.view.quotas = std::move(quota_view.quotas);
  in.view.cohorts = std::move(quota_view.cohorts);
  return in;
}

core::SchedulePass SchedulerLoop::Compute(const Engine::PassInput& in) {
  return core::Schedule(in.view, in.queue, in.now, in.config);
}

void SchedulerLoop::Apply(const core::SchedulePass& pass, TimeMs now) {
  // Persist every start of the pass in one batch, then hold, apply and launch.
  struct Start {
    uint64_t id;
    const core::Placement* placement;
    v1::JobRecord next;
  };
  store::Mutation m;
  std::vector<const core::JobStart*> valid;
  for (const core::JobStart& s : pass.starts) {
    if (!StartStillValid(s)) {
      spdlog::warn("scheduling pass: start of job={} no longer fits the live state; next pass",
                   s.job);
      ctx_.RequestPass();
      continue;
    }
    valid.push_back(&s);
  }
  // Array tasks that start out of their carrier's record get records of their own, written
  // with the starts.
  std::vector<uint64_t> ids;
  for (const core::JobStart* s : valid) ids.push_back(s->job);
  JobManager::ArraySplit split = jobs_.SplitForStart(ids, m);
  std::vector<Start> started;
  std::vector<uint64_t> throttled_carriers;
  for (const core::JobStart* sp : valid) {
    const core::JobStart& s = *sp;
    auto from = split.start_from.find(s.job);
    const JobEntry* own = from == split.start_from.end() ? jobs_.Find(s.job) : nullptr;
    if (from == split.start_from.end() && !own) continue;  // named twice in one pass: once is all
    const v1::JobRecord& before = own ? own->rec() : from->second;
    JobChange c{.to = v1::RUNNING,
                .allocation = ledger_.ToAllocation(s.placement),
                .credential = ctx_.MakeCredential(),
                .borrowed = quotas_ && quotas_->Borrowed(s, before)};
    if (advance_ && !before.spec().reservation().empty()) {
      // A job of a reservation ends with it (as Slurm's ResvOverRun = 0).
      const TimeMs until = advance_->EndOfRunIn(before.spec().reservation(), now);
      if (until != core::kNever) {
        const int64_t asked = before.spec().time_limit_ms() > 0 ? before.spec().time_limit_ms()
                                                                : before.time_limit_ms();
        c.time_limit_ms = asked > 0 && now + asked <= until ? asked : until - now;
      }
    }
    v1::JobRecord next = jobs_.StageNext(before, c, now, m);
    started.push_back({s.job, &s.placement, std::move(next)});
  }
  if (!started.empty()) {
    Status s = ctx_.Commit(m);
    if (!s.ok()) {
      spdlog::error("scheduling pass: cannot persist {} job starts, retrying next pass: {}",
                    started.size(), s.ToString());
      ctx_.RequestPass();
      return;
    }
  }
  for (const v1::JobRecord& r : split.new_carriers) {
    if (throttled_.count(r.array().array_job_id())) throttled_carriers.push_back(r.id());
  }
  jobs_.AdoptSplit(std::move(split));
  for (Start& s : started) {
    JobEntry* job = jobs_.Find(s.id);
    ledger_.Hold(s.id, *s.placement);
    jobs_.Apply(*job, std::move(s.next));
  }
  // Reasons only for jobs that still wait (one may have been cancelled or held meanwhile).
  auto waiting = [&](core::JobId id) -> JobEntry* {
    JobEntry* job = jobs_.Find(id);
    return job && job->rec().state() == v1::PENDING && !job->rec().spec().hold() ? job : nullptr;
  };
  for (const core::PendingReason& p : pass.pending) {
    JobEntry* job = waiting(p.job);
    if (!job) continue;
    jobs_.SetWaitReason(*job, p.reason, p.detail);
    job->expected_start_ms = p.expected_start_ms;
    job->had_reservation = false;
  }
  for (uint64_t id : throttled_carriers) {
    if (JobEntry* job = waiting(id)) {
      jobs_.SetWaitReason(*job, core::JobReason::kJobArrayTaskLimit, ThrottleDetail(job->rec()));
    }
  }
  reservations_.clear();
  for (const core::Reservation& r : pass.reservations) {
    if (JobEntry* job = waiting(r.job)) {
      job->had_reservation = true;
      reservations_.push_back(r);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// sbatch --test-only

v1::TestOnlyResult SchedulerLoop::TestOnly(uint64_t id, const core::JobRequest& request,
                                           TimeMs now) const {
  Engine::PassInput in;
  in.now = now;
  in.config = config_;
  for (const auto& [pending, entry] : jobs_.pending()) {
    const JobEntry& job = *entry;
    if (InPass(job.rec())) in.queue.push_back(ToPendingJob(job));
  }
  core::PendingJob pj;
  pj.id = id;
  pj.submit_time_ms = now;
  pj.request = request;
  in.queue.push_back(pj);
  in.view = LiveView(now);
  const core::SchedulePass pass = Compute(in);
  v1::TestOnlyResult out;
  out.set_cpus(TotalsOf(request).cpus);
  for (const core::JobStart& s : pass.starts) {
    if (s.job != id) continue;
    out.set_starts_now(true);
    out.set_start_ms(now);
    out.set_partition(s.placement.partition);
    uint32_t held = 0;
    for (const core::NodePlacement& np : s.placement.nodes) {
      out.add_nodes(in.view.nodes[np.node].name);
      held += static_cast<uint32_t>(np.cpus.size());
    }
    out.set_cpus(held);
    return out;
  }
  for (const core::PendingReason& p : pass.pending) {
    if (p.job != id) continue;
    out.set_reason(core::ReasonName(p.reason));
    out.set_reason_detail(p.detail);
    if (p.expected_start_ms != core::kNever) out.set_start_ms(p.expected_start_ms);
  }
  for (const core::Reservation& res : pass.reservations) {
    if (res.job != id) continue;
    out.set_partition(res.partition);
    for (core::NodeIndex n : res.nodes) out.add_nodes(in.view.nodes[n].name);
  }
  return out;
}

}  // namespace muster::controller
