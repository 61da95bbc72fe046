// One scheduling pass: multifactor priority order, then for each job either a start now (whole
// gang, topology-aware), or, for the first `backfill_depth` blocked jobs, a reservation at the
// earliest time the profile allows. A lower job starts now only where it touches no
// reservation during its whole time limit, so backfill never delays a reserved job.
#include "muster/core/scheduler.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "muster/common/duration.h"
#include "muster/core/priority.h"
#include "muster/core/quota.h"
#include "planner.h"

namespace muster::core {
namespace {

std::string When(TimeMs now, TimeMs t) {
  return t <= now ? std::string("now") : "in " + FormatDuration(t - now);
}

// The first limit the job's charges would pass, or null.
const LimitCharge* OverLimit(const std::vector<LimitCharge>& charges,
                             const std::vector<LimitCounter>& counters) {
  for (const LimitCharge& c : charges) {
    if (c.counter >= counters.size()) continue;
    const LimitCounter& lc = counters[c.counter];
    if (lc.used + c.amount > lc.max) return &c;
  }
  return nullptr;
}

std::string LimitDetail(const LimitCounter& c, uint64_t amount) {
  return c.what + ": " + std::to_string(c.used) + " of " + std::to_string(c.max) +
         " in use, this job needs " + std::to_string(amount) +
         (amount > c.max
              ? " (more than the limit: it can never start under it)"
              : "; it starts when " + std::to_string(c.used + amount - c.max) + " more are free");
}

struct Ordered {
  const PendingJob* job;
  bool preempting;
  bool had_reservation;
  uint32_t tier;
  bool within_guarantee;
  int64_t priority;
};

// Whether one of the job's ways to run fits within its quota's guarantee as the pass begins.
// Such jobs go before those that would borrow (as Kueue orders them): otherwise a borrower of
// higher priority takes what an owner's reclaim freed, and is reclaimed in turn.
bool WithinGuarantee(const PendingJob& j, const std::vector<QuotaView>& quotas) {
  const uint64_t gpus = uint64_t{j.request.nodes} * j.request.gpus_per_node;
  for (const PendingJob::Choice& c : j.choices) {
    if (c.quota < 0 || static_cast<size_t>(c.quota) >= quotas.size()) continue;
    const QuotaView& q = quotas[static_cast<size_t>(c.quota)];
    if (q.used + gpus <= q.guaranteed) return true;
  }
  return false;
}

}  // namespace

std::vector<size_t> PriorityOrder(const ClusterView& view, const std::vector<PendingJob>& queue,
                                  TimeMs now, const SchedulerConfig& config) {
  const PriorityScale scale = PriorityScale::Of(view);
  std::vector<Ordered> keys;
  keys.reserve(queue.size());
  for (const PendingJob& j : queue) {
    uint32_t tier = TierOf(j.request, view);
    keys.push_back({&j, j.preempting, j.had_reservation, tier, WithinGuarantee(j, view.quotas),
                    ComputePriority(j, tier, scale, now, config.weights).priority});
  }
  std::vector<size_t> order(queue.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Ordered& x = keys[a];
    const Ordered& y = keys[b];
    if (x.preempting != y.preempting) return x.preempting;
    if (x.had_reservation != y.had_reservation) return x.had_reservation;
    if (x.tier != y.tier) return x.tier > y.tier;
    if (x.within_guarantee != y.within_guarantee) return x.within_guarantee;
    if (x.priority != y.priority) return x.priority > y.priority;
    if (x.job->submit_time_ms != y.job->submit_time_ms)
      return x.job->submit_time_ms < y.job->submit_time_ms;
    return x.job->id < y.job->id;
  });
  return order;
}

SchedulePass Schedule(const ClusterView& view, const std::vector<PendingJob>& queue, TimeMs now,
                      const SchedulerConfig& config) {
  SchedulePass pass;
  if (queue.empty()) return pass;
  Planner planner(view, now, config);
  const bool backfill = config.backfill_depth > 0;
  std::set<std::string> blocked;  // without backfill: partitions a blocked job holds back
  uint32_t estimates = 0;
  std::map<uint32_t, TimeMs> last_estimate;          // per shape id: later jobs start no earlier
  std::vector<LimitCounter> counters = view.limits;  // with this pass's starts added
  std::vector<QuotaView> quotas = view.quotas;       // likewise

  std::vector<size_t> order = PriorityOrder(view, queue, now, config);
  bool reranked = !backfill || !config.backfill_by_rank;
  for (size_t at = 0; at < order.size(); ++at) {
    if (!reranked && pass.reservations.size() >= config.backfill_depth) {
      // The reservations are made: the jobs left go by their backfill rank, which only decides
      // who fills the gaps around them.
      // Jobs that preempted, or held a reservation, keep going first (their reasons hold here).
      std::stable_sort(order.begin() + static_cast<ptrdiff_t>(at), order.end(),
                       [&](size_t a, size_t b) {
                         const PendingJob& x = queue[a];
                         const PendingJob& y = queue[b];
                         if (x.preempting != y.preempting) return x.preempting;
                         if (x.had_reservation != y.had_reservation) return x.had_reservation;
                         // Those the policy lets reserve (protected) stay ahead of the others.
                         if (x.reserve != y.reserve) return x.reserve;
                         return x.backfill_rank > y.backfill_rank;
                       });
      reranked = true;
    }
    const PendingJob& job = queue[order[at]];
    // --switches=N@wait: past the wait, any number of leaves will do (as Slurm).
    JobRequest relaxed;
    const JobRequest* rp = &job.request;
    TimeMs relaxes_at = kNever;  // when a still-binding leaf limit will be dropped
    if (job.request.max_leaves && job.max_leaves_wait_ms >= 0) {
      relaxed = job.request;
      relaxed.max_leaves = 0;
      relaxes_at = job.submit_time_ms + job.max_leaves_wait_ms;
      if (now >= relaxes_at) {
        rp = &relaxed;
        relaxes_at = kNever;
      }
    }
    const JobRequest& r = *rp;
    ++pass.stats.considered;

    if (!backfill) {
      bool all_blocked = !r.partitions.empty() &&
                         std::all_of(r.partitions.begin(), r.partitions.end(),
                                     [&](const std::string& p) { return blocked.count(p) > 0; });
      if (all_blocked) {
        pass.pending.push_back(
            {job.id, JobReason::kPriority,
             "a higher-priority job is waiting for resources in partition " + r.partitions.front(),
             kNever});
        continue;
      }
    }

    // Its ways to run, in order: the first with room under its limits and quota that fits now
    // starts. A job over a limit or quota waits without a reservation (as Slurm's): what it would
    // hold is not the cluster's to give. Otherwise the first with room plans its start.
    const size_t n_choices = job.choices.empty() ? 1 : job.choices.size();
    const uint64_t gpus = uint64_t{job.request.nodes} * job.request.gpus_per_node;
    PendingReason blocked_by{job.id, JobReason::kNone, "", kNever};
    std::optional<Planner::Attempt> waiting;
    JobRequest chosen;  // the choice that waits, when it is not the request itself
    const JobRequest* cp = &r;
    bool started = false;
    for (size_t k = 0; k < n_choices; ++k) {
      const PendingJob::Choice* choice = job.choices.empty() ? nullptr : &job.choices[k];
      JobRequest alt;
      const JobRequest* rk = &r;
      if (choice && choice->gpu_type != r.gpu_type) {
        alt = r;
        alt.gpu_type = choice->gpu_type;
        rk = &alt;
      }
      const std::vector<LimitCharge>& limits = choice ? choice->limits : job.limits;
      if (const LimitCharge* over = OverLimit(limits, counters)) {
        if (blocked_by.reason == JobReason::kNone) {
          blocked_by.reason = counters[over->counter].reason;
          blocked_by.detail = LimitDetail(counters[over->counter], over->amount);
        }
        continue;
      }
      if (choice && choice->quota >= 0) {
        std::string detail;
        const JobReason q =
            QuotaBlock(quotas, view.cohorts, static_cast<uint32_t>(choice->quota), gpus, &detail);
        if (q != JobReason::kNone) {
          if (blocked_by.reason == JobReason::kNone) {
            blocked_by.reason = q;
            blocked_by.detail = std::move(detail);
          }
          continue;
        }
      }
      Planner::Attempt a = planner.TryStart(job.id, *rk);
      if (a.kind == Planner::Kind::kStarted) {
        for (const LimitCharge& c : limits) {
          if (c.counter < counters.size()) counters[c.counter].used += c.amount;
        }
        bool borrowed = false;
        if (choice && choice->quota >= 0) {
          QuotaView& q = quotas[static_cast<size_t>(choice->quota)];
          borrowed = WouldBorrow(q, gpus);
          q.used += gpus;
        }
        if (!pass.reservations.empty()) ++pass.stats.backfilled;
        pass.starts.push_back({job.id, std::move(a.placement), borrowed});
        started = true;
        break;
      }
      if (a.kind == Planner::Kind::kNotRunnable || waiting) {
        if (blocked_by.reason == JobReason::kNone && a.kind == Planner::Kind::kNotRunnable) {
          blocked_by.reason = a.reason;
          blocked_by.detail = a.detail;
          blocked_by.expected_start_ms = a.expected;
        }
        continue;
      }
      waiting = std::move(a);
      if (rk == &alt) {
        chosen = std::move(alt);
        cp = &chosen;
      }
    }
    if (started) continue;
    if (!waiting) {
      pass.pending.push_back(std::move(blocked_by));
      continue;
    }
    Planner::Attempt& a = *waiting;
    if (cp != &r && relaxes_at != kNever) relaxed.gpu_type = cp->gpu_type;
    const JobRequest& rc = *cp;
    if (!backfill) {
      for (const auto& p : r.partitions) blocked.insert(p);
      pass.pending.push_back({job.id, a.reason, a.detail, kNever});
      continue;
    }

    const std::string& shape = *a.shape_text;
    if (pass.reservations.size() < config.backfill_depth && job.reserve) {
      const bool others_first = planner.HasReservationIn(rc);
      Planner::Forecast f = planner.EarliestStart(rc);
      const JobRequest* reserved = &rc;
      if (f.start == kNever && relaxes_at != kNever) {
        // No start within the leaf limit: plan for when the limit is dropped.
        f = planner.EarliestStart(relaxed, relaxes_at);
        reserved = &relaxed;
      }
      if (f.start == kNever) {
        pass.pending.push_back(
            {job.id, a.reason,
             "needs " + shape +
                 "; no start time can be forecast: the jobs holding such nodes have no time "
                 "limit, or too few such nodes are up",
             kNever});
        continue;
      }
      planner.Reserve(job.id, *reserved, f);
      pass.reservations.push_back(
          {job.id, f.partition, f.start, Profile::EndOf(f.start, rc.time_limit_ms), f.nodes});
      std::string where =
          std::to_string(f.nodes.size()) + (f.nodes.size() == 1 ? " node" : " nodes");
      uint32_t leaves = planner.index().LeavesSpanned(f.nodes);
      if (leaves == 1 && !planner.index().LeafName(f.nodes.front()).empty()) {
        where += " under " + planner.index().LeafName(f.nodes.front());
      } else if (leaves > 1) {
        where += " across " + std::to_string(leaves) + " leaf switches";
      }
      std::string detail = "needs " + shape + "; " + where + " reserved for this job, starting " +
                           When(now, f.start);
      if (f.waits_for) detail += ", when job " + std::to_string(f.waits_for) + " ends";
      if (a.kind == Planner::Kind::kHeldForOthers) {
        detail += "; what is free now is reserved for " + planner.HolderText(a.blocker);
      }
      // "Resources" for a job first in line for its resources, as Slurm's top job; "Priority"
      // when it waits behind another job's reservation; "ReqNodeNotAvail" when an advance
      // reservation (maintenance, say) keeps what it would use.
      const JobReason reason =
          a.kind == Planner::Kind::kHeldForOthers && planner.WindowOfHold(a.blocker)
              ? JobReason::kReqNodeNotAvail
          : a.kind == Planner::Kind::kHeldForOthers || others_first ? JobReason::kPriority
                                                                    : JobReason::kResources;
      pass.pending.push_back({job.id, reason, detail, f.start});
      continue;
    }

    // Beyond the backfill depth: no reservation, an estimate of when.
    TimeMs expected = kNever;
    {
      // Forecasts are the expensive part of a pass: at most `backfill_depth` of them for
      // estimates, one per request shape.
      uint32_t before = planner.forecasts();
      expected = planner.EstimateStart(rc, estimates < config.backfill_depth);
      if (planner.forecasts() != before) ++estimates;
      auto [it, inserted] = last_estimate.try_emplace(a.shape_id, expected);
      if (!inserted) {
        expected = std::max(expected, it->second);
        it->second = expected;
      }
    }
    std::string detail = a.kind == Planner::Kind::kHeldForOthers ? a.detail
                         : !job.reserve
                             ? "needs " + shape +
                                   "; not enough of that is free now, and the policy reserves " +
                                   "nothing for it yet (it starts where it fits)"
                             : "needs " + shape + "; " + std::to_string(pass.reservations.size()) +
                                   " higher-priority jobs hold reservations (backfill depth " +
                                   std::to_string(config.backfill_depth) + ")";
    if (expected != kNever) detail += "; estimated start " + When(now, expected);
    const JobReason reason =
        !job.reserve && a.kind == Planner::Kind::kNoFreeResources && !planner.HasReservationIn(rc)
            ? JobReason::kResources
            : JobReason::kPriority;
    pass.pending.push_back({job.id, reason, detail, expected});
  }
  pass.stats.classes = planner.shapes();
  pass.stats.forecasts = planner.forecasts();
  pass.stats.skipped_by_class = planner.answered_from_shape();
  return pass;
}

}  // namespace muster::core
