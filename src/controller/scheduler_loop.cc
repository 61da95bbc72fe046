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
                             ResourceLedger& ledger, const ClusterViews& views, PassPolicy& policy)
    : ctx_(ctx), jobs_(jobs), nodes_(nodes), ledger_(ledger), views_(views), policy_(policy) {
  priority_scale_ = core::PriorityScale::Of(views.capacity());
  const SchedulingConfig& sc = ctx.config().scheduling;
  config_.backfill_depth = sc.backfill_depth;
  config_.strict_backfill = sc.backfill == "strict";
  config_.backfill_by_rank = sc.backfill_order != "priority";
  config_.placement = sc.placement == "first_fit" ? core::PlacementMode::kFirstFit
                      : sc.placement == "random"  ? core::PlacementMode::kRandom
                                                  : core::PlacementMode::kTopology;
  config_.placement_seed = sc.placement_seed;
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

core::PendingJob SchedulerLoop::ToPendingJob(const JobEntry& job, TimeMs now) const {
  const v1::JobRecord& r = job.rec();
  core::PendingJob pj;
  pj.id = r.id();
  pj.submit_time_ms = r.submit_time_ms();
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
  policy_.Order(job, now, &pj);
  // --gpus-per-node=h100:8|a100:8: its types in order (the policy adds limits and quotas).
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

// ---------------------------------------------------------------------------------------------
// The pass

std::optional<Engine::PassInput> SchedulerLoop::Prepare(TimeMs now) {
  policy_.BeforePass(now);
  ctx_.PassStarted();
  last_pass_ms_ = now;
  throttled_.clear();
  Engine::PassInput in;
  in.now = now;
  in.config = config_;
  in.queue.reserve(jobs_.pending().size());
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
  core::ClusterView accounts;  // the policy's counters, quotas and cohorts, for the pass's view
  policy_.BeginPass(&accounts);
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
                     views_.GpuTypeOf(job.request)};
    std::string detail;
    if (const core::JobReason no = policy_.Admit(job, use, &detail); no != core::JobReason::kNone) {
      job.had_reservation = false;
      jobs_.SetWaitReason(job, no, std::move(detail));
      continue;
    }
    if (job.rec().has_array() && job.rec().array().max_running() > 0 &&
        array_room[job.rec().array().array_job_id()]-- <= 0) {
      job.had_reservation = false;
      jobs_.SetWaitReason(job, core::JobReason::kJobArrayTaskLimit, ThrottleDetail(job.rec()));
      continue;
    }
    core::PendingJob pj = ToPendingJob(job, now);
    policy_.Charge(job, use, &pj);
    job.priority = core::ComputePriority(pj, core::TierOf(pj.request, views_.capacity()),
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
  in.view = views_.LiveView(now);
  in.view.limits = std::move(accounts.limits);
  in.view.quotas = std::move(accounts.quotas);
  in.view.cohorts = std::move(accounts.cohorts);
  return in;
}

core::SchedulePass SchedulerLoop::Compute(const Engine::PassInput& in) {
  return core::Schedule(in.view, in.queue, in.now, in.config);
}

void SchedulerLoop::Apply(const core::SchedulePass& pass, TimeMs now) {
  ++totals_.passes;
  totals_.forecasts += pass.stats.forecasts;
  totals_.jobs_backfilled += pass.stats.backfilled;
  totals_.last_considered = pass.stats.considered;
  totals_.last_reservations = static_cast<uint32_t>(pass.reservations.size());
  CommitStarts(pass, now);
  // Also when the starts could not be stored: those left waiting are who preemption is for.
  policy_.AfterPass(pass, now);
}

void SchedulerLoop::CommitStarts(const core::SchedulePass& pass, TimeMs now) {
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
  std::vector<TimeMs> waits;  // each start's time in the queue
  std::vector<uint64_t> throttled_carriers;
  for (const core::JobStart* sp : valid) {
    const core::JobStart& s = *sp;
    auto from = split.start_from.find(s.job);
    const JobEntry* own = from == split.start_from.end() ? jobs_.Find(s.job) : nullptr;
    if (from == split.start_from.end() && !own) continue;  // named twice in one pass: once is all
    const v1::JobRecord& before = own ? own->rec() : from->second;
    JobChange c{.to = v1::RUNNING,
                .allocation = ledger_.ToAllocation(s.placement),
                .credential = ctx_.MakeCredential()};
    policy_.Start(s, before, now, &c);
    waits.push_back(now - std::max(before.submit_time_ms(), before.spec().begin_time_ms()));
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
    totals_.jobs_started += started.size();
    for (TimeMs w : waits)
      totals_.queue_waits.Add(static_cast<double>(std::max<TimeMs>(w, 0)) / 1000.0);
  }
  for (const v1::JobRecord& r : split.new_carriers) {
    if (throttled_.count(r.array().array_job_id())) throttled_carriers.push_back(r.id());
  }
  jobs_.AdoptSplit(std::move(split));
  for (Start& s : started) {
    JobEntry* job = jobs_.Find(s.id);
    ledger_.Hold(s.id, *s.placement);
    jobs_.Apply(*job, std::move(s.next), now);
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
    if (InPass(job.rec())) in.queue.push_back(ToPendingJob(job, now));
  }
  core::PendingJob pj;
  pj.id = id;
  pj.submit_time_ms = now;
  pj.request = request;
  in.queue.push_back(pj);
  in.view = views_.LiveView(now);
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
