// scontrol update JobId=...: a pending job's priority (admins), nice, time limit, partitions,
// QoS, account, dependency and begin time change, checked as a submission is (who may, what
// exists, what the account allows, whether it can ever run, and the submit-count and
// stored-bytes limits of an account or QoS it moves into), persisted, and the job is judged
// again at the next pass.
//
// Strand-confined.
#pragma once

#include "account_manager.h"
#include "cluster_views.h"
#include "dependency_tracker.h"
#include "engine_context.h"
#include "job_manager.h"
#include "limit_tracker.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/v1/controller.pb.h"
#include "qos_manager.h"

namespace muster::controller {

class JobModifier {
 public:
  JobModifier(EngineContext& ctx, JobManager& jobs, const AccountManager& accounts,
              const QosManager& qos, const LimitTracker& limits, DependencyTracker& dependencies,
              ClusterViews& views)
      : ctx_(ctx),
        jobs_(jobs),
        accounts_(accounts),
        qos_(qos),
        limits_(limits),
        dependencies_(dependencies),
        views_(views) {}

  // NOT_FOUND, PERMISSION_DENIED (not the caller's job; a priority, a negative nice or a longer
  // time limit from a user), FAILED_PRECONDITION (not pending), INVALID_ARGUMENT (a bad value,
  // an unknown QoS or dependency, a dependency circle, a request that could never run),
  // RESOURCE_EXHAUSTED (an account or QoS it would move into is at a submit-count or
  // stored-bytes limit), INTERNAL (the store failed): nothing changed then.
  Status Modify(const Caller& caller, uint64_t id, const v1::JobModification& mod);

  // scontrol top: job `id` goes ahead of the other pending jobs of its user with the same
  // single partition, account and QoS, by lowering its nice and raising theirs by as much in
  // all (the user's share of the queue stays the same). Admins, or users on their own jobs
  // under enable_user_top.
  Status Top(const Caller& caller, uint64_t id);

 private:
  // Whether following dependencies from `terms` reaches job `id` (a circle no job could leave).
  bool ReachesItself(uint64_t id, const v1::JobRecord& rec) const;

  EngineContext& ctx_;
  JobManager& jobs_;
  const AccountManager& accounts_;
  const QosManager& qos_;
  const LimitTracker& limits_;
  DependencyTracker& dependencies_;
  ClusterViews& views_;
};

}  // namespace muster::controller
