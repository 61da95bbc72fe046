// What a scheduling pass asks policy, in the order it asks. The pass (SchedulerLoop) is
// mechanism: it snapshots the queue and the nodes, lets the pure core place jobs, and commits
// the starts that still fit; every "who first", "may it", "what does it cost", "how long may it
// run" and "what happens to those left waiting" is answered here. DefaultPassPolicy is Muster's
// (fair share, QoS, account and QoS limits, GPU quotas, advance reservations, preemption), the
// one the engine runs; a test plugs in its own (pass_policy_test), as a simulator could run the
// published heuristics, as flux-sched's queue policies and Mesos's allocator are pluggable.
//
// Strand-confined: the pass calls it on the strand, never from the core's worker.
#pragma once

#include <string>

#include "job_entry.h"
#include "job_manager.h"
#include "limit_tracker.h"
#include "muster/common/clock.h"
#include "muster/core/types.h"

namespace muster::controller {

class PassPolicy {
 public:
  virtual ~PassPolicy() = default;

  // 1. Before the queue is read: what the policy derives from time (usage decay) and what it
  //    undoes (jobs it suspended that may run again, before any pending job takes their CPUs).
  virtual void BeforePass(TimeMs now) = 0;
  // 2. The pass's shared accounts: counters of the limits and the GPU quotas and cohorts, into
  //    the pass's view (a view without them: no limits, no quotas).
  virtual void BeginPass(core::ClusterView* view) = 0;
  // 3. Admission: why a pending job is not considered in this pass at all (kNone: it is), with
  //    a detail for its reason.
  virtual core::JobReason Admit(const JobEntry& job, const JobUse& use, std::string* detail) = 0;
  // 4. Ordering: the policy's share of a job's priority (fair share, QoS, each 0..1), or an
  //    order of its own (pj->priority.by_policy) from what the pending job says (its request,
  //    submission, the reservation it held) at `now`.
  virtual void Order(const JobEntry& job, TimeMs now, core::PendingJob* pj) const = 0;
  // 5. Costs: which GPU types the job may run on, each with the limit counters and quota it
  //    would charge (pj->choices), or its charges when it has no choice (pj->limits).
  virtual void Charge(const JobEntry& job, const JobUse& use, core::PendingJob* pj) = 0;
  // 6. A start: what policy adds to it (borrowed from its cohort; a time limit that ends with
  //    its reservation).
  virtual void Start(const core::JobStart& start, const v1::JobRecord& before, TimeMs now,
                     JobChange* change) const = 0;
  // 7. After the pass: what it does for those left waiting (preemption).
  virtual void AfterPass(const core::SchedulePass& pass, TimeMs now) = 0;
};

}  // namespace muster::controller
