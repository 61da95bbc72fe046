#include "dependency_tracker.h"

#include <spdlog/spdlog.h>

#include "muster/core/reason.h"

namespace muster::controller {
namespace {

// What one job may wait for: its record carries every term until it resolves.
constexpr size_t kMaxTermsPerJob = 1000;

bool Ended(v1::JobState s) {
  return s != v1::PENDING && s != v1::RUNNING && s != v1::JOB_STATE_UNSPECIFIED;
}

bool EndedOk(const v1::JobRecord& r) {
  return r.state() == v1::COMPLETED && r.exit_code() == 0 && r.exit_signal() == 0;
}

Dependency ToDependency(const v1::JobRecord& r) {
  Dependency d;
  d.any = r.dependency_any();
  for (const v1::DependencyRecord& t : r.dependency_terms()) {
    d.terms.push_back({static_cast<DependencyTerm::Kind>(t.kind()), t.job_id(), t.delay_ms()});
  }
  return d;
}

}  // namespace

Status DependencyTracker::TermsFor(v1::JobSpec* spec, v1::JobRecord* rec,
                                   std::optional<uint32_t> only_uid) const {
  MUSTER_ASSIGN_OR_RETURN(Dependency d, ParseDependency(spec->dependency()));
  auto known = [&](const JobEntry* e) -> const JobEntry* {
    return e && (!only_uid || e->rec().spec().uid() == *only_uid) ? e : nullptr;
  };
  Dependency expanded;
  expanded.any = d.any;
  for (const DependencyTerm& t : d.terms) {
    if (t.kind == DependencyTerm::Kind::kSingleton) {
      expanded.terms.push_back(t);
      continue;
    }
    const JobEntry* job = known(jobs_.Find(t.job_id));
    std::vector<uint64_t> ids;
    if (t.kind == DependencyTerm::Kind::kAfterCorr) {
      // The array itself: each waiting task looks up its own counterpart when it is evaluated.
      if (!job || !job->rec().has_array() || job->rec().array().array_job_id() != t.job_id) {
        return InvalidArgument("Job dependency problem: aftercorr:" + std::to_string(t.job_id) +
                               " names no job array (use the array's job id)");
      }
      ids.push_back(t.job_id);
    } else if (job && !(job->rec().has_array() && job->rec().array().array_job_id() == t.job_id)) {
      ids.push_back(t.job_id);
    } else if (const JobEntry* carrier = known(jobs_.Covering(t.job_id));
               !job && carrier && carrier->rec().array().array_job_id() != t.job_id) {
      ids.push_back(t.job_id);  // one task still waiting in its array's carrier
    } else {
      // A job array's id: all of its tasks (consecutive ids from the array's own), those still
      // waiting in their carrier's record too.
      for (uint64_t id = t.job_id; ids.size() <= kMaxTermsPerJob; ++id) {
        const JobEntry* task = known(jobs_.Covering(id));
        if (!task || !task->rec().has_array() || task->rec().array().array_job_id() != t.job_id)
          break;
        ids.push_back(id);
      }
    }
    if (ids.empty()) {
      return InvalidArgument("Job dependency problem: job " + std::to_string(t.job_id) +
                             " is not known (finished too long ago, or never submitted)");
    }
    for (uint64_t id : ids) expanded.terms.push_back({t.kind, id, t.delay_ms});
    if (expanded.terms.size() > kMaxTermsPerJob) {
      return InvalidArgument("Job dependency problem: more than " +
                             std::to_string(kMaxTermsPerJob) +
                             " jobs named (a job array's id counts each of its tasks)");
    }
  }
  spec->set_dependency(FormatDependency(d));
  rec->set_dependency_any(expanded.any);
  rec->clear_dependency_terms();
  for (const DependencyTerm& t : expanded.terms) {
    v1::DependencyRecord* r = rec->add_dependency_terms();
    r->set_kind(static_cast<v1::DependencyRecord::Kind>(t.kind));
    r->set_job_id(t.job_id);
    r->set_delay_ms(t.delay_ms);
  }
  return Status::Ok();
}

DependencyTracker::Outcome DependencyTracker::Evaluate(const v1::JobRecord& waiter,
                                                       const v1::DependencyRecord& term,
                                                       TimeMs now) const {
  if (term.kind() == v1::DependencyRecord::SINGLETON) {
    // No earlier job of the same user and name still waits or runs (ids only grow, so once
    // true it stays true). The earliest such job per user and name, built once per pass.
    if (!singletons_) {
      singletons_.emplace();
      for (const auto& [id, job] : jobs_.jobs()) {
        if (Ended(job.rec().state())) continue;
        singletons_->emplace(std::make_pair(job.rec().spec().uid(), job.rec().spec().name()), id);
      }
    }
    auto first = singletons_->find({waiter.spec().uid(), waiter.spec().name()});
    return first == singletons_->end() || first->second >= waiter.id() ? Outcome::kSatisfied
                                                                       : Outcome::kWaiting;
  }
  uint64_t dep_id = term.job_id();
  if (term.kind() == v1::DependencyRecord::AFTERCORR) {
    // The task of that array with the waiter's own task id; without one, nothing to wait for.
    if (!waiter.has_array()) return Outcome::kNever;
    std::optional<uint64_t> found;
    for (uint64_t id = term.job_id(); id < term.job_id() + ctx_.scheduling().max_array_size; ++id) {
      const JobEntry* task = jobs_.Covering(id);
      if (!task || !task->rec().has_array() || task->rec().array().array_job_id() != term.job_id())
        break;
      const uint64_t pos = id - term.job_id();
      const uint32_t task_id =
          task->id() == id || !task->array_tasks || pos >= task->array_tasks->size()
              ? task->rec().array().task_id()
              : (*task->array_tasks)[pos];
      if (task_id == waiter.array().task_id()) {
        found = id;
        break;
      }
    }
    if (!found) return Outcome::kSatisfied;
    dep_id = *found;
  }
  const JobEntry* dep = jobs_.Covering(dep_id);  // a task waiting in its carrier is as it is
  if (!dep) {
    // Archived before it was resolved (the controller was away that long): its result is gone.
    return term.kind() == v1::DependencyRecord::AFTEROK ||
                   term.kind() == v1::DependencyRecord::AFTERCORR ||
                   term.kind() == v1::DependencyRecord::AFTERNOTOK
               ? Outcome::kNever
               : Outcome::kSatisfied;
  }
  const v1::JobRecord& r = dep->rec();
  const bool ended = Ended(r.state());
  switch (term.kind()) {
    case v1::DependencyRecord::AFTER:
      if (ended) return Outcome::kSatisfied;
      return r.state() == v1::RUNNING && now >= r.start_time_ms() + term.delay_ms()
                 ? Outcome::kSatisfied
                 : Outcome::kWaiting;
    case v1::DependencyRecord::AFTERANY:
      return ended ? Outcome::kSatisfied : Outcome::kWaiting;
    case v1::DependencyRecord::AFTEROK:
    case v1::DependencyRecord::AFTERCORR:
      if (!ended) return Outcome::kWaiting;
      return EndedOk(r) ? Outcome::kSatisfied : Outcome::kNever;
    case v1::DependencyRecord::AFTERNOTOK:
      if (!ended) return Outcome::kWaiting;
      return EndedOk(r) ? Outcome::kNever : Outcome::kSatisfied;
    default:
      return Outcome::kNever;
  }
}

void DependencyTracker::Resolve(TimeMs now) {
  // A user may queue many jobs with many terms: one pass looks at a bounded number of terms and
  // the next goes on where it stopped, so no submission can hold the strand (a term resolves
  // within a few passes).
  constexpr size_t kTermsPerPass = 20'000;
  size_t budget = kTermsPerPass;
  singletons_.reset();
  for (uint64_t id : jobs_.TakeSplitWithDependencies()) waiting_.insert(id);
  store::Mutation m;
  std::vector<std::pair<uint64_t, v1::JobRecord>> changed;
  auto w = waiting_.upper_bound(resume_after_);
  for (size_t seen = 0, total = waiting_.size(); seen < total && budget > 0; ++seen) {
    if (w == waiting_.end()) w = waiting_.begin();
    const uint64_t id = *w;
    resume_after_ = id;
    const JobEntry* job = jobs_.Find(id);
    if (!job || job->rec().state() != v1::PENDING || job->rec().dependency_terms_size() == 0) {
      w = waiting_.erase(w);
      continue;
    }
    ++w;
    const v1::JobRecord& r = job->rec();
    if (core::ParseReason(r.reason()) == core::JobReason::kDependencyNeverSatisfied) continue;
    // All of them (','): satisfied terms are dropped up to the first that still waits; any one
    // ('?'): the first satisfied one settles it.
    std::vector<const v1::DependencyRecord*> left;
    bool any_satisfied = false, never = false, all_never = true, stopped = false;
    for (const v1::DependencyRecord& t : r.dependency_terms()) {
      if (stopped) {
        left.push_back(&t);
        continue;
      }
      --budget;
      const Outcome o = Evaluate(r, t, now);
      if (o == Outcome::kSatisfied) {
        any_satisfied = true;
        if (r.dependency_any()) break;
        continue;
      }
      left.push_back(&t);
      all_never = all_never && o == Outcome::kNever;
      if (o == Outcome::kNever && !r.dependency_any()) never = true;
      if (o == Outcome::kWaiting && !r.dependency_any()) stopped = true;
      if (budget == 0) stopped = true;
    }
    if (r.dependency_any()) {
      if (any_satisfied) left.clear();
      never = !any_satisfied && !stopped && all_never;
    }
    const bool fewer = static_cast<int>(left.size()) < r.dependency_terms_size();
    const bool cleared =
        left.empty() && core::ParseReason(r.reason()) == core::JobReason::kDependency;
    if (!fewer && !never && !cleared) continue;
    v1::JobRecord next = r;
    next.clear_dependency_terms();
    for (const v1::DependencyRecord* t : left) *next.add_dependency_terms() = *t;
    if (never) {
      next.set_reason(core::ReasonName(core::JobReason::kDependencyNeverSatisfied));
      next.set_reason_detail("a job it depends on ended so that --dependency=" +
                             r.spec().dependency() + " can never be satisfied; cancel it");
    } else if (cleared) {
      next.set_reason(core::ReasonName(core::JobReason::kNone));
      next.clear_reason_detail();
    }
    jobs_.StageChange(*job, next, m);
    changed.emplace_back(id, std::move(next));
  }
  if (changed.empty()) return;
  // Not applied when it cannot be written: the next pass tries again (nothing was promised).
  if (Status st = ctx_.Commit(m); !st.ok()) {
    spdlog::error("dependencies: cannot record resolved terms ({}); trying again next pass",
                  st.ToString());
    return;
  }
  std::vector<uint64_t> to_cancel;
  for (auto& [id, rec] : changed) {
    JobEntry* job = jobs_.Find(id);
    if (!job) continue;
    jobs_.ApplyChange(*job, std::move(rec));
    const uint32_t kill = job->rec().spec().kill_on_invalid_dep();
    if (core::ParseReason(job->rec().reason()) == core::JobReason::kDependencyNeverSatisfied &&
        (kill == 1 || (kill == 0 && ctx_.scheduling().kill_invalid_depend))) {
      to_cancel.push_back(id);
    }
  }
  // kill_invalid_depend: such a job ends CANCELLED, and jobs waiting on it see that in turn.
  if (to_cancel.empty()) return;
  store::Mutation end;
  for (uint64_t id : to_cancel) {
    JobEntry* job = jobs_.Find(id);
    jobs_.Transition(*job,
                     {.to = v1::CANCELLED,
                      .reason = core::JobReason::kDependencyNeverSatisfied,
                      .detail = "cancelled: its --dependency=" + job->rec().spec().dependency() +
                                " can never be satisfied (kill_invalid_depend)"},
                     now, end);
    spdlog::info("job={} cancelled: dependency never satisfied", id);
  }
  ctx_.CommitOrDie(end);
}

std::string DependencyTracker::Describe(const v1::JobRecord& r) {
  if (r.dependency_terms_size() == 0) return "";
  const bool never = core::ParseReason(r.reason()) == core::JobReason::kDependencyNeverSatisfied;
  return FormatDependency(ToDependency(r)) + (never ? "(failed)" : "(unfulfilled)");
}

}  // namespace muster::controller
