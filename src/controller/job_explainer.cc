#include "job_explainer.h"

#include <algorithm>
#include <map>
#include <set>

#include "array_tasks.h"
#include "job_views.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/core/explain.h"
#include "muster/core/reason.h"
#include "muster/core/scheduler.h"

namespace muster::controller {
namespace {

constexpr int kListed = 5;  // holding jobs and reservations shown by name; the rest are counted

bool SharesPartition(const v1::JobSpec& a, const std::set<std::string>& parts) {
  for (const auto& p : a.partitions()) {
    if (parts.count(p)) return true;
  }
  return false;
}

std::string When(TimeMs ms, TimeMs now) {
  if (ms <= now) return "now";
  return FormatTimestamp(ms) + " (in " + FormatDuration(ms - now) + ")";
}

// The running jobs whose end frees `over` of a limit they share with the job, ending first.
void Freeing(const JobManager& jobs, std::vector<std::pair<uint64_t, uint64_t>> holders,
             v1::LimitHeld* held) {
  std::vector<std::pair<TimeMs, std::pair<uint64_t, uint64_t>>> by_end;
  for (const auto& h : holders) {
    const JobEntry* j = jobs.Find(h.first);
    by_end.push_back({j ? LimitEnd(j->rec()) : core::kNever, h});
  }
  std::sort(by_end.begin(), by_end.end());
  uint64_t freed = 0;
  TimeMs last = 0;
  std::vector<std::string> words;
  for (const auto& [end, h] : by_end) {
    if (freed >= held->over()) break;
    freed += h.second;
    last = end;
    held->add_freeing_jobs(h.first);
    if (words.size() < static_cast<size_t>(kListed)) {
      words.push_back("job " + std::to_string(h.first) + " (" + std::to_string(h.second) +
                      (end == core::kNever ? ", no time limit)"
                                           : ", time limit reached " + FormatTimestamp(end) + ")"));
    }
  }
  if (freed < held->over()) {
    held->set_frees("it needs " + std::to_string(held->need()) + " where the limit is " +
                    std::to_string(held->max()) +
                    ": it can never start under it; ask for less or ask an administrator to "
                    "raise it");
    return;
  }
  if (last != core::kNever) held->set_free_at_ms(last);
  std::string f = "when " + std::to_string(held->over()) + " more are free: after ";
  for (size_t k = 0; k < words.size(); ++k) f += (k ? ", " : "") + words[k];
  if (static_cast<size_t>(held->freeing_jobs_size()) > words.size()) {
    f += " and " + std::to_string(held->freeing_jobs_size() - static_cast<int>(words.size())) +
         " more";
  }
  f += held->freeing_jobs_size() == 1 ? " ends" : " end";
  held->set_frees(f + ", or when an administrator raises the limit");
}

}  // namespace

void JobExplainer::ExplainLimits(const JobEntry& job, v1::JobExplanation* x) const {
  const v1::JobSpec& spec = job.rec().spec();
  const JobUse use{job.request.nodes, job.request.nodes * job.request.gpus_per_node,
                   views_.GpuTypeOf(job.request)};
  for (LimitTracker::Holding& h : limits_.HoldingLimits(spec, use)) {
    v1::LimitHeld* held = x->add_limits();
    held->set_reason(std::string(core::ReasonName(h.counter.reason)));
    held->set_what(h.counter.what);
    held->set_used(h.counter.used);
    held->set_max(h.counter.max);
    held->set_need(h.need);
    held->set_over(h.counter.used + h.need - h.counter.max);
    Freeing(jobs_, std::move(h.jobs), held);
  }
  const std::optional<core::JobReason> reason = core::ParseReason(job.rec().reason());
  const bool quota_reason =
      reason == core::JobReason::kQuotaMax || reason == core::JobReason::kQuotaBorrow;
  if (!quota_reason || use.gpus == 0) return;
  // Its quota types in order; the first it is over is the one the pass named.
  for (const std::string& type : quotas_.ChoiceTypes(job)) {
    const std::string holder = quotas_.Holder(spec.account(), type);
    const std::optional<core::QuotaView> q =
        holder.empty() ? std::nullopt : quotas_.ViewOf(holder, type);
    if (!q) continue;
    std::vector<std::pair<uint64_t, uint64_t>> jobs = quotas_.JobsOf(holder, type);
    uint64_t used = 0;
    for (const auto& [id, gpus] : jobs) used += gpus;
    // Beyond its max it waits for its own jobs; within it, for idle GPUs its cohort lends (or,
    // without borrowing, for its guarantee).
    const bool at_max = used + use.gpus > q->max;
    v1::LimitHeld* held = x->add_limits();
    held->set_reason(at_max ? "QuotaMax" : "QuotaBorrow");
    held->set_what(q->what + (at_max ? " (quota max)"
                                     : " (guaranteed " + std::to_string(q->guaranteed) +
                                           ", the rest borrowed)"));
    held->set_used(used);
    held->set_max(at_max ? q->max : q->guaranteed);
    held->set_need(use.gpus);
    held->set_over(used + use.gpus > held->max() ? used + use.gpus - held->max() : 0);
    Freeing(jobs_, std::move(jobs), held);
    if (!at_max) {
      held->set_frees(held->frees() +
                      "; or sooner, when the other accounts of its cohort leave "
                      "more of their guaranteed " +
                      type + " GPUs idle");
    }
    break;
  }
}

Result<v1::ExplainJobResponse> JobExplainer::Explain(const v1::ExplainJobRequest& req,
                                                     TimeMs now) const {
  // An array task waiting in its carrier's record waits as its carrier does.
  const JobEntry* found = jobs_.Covering(req.job_id());
  if (!found) {
    return NotFound("job " + std::to_string(req.job_id()) +
                    " does not exist (or finished longer ago than the retention time)");
  }
  const JobEntry& job = *found;
  const v1::JobRecord& r = job.rec();
  v1::ExplainJobResponse resp;
  v1::JobExplanation& x = *resp.mutable_explanation();
  x.set_job_id(req.job_id());  // a task waiting in its carrier is explained by it
  x.set_name(r.spec().name());
  x.set_user(r.spec().user());
  x.set_state(r.state());
  x.set_reason(r.reason());
  x.set_reason_detail(r.reason_detail());
  x.set_shape(core::DescribeShape(job.request));
  if (r.state() != v1::PENDING) {
    std::vector<std::string> nodes;
    for (const auto& na : r.allocation().nodes()) nodes.push_back(na.node());
    x.set_state(ShownState(r));
    if (r.state() == v1::RUNNING && r.suspend_time_ms() > 0) {
      x.set_summary("suspended since " + FormatTimestamp(r.suspend_time_ms()) + " on " +
                    CompressHostlist(nodes) + " (" + r.reason_detail() +
                    "); it continues when its CPUs are free again");
    } else if (r.state() == v1::RUNNING) {
      x.set_summary("running since " + FormatTimestamp(r.start_time_ms()) + " on " +
                    CompressHostlist(nodes) + " in partition " + r.allocation().partition());
    } else {
      x.set_summary("finished: " + v1::JobState_Name(r.state()) +
                    (r.reason_detail().empty() ? "" : " (" + r.reason_detail() + ")"));
    }
    return resp;
  }

  // Priority: its rank among the jobs that compete for the same partitions.
  const std::set<std::string> parts(r.spec().partitions().begin(), r.spec().partitions().end());
  const int64_t prio = JobViews::EffectivePriority(job);
  x.set_priority(prio);
  JobViews::FillPriorityFactors(job, x.mutable_priority_factors());
  const bool queued = SchedulerLoop::InPass(r);
  uint32_t ahead = 0, competing = 0;
  for (const auto& [id, entry] : jobs_.pending()) {
    const JobEntry& other = *entry;
    if (!SchedulerLoop::InPass(other.rec()) || !SharesPartition(other.rec().spec(), parts))
      continue;
    competing += static_cast<uint32_t>(TasksOf(other.rec()));
    if (id == r.id()) continue;
    const int64_t op = JobViews::EffectivePriority(other);
    if (op > prio || (op == prio && std::make_pair(other.rec().submit_time_ms(), id) <
                                        std::make_pair(r.submit_time_ms(), r.id()))) {
      ++ahead;
    }
  }
  if (queued) x.set_rank(ahead + 1);
  x.set_pending_total(competing);
  if (job.expected_start_ms != core::kNever && queued) {
    x.set_expected_start_ms(job.expected_start_ms);
    x.set_reserved(job.had_reservation);
  }

  // The nodes, partition by partition, judged on the live state.
  const core::ClusterView view = views_.LiveView(now);
  const auto explained = core::ExplainPlacement(job.request, view, now);
  std::set<core::NodeIndex> busy, candidates;
  std::map<std::string, core::NodeIndex> index_of;
  for (core::NodeIndex i = 0; i < view.nodes.size(); ++i) index_of[view.nodes[i].name] = i;
  bool fits_somewhere = false, never_everywhere = !explained.empty();
  for (const core::PartitionExplanation& e : explained) {
    v1::PartitionExplanation* p = x.add_partitions();
    p->set_name(e.partition);
    p->set_nodes(e.nodes);
    p->set_needed(e.needed);
    p->set_fit_now(e.fit_now);
    p->set_gang_now(e.gang_now);
    p->set_never(e.never);
    fits_somewhere |= e.gang_now.empty();
    never_everywhere &= !e.never.empty();
    for (const core::NodeGroup& g : e.groups) {
      v1::NodeGroup* pg = p->add_groups();
      pg->set_verdict(core::NodeVerdictName(g.verdict));
      pg->set_cause(g.cause);
      pg->set_count(static_cast<uint32_t>(g.nodes.size()));
      pg->set_nodes(CompressHostlist(g.nodes));
      for (const std::string& n : g.nodes) {
        candidates.insert(index_of[n]);
        if (g.verdict == core::NodeVerdict::kBusy) busy.insert(index_of[n]);
      }
    }
  }

  // Who holds the busy nodes, the ones ending first first.
  struct Holder {
    std::vector<std::string> nodes;
    TimeMs end = core::kNever;
  };
  std::map<uint64_t, Holder> holders;
  for (const core::RunningUse& u : view.running) {
    if (!busy.count(u.node)) continue;
    Holder& h = holders[u.job];
    h.nodes.push_back(view.nodes[u.node].name);
    h.end = std::min(h.end, u.end_ms);
  }
  std::vector<std::pair<uint64_t, Holder>> by_end(holders.begin(), holders.end());
  std::stable_sort(by_end.begin(), by_end.end(),
                   [](const auto& a, const auto& b) { return a.second.end < b.second.end; });
  x.set_holding_total(static_cast<uint32_t>(by_end.size()));
  for (size_t k = 0; k < by_end.size() && k < kListed; ++k) {
    v1::HoldingJob* h = x.add_holding();
    h->set_job_id(by_end[k].first);
    if (const JobEntry* o = jobs_.Find(by_end[k].first)) h->set_user(o->rec().spec().user());
    h->set_nodes(CompressHostlist(by_end[k].second.nodes));
    h->set_end_ms(by_end[k].second.end == core::kNever ? 0 : by_end[k].second.end);
  }

  // Reservations of other waiting jobs on the nodes it could use, starting before it would.
  std::vector<const core::Reservation*> ahead_res;
  for (const core::Reservation& res : scheduler_.reservations()) {
    if (res.job == r.id()) continue;
    const JobEntry* o = jobs_.Find(res.job);
    if (!o || !SchedulerLoop::InPass(o->rec())) continue;
    if (x.expected_start_ms() > 0 && res.start_ms > x.expected_start_ms()) continue;
    bool overlaps = false;
    for (core::NodeIndex n : res.nodes) overlaps |= candidates.count(n) > 0;
    if (overlaps) ahead_res.push_back(&res);
  }
  std::stable_sort(ahead_res.begin(), ahead_res.end(),
                   [](const auto* a, const auto* b) { return a->start_ms < b->start_ms; });
  x.set_reservations_ahead_total(static_cast<uint32_t>(ahead_res.size()));
  for (size_t k = 0; k < ahead_res.size() && k < kListed; ++k) {
    const core::Reservation& res = *ahead_res[k];
    v1::ReservationAhead* a = x.add_reservations_ahead();
    a->set_job_id(res.job);
    a->set_partition(res.partition);
    a->set_start_ms(res.start_ms);
    a->set_end_ms(res.end_ms == core::kNever ? 0 : res.end_ms);
    std::vector<std::string> names;
    for (core::NodeIndex n : res.nodes) names.push_back(view.nodes[n].name);
    a->set_nodes(CompressHostlist(names));
  }

  ExplainLimits(job, &x);

  // What would change it.
  const std::string id = std::to_string(r.id());
  if (r.spec().hold()) {
    x.add_changes(core::ParseReason(r.reason()) == core::JobReason::kJobHeldAdmin
                      ? "it is held by an administrator: an administrator must release it "
                        "(scontrol release " +
                            id + ")"
                      : "it is held: release it with `scontrol release " + id + "`");
  }
  if (r.completing_nodes_size() > 0) {
    x.add_changes("its previous run is still being cleaned up; it is considered again after");
  }
  for (const std::string& n : r.unconfirmed_nodes()) {
    x.add_changes("node " + n + " was lost while it ran the previous run and may still run it: " +
                  n + " must come back and end it, or an administrator confirm it is off " +
                  "(muster node confirm-down " + n + ")");
  }
  if (never_everywhere) {
    for (const auto& e : explained) x.add_changes("in partition " + e.partition + ": " + e.never);
  }
  // Partitions it did not ask for where it would start now (or could ever run).
  for (const core::PartitionView& pv : view.partitions) {
    if (parts.count(pv.name)) continue;
    core::JobRequest other = job.request;
    other.partitions = {pv.name};
    if (core::Place(other, view, core::PlaceMode::kNow, now).ok()) {
      x.add_changes("it would start now in partition " + pv.name + " (-p " + pv.name + ")");
    } else if (never_everywhere && core::Place(other, view, core::PlaceMode::kEver, now).ok()) {
      x.add_changes("it could run in partition " + pv.name + " (-p " + pv.name + ")");
    }
  }
  // It fits on the free nodes, so the jobs ahead of it hold it back: a time limit that ends
  // before the first of their reservations lets backfill start it now.
  if (fits_somewhere && queued && !ahead_res.empty()) {
    const TimeMs window = ahead_res.front()->start_ms - now;
    if (window >= 60'000 && (r.time_limit_ms() == 0 || r.time_limit_ms() > window)) {
      x.add_changes("a time limit of at most " + FormatDuration(window) +
                    " (--time) would let it start now, before job " +
                    std::to_string(ahead_res.front()->job) + "'s reservation at " +
                    FormatTimestamp(ahead_res.front()->start_ms));
    }
  }

  // The one line.
  std::string summary;
  if (r.spec().hold()) {
    summary = "held (" + r.reason() + ")";
  } else if (never_everywhere) {
    summary = "can never run as asked: " + explained.front().never;
  } else if (!queued) {
    summary = "waits for its previous run to be cleaned up";
  } else if (x.limits_size() > 0) {
    const v1::LimitHeld& l = x.limits(0);
    summary = "held back by " + l.reason() + ": " + l.what() + ": " + std::to_string(l.used()) +
              " of " + std::to_string(l.max()) + " in use, it needs " + std::to_string(l.need()) +
              "; it can start " + l.frees();
  } else {
    summary = r.reason();
    for (const auto& e : explained) {
      if (!e.never.empty()) continue;
      summary += "; " + std::to_string(e.fit_now) + " of " + std::to_string(e.nodes) +
                 " nodes in " + e.partition + " can take it now, it needs " +
                 std::to_string(e.needed);
      for (const core::NodeGroup& g : e.groups) {
        if (g.verdict != core::NodeVerdict::kReserved) continue;
        summary += "; " + CompressHostlist(g.nodes) + " " + g.cause;
      }
      break;
    }
    if (!by_end.empty() && by_end.front().second.end != core::kNever) {
      summary +=
          "; the first job holding the rest ends " + FormatTimestamp(by_end.front().second.end);
    }
    if (!ahead_res.empty()) {
      summary += "; " + std::to_string(ahead_res.size()) + " reservation" +
                 (ahead_res.size() == 1 ? "" : "s") + " ahead";
    }
    summary += "; rank " + std::to_string(x.rank()) + " of " + std::to_string(competing);
    if (x.expected_start_ms() > 0) {
      summary += (x.reserved() ? "; reserved start " : "; expected start ") +
                 When(x.expected_start_ms(), now);
    }
  }
  x.set_summary(summary);
  return resp;
}

}  // namespace muster::controller
