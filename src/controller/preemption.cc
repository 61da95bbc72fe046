#include "preemption.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "job_views.h"
#include "muster/core/preemption.h"
#include "usage_limits.h"

namespace muster::controller {
namespace {

// Waiting for resources, not for a limit, a dependency or a hold: what preemption can cure.
bool WaitsForResources(core::JobReason r) {
  return r == core::JobReason::kResources || r == core::JobReason::kPriority;
}

}  // namespace

bool Preemptor::MayPreempt(const JobEntry& job) const {
  const v1::QosRecord* q = qos_.Find(job.rec.spec().qos());
  return q && q->preempt_size() > 0;
}

bool Preemptor::VictimsLeaving(uint64_t preemptor) const {
  auto it = waiting_.find(preemptor);
  if (it == waiting_.end()) return false;
  for (uint64_t v : it->second) {
    const JobEntry* job = jobs_.Find(v);
    if (job && job->rec.completing_nodes_size() > 0) return true;
    if (job && job->rec.state() == v1::RUNNING) return true;  // not yet told (cannot happen)
  }
  return false;
}

void Preemptor::Preempt(JobEntry& victim, const JobEntry& preemptor, const std::string& why,
                        TimeMs now, store::Mutation& m) {
  const v1::QosRecord* vq = qos_.Find(victim.rec.spec().qos());
  const uint64_t grace =
      vq && vq->grace_time_ms() > 0 ? vq->grace_time_ms() : ctx_.scheduling().kill_grace_ms;
  const bool requeue = !vq || vq->preempt_mode() != v1::PREEMPT_CANCEL;
  jobs_.Preempt(victim, preemptor.id(), why, requeue,
                static_cast<uint32_t>(std::min<uint64_t>(grace, UINT32_MAX)), now, m);
}

std::optional<core::PreemptCandidate> Preemptor::Candidate(const JobEntry& job) const {
  core::PreemptCandidate c;
  c.job = job.id();
  c.priority = job.priority.priority;
  c.work_since_ms = job.rec.start_time_ms();
  for (const auto& na : job.rec.allocation().nodes()) {
    std::optional<size_t> i = ctx_.NodeIndex(na.node());
    if (!i || !ledger_.Holds(*i, job.id())) return std::nullopt;
    c.placement.nodes.push_back(ledger_.held(*i).at(job.id()));
  }
  return c;
}

void Preemptor::AfterPass(const core::SchedulePass& pass, TimeMs now) {
  // Forget preemptors that started, ended or whose victims have all left.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const JobEntry* job = jobs_.Find(it->first);
    if (!job || job->rec.state() != v1::PENDING || !VictimsLeaving(it->first)) {
      if (JobEntry* j = jobs_.Find(it->first)) j->preempting = false;
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  // A preemptor whose victims are leaving goes first in the next passes (until the pass after
  // they left), so that what they free is its own and not taken by another job (which could
  // otherwise borrow it again, and be reclaimed again, in a loop).
  auto first_in_line = [&] {
    for (const auto& [id, victims] : waiting_) {
      if (JobEntry* job = jobs_.Find(id)) job->preempting = true;
    }
  };
  const bool quotas = quotas_.any();
  if (!qos_.AnyPreemption() && !quotas) return first_in_line();
  const SchedulingConfig& sc = ctx_.scheduling();
  auto usage = quotas ? quotas_.Usage() : decltype(quotas_.Usage()){};
  // Whether a job may take back lent GPUs of some type it runs on.
  auto may_reclaim = [&](const JobEntry& job, const std::string& type) {
    const uint64_t gpus = uint64_t{job.request.nodes} * job.request.gpus_per_node;
    return quotas && gpus > 0 && !type.empty() &&
           quotas_.MayReclaim(job.rec.spec().account(), type, gpus, usage);
  };
  // Preemptors in the pass's order (its pending list is in priority order): jobs that could
  // preempt someone, so that jobs that cannot do not use up the pass's preemptors.
  std::vector<JobEntry*> preemptors;
  for (const core::PendingReason& p : pass.pending) {
    if (preemptors.size() >= sc.max_preemptors_per_pass) break;
    if (!WaitsForResources(p.reason) || waiting_.count(p.job)) continue;
    JobEntry* job = jobs_.Find(p.job);
    if (!job || job->rec.state() != v1::PENDING) continue;
    bool reclaims = false;
    if (quotas && !MayPreempt(*job)) {
      for (const std::string& t : quotas_.ChoiceTypes(*job))
        reclaims = reclaims || may_reclaim(*job, t);
    }
    if (!MayPreempt(*job) && !reclaims) continue;
    preemptors.push_back(job);
  }
  if (preemptors.empty()) return first_in_line();

  core::ClusterView view = scheduler_.LiveView(now);
  std::set<uint64_t> taken;  // victims chosen in this pass
  store::Mutation m;
  for (JobEntry* preemptor : preemptors) {
    const v1::JobSpec& spec = preemptor->rec.spec();
    const bool by_qos = MayPreempt(*preemptor);
    const uint64_t gpus = uint64_t{preemptor->request.nodes} * preemptor->request.gpus_per_node;
    const std::vector<std::string> types =
        quotas ? quotas_.ChoiceTypes(*preemptor)
               : std::vector<std::string>{preemptor->request.gpu_type};
    // Its ways to run in order: the first for which some victims let it start.
    std::optional<core::PreemptionPlan> plan;
    std::string type;
    std::set<uint64_t> reclaimed;  // victims taken as borrowed quota (the rest by QoS)
    for (const std::string& t : types) {
      const bool reclaim = may_reclaim(*preemptor, t);
      if (!by_qos && !reclaim) continue;
      std::vector<core::PreemptCandidate> candidates;
      std::set<uint64_t> borrowed;
      for (const auto& [id, job] : jobs_.jobs()) {
        const v1::JobRecord& r = job.rec;
        if (r.state() != v1::RUNNING || r.cancel_requested() || r.preempt_time_ms() > 0 ||
            taken.count(id)) {
          continue;
        }
        if (now - r.start_time_ms() < static_cast<TimeMs>(sc.preempt_min_runtime_ms)) continue;
        const bool qos_victim = by_qos && qos_.Preempts(spec.qos(), r.spec().qos());
        const bool quota_victim = reclaim && r.borrowed() && quotas_.RunningType(r) == t &&
                                  quotas_.Reclaimable(r, t, usage);
        if (!qos_victim && !quota_victim) continue;
        if (auto c = Candidate(job)) {
          candidates.push_back(std::move(*c));
          if (!qos_victim) borrowed.insert(id);
        }
      }
      if (candidates.empty()) continue;
      core::JobRequest request = preemptor->request;
      if (!t.empty()) request.gpu_type = t;
      Result<core::PreemptionPlan> p = core::PlanPreemption(request, view, candidates);
      if (!p.ok()) {
        spdlog::debug("job={} cannot preempt for {} GPUs: {}", preemptor->id(),
                      t.empty() ? "any" : t, p.status().message());
        continue;
      }
      plan = std::move(*p);
      type = t;
      reclaimed = std::move(borrowed);
      break;
    }
    if (!plan) continue;
    std::vector<uint64_t>& victims = waiting_[preemptor->id()];
    for (uint64_t v : plan->victims) {
      JobEntry* victim = jobs_.Find(v);
      if (!victim) continue;
      if (quotas) {
        // What the victims give back and the preemptor takes is spoken for in this pass.
        const JobUse use = {0, TotalsOf(victim->rec).gpus, quotas_.RunningType(victim->rec)};
        auto it =
            usage.find({quotas_.Holder(victim->rec.spec().account(), use.gpu_type), use.gpu_type});
        if (it != usage.end()) it->second -= std::min<uint64_t>(it->second, use.gpus);
      }
      const std::string why = reclaimed.count(v)
                                  ? "reclaimed by job " + std::to_string(preemptor->id()) +
                                        " (account " + quotas_.Holder(spec.account(), type) +
                                        "'s guaranteed " + type + " GPUs)"
                                  : "preempted by job " + std::to_string(preemptor->id()) +
                                        " (qos " + qos_.Find(spec.qos())->name() + ")";
      Preempt(*victim, *preemptor, why, now, m);
      victims.push_back(v);
      taken.insert(v);
    }
    if (quotas && !type.empty()) {
      const std::string holder = quotas_.Holder(spec.account(), type);
      if (!holder.empty()) usage[{holder, type}] += gpus;
    }
    // The nodes are spoken for: a later preemptor of this pass must not count their free part
    // (or what these victims free) as its own.
    for (core::NodeIndex n : plan->nodes) {
      view.nodes[n].schedulable = false;
      view.nodes[n].unavailable = "being freed for job " + std::to_string(preemptor->id());
    }
    jobs_.SetWaitReason(*preemptor, core::JobReason::kResources,
                        "preempting " + std::to_string(victims.size()) + " job(s) to start on " +
                            std::to_string(plan->nodes.size()) + " node(s) of partition " +
                            plan->partition);
  }
  ctx_.CommitOrDie(m);
  first_in_line();
}

}  // namespace muster::controller
