#include "preemptor.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "job_views.h"
#include "limit_tracker.h"
#include "muster/core/preemption.h"

namespace muster::controller {
namespace {

// Waiting for resources, not for a limit, a dependency or a hold: what preemption can cure.
bool WaitsForResources(core::JobReason r) {
  return r == core::JobReason::kResources || r == core::JobReason::kPriority;
}

bool HeldByItsQuota(core::JobReason r) {
  return r == core::JobReason::kQuotaBorrow || r == core::JobReason::kQuotaMax;
}

}  // namespace

Preemptor::Preemptor(EngineContext& ctx, JobManager& jobs, const QosManager& qos,
                     const ResourceLedger& ledger, const ClusterViews& views,
                     const QuotaBook& quotas)
    : ctx_(ctx), jobs_(jobs), qos_(qos), ledger_(ledger), views_(views), quotas_(quotas) {
  for (const PartitionConfig& pc : ctx.config().partitions) {
    PartitionPolicy& p = partitions_[pc.name];
    p.tier = pc.priority_tier;
    p.preemptable = pc.preempt_mode != "off";
    p.give_way.mode = pc.preempt_mode == "cancel"    ? v1::PREEMPT_CANCEL
                      : pc.preempt_mode == "suspend" ? v1::PREEMPT_SUSPEND
                                                     : v1::PREEMPT_REQUEUE;
    p.give_way.grace_ms = pc.grace_time_ms;
    if (p.preemptable) lowest_preemptable_tier_ = std::min(lowest_preemptable_tier_, p.tier);
  }
}

bool Preemptor::MayPreempt(const JobEntry& job) const {
  const v1::QosRecord* q = qos_.Find(job.rec().spec().qos());
  return q && q->preempt_size() > 0;
}

bool Preemptor::TierPreempts(const JobEntry& job) const {
  if (lowest_preemptable_tier_ == UINT32_MAX) return false;
  for (const std::string& p : job.request.partitions) {
    auto it = partitions_.find(p);
    if (it != partitions_.end() && it->second.tier > lowest_preemptable_tier_) return true;
  }
  return false;
}

bool Preemptor::VictimsLeaving(uint64_t preemptor) const {
  auto it = waiting_.find(preemptor);
  if (it == waiting_.end()) return false;
  for (uint64_t v : it->second) {
    const JobEntry* job = jobs_.Find(v);
    if (job && job->rec().completing_nodes_size() > 0) return true;
    // Not yet told (cannot happen), unless suspended: then its CPUs are free already.
    if (job && job->rec().state() == v1::RUNNING && job->rec().suspend_time_ms() == 0) return true;
  }
  return false;
}

Preemptor::GiveWay Preemptor::GiveWayOf(const v1::JobRecord& victim, Cause cause) const {
  GiveWay g;
  auto part = partitions_.find(victim.allocation().partition());
  if (cause == Cause::kTier && part != partitions_.end()) {
    g = part->second.give_way;
  } else if (const v1::QosRecord* q = qos_.Find(victim.spec().qos())) {
    g = {q->preempt_mode(), q->grace_time_ms()};
  }
  if (g.mode == v1::PREEMPT_MODE_UNSPECIFIED) g.mode = v1::PREEMPT_REQUEUE;
  if (g.grace_ms == 0) g.grace_ms = ctx_.scheduling().kill_grace_ms;
  return g;
}

void Preemptor::Preempt(JobEntry& victim, const JobEntry& preemptor, Cause cause,
                        const std::string& why, TimeMs now, store::Mutation& m) {
  ++preempted_;
  const GiveWay g = GiveWayOf(victim.rec(), cause);
  if (g.mode == v1::PREEMPT_SUSPEND) {
    jobs_.Suspend(victim, preemptor.id(), why, now, m);
    return;
  }
  jobs_.Preempt(victim, preemptor.id(), why, g.mode != v1::PREEMPT_CANCEL,
                static_cast<uint32_t>(std::min<uint64_t>(g.grace_ms, UINT32_MAX)), now, m);
}

std::optional<core::PreemptCandidate> Preemptor::Candidate(const JobEntry& job,
                                                           bool suspend) const {
  core::PreemptCandidate c;
  c.job = job.id();
  c.priority = job.priority.priority;
  c.work_since_ms = job.rec().start_time_ms();
  for (const auto& na : job.rec().allocation().nodes()) {
    std::optional<size_t> i = ctx_.NodeIndex(na.node());
    if (!i || !ledger_.Holds(*i, job.id())) return std::nullopt;
    core::NodePlacement np = ledger_.held(*i).at(job.id());
    if (suspend) {  // its GPUs, memory and GRES stay its own
      np.gpus.clear();
      np.mem_mb = 0;
      np.gres.clear();
    }
    c.placement.nodes.push_back(std::move(np));
  }
  return c;
}

bool Preemptor::EndsWithinGuarantee(const JobEntry& preemptor, const std::string& type,
                                    const core::PreemptionPlan& plan,
                                    const std::map<uint64_t, Cause>& causes,
                                    const QuotaUsage& usage) const {
  const uint64_t gpus = uint64_t{preemptor.request.nodes} * preemptor.request.gpus_per_node;
  if (gpus == 0) return true;
  // Victims by QoS or tier charge the preemptor's own quota (candidates are chosen so): what
  // they give back is its account's again. A preemptor that names no type runs on theirs.
  std::string on = type;
  uint64_t freed = 0;
  bool by_policy = false;
  for (uint64_t v : plan.victims) {
    auto c = causes.find(v);
    const JobEntry* victim = jobs_.Find(v);
    if (c == causes.end() || c->second == Cause::kQuota || !victim) continue;
    by_policy = true;
    freed += TotalsOf(victim->rec()).gpus;
    if (on.empty()) on = quotas_.RunningType(victim->rec());
  }
  if (!by_policy || on.empty() || !quotas_.TypeHasQuotas(on)) return true;
  QuotaUsage after = usage;
  const auto key = std::make_pair(quotas_.Holder(preemptor.rec().spec().account(), on), on);
  if (auto it = after.find(key); it != after.end()) it->second -= std::min(it->second, freed);
  return quotas_.MayReclaim(preemptor.rec().spec().account(), on, gpus, after);
}

void Preemptor::ContinueWaiting(const Preemptor& previous) {
  for (const auto& [id, victims] : previous.waiting_) {
    JobEntry* job = jobs_.Find(id);
    if (!job || job->rec().state() != v1::PENDING) continue;
    waiting_[id] = victims;
    job->preempting = true;
  }
}

void Preemptor::AfterPass(const core::SchedulePass& pass, TimeMs now) {
  // Forget preemptors that started, ended or whose victims have all left.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const JobEntry* job = jobs_.Find(it->first);
    if (!job || job->rec().state() != v1::PENDING || !VictimsLeaving(it->first)) {
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
  const bool tiers = lowest_preemptable_tier_ != UINT32_MAX;
  if (!qos_.AnyPreemption() && !quotas && !tiers) return first_in_line();
  const SchedulingConfig& sc = ctx_.scheduling();
  auto usage = quotas ? quotas_.Usage() : decltype(quotas_.Usage()){};
  // Whether a job may take back lent GPUs of some type it runs on.
  auto may_reclaim = [&](const JobEntry& job, const std::string& type) {
    const uint64_t gpus = uint64_t{job.request.nodes} * job.request.gpus_per_node;
    return quotas && gpus > 0 && !type.empty() &&
           quotas_.MayReclaim(job.rec().spec().account(), type, gpus, usage);
  };
  // Preemptors in the pass's order (its pending list is in priority order): jobs that could
  // preempt someone, so that jobs that cannot do not use up the pass's preemptors.
  // A job its own quota holds back (its account at its guarantee or max) may push aside its
  // own account's jobs by QoS or tier (as Kueue within a ClusterQueue): what they free is its
  // quota, so only the nodes they hold are its to take.
  std::vector<JobEntry*> preemptors;
  std::set<uint64_t> quota_held;
  for (const core::PendingReason& p : pass.pending) {
    if (preemptors.size() >= sc.max_preemptors_per_pass) break;
    const bool held = quotas && HeldByItsQuota(p.reason);
    if ((!WaitsForResources(p.reason) && !held) || waiting_.count(p.job)) continue;
    JobEntry* job = jobs_.Find(p.job);
    if (!job || job->rec().state() != v1::PENDING) continue;
    bool may = MayPreempt(*job) || TierPreempts(*job);
    if (held) {
      if (may) {
        preemptors.push_back(job);
        quota_held.insert(job->id());
      }
      continue;
    }
    if (quotas && !may) {
      for (const std::string& t : quotas_.ChoiceTypes(*job)) may = may || may_reclaim(*job, t);
    }
    if (may) preemptors.push_back(job);
  }
  if (preemptors.empty()) return first_in_line();

  // One way for a preemptor to run: a GPU type, the partitions to place it in and, when it
  // preempts by partition tier, that tier (0: not by tier).
  struct Way {
    std::string type;
    std::vector<std::string> partitions;
    uint32_t tier = 0;
  };
  core::ClusterView view = views_.LiveView(now);
  // Victims chosen in this pass, and the jobs it started: a job is never pushed off in the pass
  // that gave it its nodes (it would start only to be stopped; the preemptor tries next pass).
  std::set<uint64_t> taken;
  for (const core::JobStart& s : pass.starts) taken.insert(s.job);
  store::Mutation m;
  for (JobEntry* preemptor : preemptors) {
    const v1::JobSpec& spec = preemptor->rec().spec();
    const bool by_qos = MayPreempt(*preemptor);
    const bool by_tier = TierPreempts(*preemptor);
    const uint64_t gpus = uint64_t{preemptor->request.nodes} * preemptor->request.gpus_per_node;
    const std::vector<std::string> types =
        quotas ? quotas_.ChoiceTypes(*preemptor)
               : std::vector<std::string>{preemptor->request.gpu_type};
    std::vector<Way> ways;
    for (const std::string& t : types) {
      // By tier, each partition separately: what a victim may give up depends on where the
      // preemptor then runs.
      if (by_tier) {
        for (const std::string& p : preemptor->request.partitions) {
          auto it = partitions_.find(p);
          ways.push_back({t, {p}, it == partitions_.end() ? 0 : it->second.tier});
        }
      } else {
        ways.push_back({t, preemptor->request.partitions, 0});
      }
    }
    // Its ways to run in order: the first for which some victims let it start.
    std::optional<core::PreemptionPlan> plan;
    std::string type;
    std::map<uint64_t, Cause> causes;  // of the plan's victims
    for (const Way& way : ways) {
      const bool reclaim = may_reclaim(*preemptor, way.type);
      if (!by_qos && !reclaim && way.tier <= lowest_preemptable_tier_) continue;
      std::vector<core::PreemptCandidate> candidates;
      std::map<uint64_t, Cause> cause;
      for (const auto& [id, job] : jobs_.jobs()) {
        const v1::JobRecord& r = job.rec();
        if (r.state() != v1::RUNNING || r.cancel_requested() || r.preempt_time_ms() > 0 ||
            r.suspend_time_ms() > 0 || taken.count(id)) {
          continue;
        }
        if (now - r.start_time_ms() < static_cast<TimeMs>(sc.preempt_min_runtime_ms)) continue;
        std::optional<Cause> why;
        if (by_qos && qos_.Preempts(spec.qos(), r.spec().qos())) {
          why = Cause::kQos;
        } else if (way.tier > 0) {
          auto it = partitions_.find(r.allocation().partition());
          if (it != partitions_.end() && it->second.preemptable && it->second.tier < way.tier)
            why = Cause::kTier;
        }
        // On GPUs under quotas, capacity moves between accounts only by reclaim: QoS and tier
        // act among jobs charging the same quota (Kueue's default). Across quotas they would
        // take a guarantee from its owner, or let a borrower push aside another borrower only
        // to be reclaimed itself, and again, in a loop.
        if (why && quotas) {
          const std::string rtype = quotas_.RunningType(r);
          if (quotas_.Holder(r.spec().account(), rtype) != quotas_.Holder(spec.account(), rtype)) {
            why.reset();
          }
        }
        if (!why && reclaim && r.borrowed() && quotas_.RunningType(r) == way.type &&
            quotas_.Reclaimable(r, way.type, usage)) {
          why = Cause::kQuota;
        }
        if (!why) continue;
        if (auto c = Candidate(job, GiveWayOf(r, *why).mode == v1::PREEMPT_SUSPEND)) {
          candidates.push_back(std::move(*c));
          cause[id] = *why;
        }
      }
      if (candidates.empty()) continue;
      core::JobRequest request = preemptor->request;
      request.partitions = way.partitions;
      if (!way.type.empty()) request.gpu_type = way.type;
      if (quota_held.count(preemptor->id())) {
        std::set<core::NodeIndex> held_by_candidates;
        for (const core::PreemptCandidate& c : candidates) {
          for (const core::NodePlacement& np : c.placement.nodes)
            held_by_candidates.insert(np.node);
        }
        for (core::NodeIndex i = 0; i < view.nodes.size(); ++i) {
          if (!held_by_candidates.count(i)) request.excluded_nodes.push_back(view.nodes[i].name);
        }
      }
      Result<core::PreemptionPlan> p = core::PlanPreemption(request, view, candidates);
      if (!p.ok()) {
        spdlog::debug("job={} cannot preempt for {} GPUs: {}", preemptor->id(),
                      way.type.empty() ? "any" : way.type, p.status().message());
        continue;
      }
      if (quotas && !EndsWithinGuarantee(*preemptor, way.type, *p, cause, usage)) {
        spdlog::debug("job={} would preempt by QoS or tier to run on borrowed {} GPUs: not done",
                      preemptor->id(), way.type);
        continue;
      }
      plan = std::move(*p);
      type = way.type;
      causes = std::move(cause);
      break;
    }
    if (!plan) continue;
    std::vector<uint64_t>& victims = waiting_[preemptor->id()];
    for (uint64_t v : plan->victims) {
      JobEntry* victim = jobs_.Find(v);
      if (!victim) continue;
      if (quotas) {
        // What the victims give back and the preemptor takes is spoken for in this pass.
        const JobUse use = {0, TotalsOf(victim->rec()).gpus, quotas_.RunningType(victim->rec())};
        auto it = usage.find(
            {quotas_.Holder(victim->rec().spec().account(), use.gpu_type), use.gpu_type});
        if (it != usage.end()) it->second -= std::min<uint64_t>(it->second, use.gpus);
      }
      const Cause cause = causes[v];
      const std::string by = std::to_string(preemptor->id());
      std::string why;
      if (cause == Cause::kQuota) {
        why = "reclaimed by job " + by + " (account " + quotas_.Holder(spec.account(), type) +
              "'s guaranteed " + type + " GPUs)";
      } else if (cause == Cause::kTier) {
        why = "preempted by job " + by + " (partition " + plan->partition + ", priority tier " +
              std::to_string(partitions_.at(plan->partition).tier) + ")";
      } else {
        why = "preempted by job " + by + " (qos " + qos_.Find(spec.qos())->name() + ")";
      }
      Preempt(*victim, *preemptor, cause, why, now, m);
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

void Preemptor::ResumeSuspended(TimeMs now) {
  if (ledger_.parked_jobs().empty()) return;
  auto cpus_back = [&](const JobEntry& job) {
    for (const auto& na : job.rec().allocation().nodes()) {
      std::optional<size_t> i = ctx_.NodeIndex(na.node());
      if (i && !ledger_.CpusBack(job.id(), *i)) return false;
    }
    return true;
  };
  std::vector<JobEntry*> ready;
  for (const auto& [id, nodes] : ledger_.parked_jobs()) {
    JobEntry* job = jobs_.Find(id);
    // A cancelled one is only told to end (its agents continue it to hear its SIGTERM).
    // One an operator suspended waits for their resume.
    if (!job || job->rec().state() != v1::RUNNING || job->rec().suspend_time_ms() == 0 ||
        job->rec().cancel_requested() || job->rec().admin_suspended()) {
      continue;
    }
    // Its preemptor still waiting to start on the CPUs it lent: not yet.
    const JobEntry* by = jobs_.Find(job->rec().preempted_by());
    if (by && by->rec().state() == v1::PENDING && !by->rec().spec().hold()) {
      std::optional<core::JobReason> r = core::ParseReason(by->rec().reason());
      if (r && WaitsForResources(*r)) continue;
    }
    if (cpus_back(*job)) ready.push_back(job);
  }
  std::sort(ready.begin(), ready.end(), [](const JobEntry* a, const JobEntry* b) {
    if (a->rec().suspend_time_ms() != b->rec().suspend_time_ms())
      return a->rec().suspend_time_ms() < b->rec().suspend_time_ms();
    return a->id() < b->id();
  });
  store::Mutation m;
  for (JobEntry* job : ready) {
    // An earlier resume in this loop may have taken CPUs this one needs.
    if (cpus_back(*job)) jobs_.Resume(*job, now, m);
  }
  ctx_.CommitOrDie(m);
}

}  // namespace muster::controller
