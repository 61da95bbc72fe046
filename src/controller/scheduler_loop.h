// The scheduling pass, in three steps (flux's prep/check watchers; STYLE.md §7.4): Prepare
// snapshots the queue and the nodes on the strand, Compute is the pure core (any thread, no access
// to the controller), Apply checks every start against the live state (the world may have moved
// on meanwhile) and commits the starts that still fit in one batch. It is mechanism only: what
// policy decides (order, admission, limits, quotas, reservations, preemption) it asks its
// PassPolicy, in the order pass_policy.h gives. Also sbatch --test-only: the pass it would run
// next with one more job.
//
// Strand-confined, but for Compute.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster_views.h"
#include "engine_context.h"
#include "job_manager.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/controller/cluster_metrics.h"
#include "muster/controller/engine.h"
#include "muster/core/priority.h"
#include "muster/core/types.h"
#include "node_manager.h"
#include "pass_policy.h"
#include "resource_ledger.h"

namespace muster::controller {

class SchedulerLoop {
 public:
  SchedulerLoop(EngineContext& ctx, JobManager& jobs, const NodeManager& nodes,
                ResourceLedger& ledger, const ClusterViews& views, PassPolicy& policy);

  // Priorities age and forecasts drift: pending work gets a pass at least every
  // sched_max_interval_ms.
  void Tick(TimeMs now);

  // nullopt when no job can be considered.
  std::optional<Engine::PassInput> Prepare(TimeMs now);
  static core::SchedulePass Compute(const Engine::PassInput& in);
  void Apply(const core::SchedulePass& pass, TimeMs now);

  // sbatch --test-only: the pass the scheduler would run next, with job `id` added to the queue.
  v1::TestOnlyResult TestOnly(uint64_t id, const core::JobRequest& request, TimeMs now) const;

  // The reservations of the last pass that belong to jobs still waiting.
  const std::vector<core::Reservation>& reservations() const { return reservations_; }
  // Pending, not held, not waiting for its previous run to leave its nodes.
  static bool InPass(const v1::JobRecord& rec);

  // What the passes did since the controller started (metrics, sdiag).
  struct Totals {
    uint64_t passes = 0;
    uint64_t jobs_started = 0;
    uint64_t jobs_backfilled = 0;
    uint64_t forecasts = 0;
    uint32_t last_considered = 0;
    uint32_t last_reservations = 0;
    QueueWaits queue_waits;
  };
  const Totals& totals() const { return totals_; }
  // A replacement engine's loop goes on counting from where the last one stopped.
  void ContinueTotals(const Totals& t) { totals_ = t; }

 private:
  core::PendingJob ToPendingJob(const JobEntry& job, TimeMs now) const;
  // The starts of the pass that still fit, stored in one batch, then held and launched; the
  // reasons of those left waiting.
  void CommitStarts(const core::SchedulePass& pass, TimeMs now);
  // A start decided on a snapshot still holds: the job waits, its nodes take work, and every
  // unit of its placement is free.
  bool StartStillValid(const core::JobStart& start) const;

  EngineContext& ctx_;
  JobManager& jobs_;
  const NodeManager& nodes_;
  ResourceLedger& ledger_;
  const ClusterViews& views_;
  PassPolicy& policy_;
  core::SchedulerConfig config_;
  core::PriorityScale priority_scale_;
  std::vector<core::Reservation> reservations_;
  // Arrays whose %N held back tasks waiting in their carrier in this pass: a task that takes
  // over from a carrier that starts waits for it too (its reason from Prepare to Apply).
  std::set<uint64_t> throttled_;
  TimeMs last_pass_ms_ = 0;
  Totals totals_;
};

}  // namespace muster::controller
