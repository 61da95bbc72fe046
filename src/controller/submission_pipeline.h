// Submission (sbatch, srun/salloc allocations), as named stages a request passes in order, each
// of which may refuse it with the reason: what used to be one long function in the engine. The
// stages read the policies (accounts, QoS, reservations, limits, dependencies, the scheduler's
// "can it ever run") and JobManager takes the job at the end.
//
// Strand-confined.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/core/types.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {

class AccountManager;
class DependencyTracker;
class EngineContext;
class JobManager;
class LimitTracker;
class QosManager;
class ReservationManager;
class ClusterViews;
class SchedulerLoop;

class SubmissionPipeline {
 public:
  SubmissionPipeline(EngineContext& ctx, JobManager& jobs, const AccountManager& accounts,
                     const QosManager& qos, const ReservationManager& reservations,
                     const LimitTracker& limits, DependencyTracker& dependencies,
                     SchedulerLoop& scheduler, ClusterViews& views)
      : ctx_(ctx),
        jobs_(jobs),
        accounts_(accounts),
        qos_(qos),
        reservations_(reservations),
        limits_(limits),
        dependencies_(dependencies),
        scheduler_(scheduler),
        views_(views) {}

  // Errors: INVALID_ARGUMENT (malformed request), NOT_FOUND (unknown partition),
  // PERMISSION_DENIED, FAILED_PRECONDITION (can never run here, with what to change),
  // RESOURCE_EXHAUSTED (a limit, or the queue, is full), INTERNAL (the state store failed;
  // nothing was accepted).
  Result<v1::SubmitJobResponse> Submit(const Caller& caller, const v1::SubmitJobRequest& req,
                                       TimeMs now);

  // The stages' names, in order (for tests and docs).
  static std::vector<const char*> StageNames();

 private:
  // What the stages build up.
  struct Submission {
    const Caller& caller;
    TimeMs now = 0;
    v1::JobSpec spec;
    int64_t time_limit_ms = 0;
    v1::JobRecord rec;
    core::JobRequest request;
    std::vector<uint32_t> tasks;  // an array's task ids
    v1::ArrayTask array;
    bool one_record = false;          // the array waits as one record
    uint64_t count = 1;               // jobs it makes
    std::optional<int64_t> priority;  // sbatch --priority (administrators)
  };
  using Stage = Status (SubmissionPipeline::*)(Submission&);
  struct NamedStage {
    const char* name;
    Stage run;
  };
  static const std::vector<NamedStage>& Stages();

  // Who the job runs as (the transport's credentials; root may submit for others), and the
  // shape of what it runs: a batch script with #!, an absolute working directory.
  Status Identify(Submission& s);
  // Room in the controller's table, the spec normalised against its partitions, the caller
  // admitted there, a negative nice and a --priority for admins only.
  Status Admit(Submission& s);
  // Its account, QoS and reservation, and the wall limit they give a job without one.
  Status Associate(Submission& s);
  // Its record: id, times, dependency terms; and whether it could ever run here.
  Status Record(Submission& s);
  // A job array: its task ids, one record or one per task, room for them all.
  Status ExpandArray(Submission& s);
  // The limits that refuse rather than hold: submit counts, stored bytes, pending per user.
  Status CheckLimits(Submission& s);

  EngineContext& ctx_;
  JobManager& jobs_;
  const AccountManager& accounts_;
  const QosManager& qos_;
  const ReservationManager& reservations_;
  const LimitTracker& limits_;
  DependencyTracker& dependencies_;
  SchedulerLoop& scheduler_;
  ClusterViews& views_;
};

}  // namespace muster::controller
