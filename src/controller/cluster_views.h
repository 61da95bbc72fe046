// The cluster as the scheduler's core sees it, built from the controller's state: the nodes now
// (free resources, availability, the running work and when it ends, the advance reservations'
// windows), every node empty (what could ever run, and the answer for a request shape, cached),
// and the GPU type a request will get. The pass, preemption, explanations and submissions all
// read these views; none of them owns them.
//
// Strand-confined.
#pragma once

#include <map>
#include <string>

#include "engine_context.h"
#include "job_manager.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/core/types.h"
#include "node_manager.h"
#include "reservation_manager.h"
#include "resource_ledger.h"

namespace muster::controller {

class ClusterViews {
 public:
  ClusterViews(const EngineContext& ctx, const JobManager& jobs, const NodeManager& nodes,
               const ResourceLedger& ledger, const ReservationManager& reservations);

  // The nodes now: free resources, availability, running work, reservation windows.
  core::ClusterView LiveView(TimeMs now) const;
  // Every node empty and up: what could ever run.
  const core::ClusterView& capacity() const { return capacity_view_; }
  // Whether `request` could run on an empty cluster with every configured node up (the
  // configuration alone decides, so the answer is cached per request shape: a submission must
  // not walk every node; but a request for a CPU shape (-B, --ntasks-per-core) is judged on the
  // layouts the agents reported, so it walks them, and a node without one may hold it).
  // FAILED_PRECONDITION or NOT_FOUND saying what to change.
  Status CanEverRun(const core::JobRequest& request);
  // The GPU type a request will get: its own, or the one type its partitions have ("" when
  // they mix types).
  std::string GpuTypeOf(const core::JobRequest& r) const;

 private:
  const EngineContext& ctx_;
  const JobManager& jobs_;
  const NodeManager& nodes_;
  const ResourceLedger& ledger_;
  const ReservationManager& reservations_;
  core::ClusterView base_view_;               // partitions only; nodes are filled per view
  core::ClusterView capacity_view_;           // every node empty
  std::map<std::string, Status> ever_cache_;  // core::ShapeKey -> Place(kEver)
  std::map<std::string, std::string> partition_gpu_type_;  // "" when mixed or none
};

}  // namespace muster::controller
