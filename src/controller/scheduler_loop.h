// The scheduling pass, in three steps (flux's prep/check watchers; STYLE.md §7.4): Prepare
// snapshots the queue and the nodes on the strand, Compute is the pure core (any thread, no access
// to the controller), Apply checks every start against the live state (the world may have moved
// on meanwhile) and commits the starts that still fit in one batch. Also the answers that need the
// scheduler's view without a pass: can a request ever run here (cached per request shape), and
// sbatch --test-only.
//
// Strand-confined, but for Compute.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine_context.h"
#include "job_manager.h"
#include "limit_tracker.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/core/priority.h"
#include "muster/core/types.h"
#include "node_manager.h"
#include "quota_book.h"
#include "reservation_manager.h"
#include "resource_ledger.h"

namespace muster::controller {

class SchedulerLoop {
 public:
  SchedulerLoop(EngineContext& ctx, JobManager& jobs, const NodeManager& nodes,
                ResourceLedger& ledger);

  // Priorities age and forecasts drift: pending work gets a pass at least every
  // sched_max_interval_ms.
  void Tick(TimeMs now);
  // Where a pending job's fair-share factor comes from (0 when unset).
  void SetFairShare(std::function<double(const v1::JobSpec&)> factor_of) {
    fairshare_of_ = std::move(factor_of);
  }
  // Where a pending job's QoS factor comes from (0 when unset).
  void SetQosFactor(std::function<double(const v1::JobSpec&)> factor_of) {
    qos_of_ = std::move(factor_of);
  }
  // Account and QoS limits (none when unset).
  void SetLimits(LimitTracker* limits) { limits_ = limits; }
  // GPU quotas (none when unset).
  void SetQuotas(QuotaBook* quotas) { quotas_ = quotas; }
  // Advance reservations (none when unset): their windows go into every view.
  void SetAdvanceReservations(const ReservationManager* advance) { advance_ = advance; }

  // nullopt when no job can be considered.
  std::optional<Engine::PassInput> Prepare(TimeMs now);
  static core::SchedulePass Compute(const Engine::PassInput& in);
  void Apply(const core::SchedulePass& pass, TimeMs now);

  // Whether `request` could run on an empty cluster with every configured node up (the
  // configuration alone decides, so the answer is cached per request shape: a submission must
  // not walk every node). FAILED_PRECONDITION or NOT_FOUND saying what to change.
  Status CanEverRun(const core::JobRequest& request);
  // sbatch --test-only: the pass the scheduler would run next, with job `id` added to the queue.
  v1::TestOnlyResult TestOnly(uint64_t id, const core::JobRequest& request, TimeMs now) const;

  // The nodes as the scheduler sees them now: free resources, availability, running work.
  core::ClusterView LiveView(TimeMs now) const;
  // Every node empty and up: what could ever run.
  const core::ClusterView& capacity() const { return capacity_view_; }
  // The reservations of the last pass that belong to jobs still waiting.
  const std::vector<core::Reservation>& reservations() const { return reservations_; }
  // Pending, not held, not waiting for its previous run to leave its nodes.
  static bool InPass(const v1::JobRecord& rec);
  // The GPU type a request will get: its own, or the one type its partitions have ("" when
  // they mix types).
  std::string GpuTypeOf(const core::JobRequest& r) const;

 private:
  core::PendingJob ToPendingJob(const JobEntry& job) const;
  // A start decided on a snapshot still holds: the job waits, its nodes take work, and every
  // unit of its placement is free.
  bool StartStillValid(const core::JobStart& start) const;

  EngineContext& ctx_;
  JobManager& jobs_;
  const NodeManager& nodes_;
  ResourceLedger& ledger_;
  core::ClusterView base_view_;      // partitions only; nodes are filled per pass
  core::ClusterView capacity_view_;  // every node empty
  core::SchedulerConfig config_;
  core::PriorityScale priority_scale_;
  std::map<std::string, Status> ever_cache_;  // core::ShapeKey -> Place(kEver)
  std::vector<core::Reservation> reservations_;
  // Arrays whose %N held back tasks waiting in their carrier in this pass: a task that takes
  // over from a carrier that starts waits for it too (its reason from Prepare to Apply).
  std::set<uint64_t> throttled_;
  TimeMs last_pass_ms_ = 0;
  std::function<double(const v1::JobSpec&)> fairshare_of_;
  std::function<double(const v1::JobSpec&)> qos_of_;
  LimitTracker* limits_ = nullptr;
  QuotaBook* quotas_ = nullptr;
  const ReservationManager* advance_ = nullptr;
  std::map<std::string, std::string> partition_gpu_type_;  // "" when mixed or none
};

}  // namespace muster::controller
