// --dependency: which jobs a pending job waits for, resolved against the jobs the controller
// knows. Terms are dropped from the job's record as they are satisfied (as Slurm does), so a
// resolution outlives the job it was about; a job whose terms can never be satisfied waits with
// DependencyNeverSatisfied until it is cancelled. A job with terms left stays out of the pass.
//
// Strand-confined.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine_context.h"
#include "job_manager.h"
#include "muster/common/dependency.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

class DependencyTracker {
 public:
  DependencyTracker(EngineContext& ctx, JobManager& jobs) : ctx_(ctx), jobs_(jobs) {}

  // The terms of `spec.dependency()` for a new job: a job array's id stands for all its tasks;
  // every job named must be known. INVALID_ARGUMENT ("Job dependency problem: ...") otherwise.
  // Normalises spec->dependency. With only_uid (jobs are private and the caller sees only its
  // own), another user's job is not known either: the same answer as for no job at all, so
  // that a dependency cannot tell whether a job exists.
  Status TermsFor(v1::JobSpec* spec, v1::JobRecord* rec,
                  std::optional<uint32_t> only_uid = std::nullopt) const;

  // A job with terms to resolve (at submission and recovery): Resolve looks at these only.
  void Track(uint64_t id) { waiting_.insert(id); }
  // Before each pass: resolves what it can and writes what changed.
  void Resolve(TimeMs now);

  // What is left, as scontrol shows it: "afterok:12(unfulfilled)"; "" when nothing is.
  static std::string Describe(const v1::JobRecord& r);

 private:
  enum class Outcome { kSatisfied, kWaiting, kNever };
  Outcome Evaluate(const v1::JobRecord& waiter, const v1::DependencyRecord& term, TimeMs now) const;

  EngineContext& ctx_;
  JobManager& jobs_;
  std::set<uint64_t> waiting_;  // pending jobs that had terms left when last seen
  uint64_t resume_after_ = 0;   // where the last pass stopped looking
  // Per pass, built when a singleton term is first met: (uid, name) -> its earliest unfinished
  // job.
  mutable std::optional<std::map<std::pair<uint32_t, std::string>, uint64_t>> singletons_;
};

}  // namespace muster::controller
