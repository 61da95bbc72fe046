#include "preemption.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "muster/core/preemption.h"

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

void Preemptor::Preempt(JobEntry& victim, const JobEntry& preemptor, TimeMs now,
                        store::Mutation& m) {
  const v1::QosRecord* vq = qos_.Find(victim.rec.spec().qos());
  const uint64_t grace =
      vq && vq->grace_time_ms() > 0 ? vq->grace_time_ms() : ctx_.scheduling().kill_grace_ms;
  const bool requeue = !vq || vq->preempt_mode() != v1::PREEMPT_CANCEL;
  const std::string why = "preempted by job " + std::to_string(preemptor.id()) + " (qos " +
                          qos_.Find(preemptor.rec.spec().qos())->name() + ")";
  jobs_.Preempt(victim, preemptor.id(), why, requeue,
                static_cast<uint32_t>(std::min<uint64_t>(grace, UINT32_MAX)), now, m);
}

void Preemptor::AfterPass(const core::SchedulePass& pass, TimeMs now) {
  // Forget preemptors that started, ended or whose victims have all left.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const JobEntry* job = jobs_.Find(it->first);
    if (!job || job->rec.state() != v1::PENDING || !VictimsLeaving(it->first)) {
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  if (!qos_.AnyPreemption()) return;
  const SchedulingConfig& sc = ctx_.scheduling();
  // Preemptors in the pass's order (its pending list is in priority order).
  std::vector<JobEntry*> preemptors;
  for (const core::PendingReason& p : pass.pending) {
    if (preemptors.size() >= sc.max_preemptors_per_pass) break;
    if (!WaitsForResources(p.reason) || waiting_.count(p.job)) continue;
    JobEntry* job = jobs_.Find(p.job);
    if (!job || job->rec.state() != v1::PENDING || !MayPreempt(*job)) continue;
    preemptors.push_back(job);
  }
  if (preemptors.empty()) return;

  core::ClusterView view = scheduler_.LiveView(now);
  std::set<uint64_t> taken;  // victims chosen in this pass
  store::Mutation m;
  for (JobEntry* preemptor : preemptors) {
    const std::string& pq = preemptor->rec.spec().qos();
    std::vector<core::PreemptCandidate> candidates;
    for (const auto& [id, job] : jobs_.jobs()) {
      const v1::JobRecord& r = job.rec;
      if (r.state() != v1::RUNNING || r.cancel_requested() || r.preempt_time_ms() > 0 ||
          taken.count(id) || !qos_.Preempts(pq, r.spec().qos())) {
        continue;
      }
      if (now - r.start_time_ms() < static_cast<TimeMs>(sc.preempt_min_runtime_ms)) continue;
      core::PreemptCandidate c;
      c.job = id;
      c.priority = job.priority.priority;
      c.work_since_ms = r.start_time_ms();
      bool whole = true;
      for (const auto& na : r.allocation().nodes()) {
        std::optional<size_t> i = ctx_.NodeIndex(na.node());
        if (!i || !ledger_.Holds(*i, id)) {
          whole = false;
          break;
        }
        c.placement.nodes.push_back(ledger_.held(*i).at(id));
      }
      if (whole) candidates.push_back(std::move(c));
    }
    if (candidates.empty()) continue;
    Result<core::PreemptionPlan> plan = core::PlanPreemption(preemptor->request, view, candidates);
    if (!plan.ok()) {
      spdlog::debug("job={} cannot preempt: {}", preemptor->id(), plan.status().message());
      continue;
    }
    std::vector<uint64_t>& victims = waiting_[preemptor->id()];
    for (uint64_t v : plan->victims) {
      JobEntry* victim = jobs_.Find(v);
      if (!victim) continue;
      Preempt(*victim, *preemptor, now, m);
      victims.push_back(v);
      taken.insert(v);
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
}

}  // namespace muster::controller
