// The scheduler's entry points. Pure and deterministic: same inputs, same decisions.
#pragma once

#include <vector>

#include "muster/common/status.h"
#include "muster/core/types.h"

namespace muster::core {

// One scheduling pass: jobs in priority order (priority descending, then submit time, then id),
// each placed whole or not at all against the view's free resources. A job blocked for resources
// holds back lower-priority jobs of its partitions (no backfill yet): they pend with "Priority".
SchedulePass Schedule(const ClusterView& view, const std::vector<PendingJob>& queue, TimeMs now,
                      const SchedulerConfig& config);

enum class PlaceMode {
  kNow,   // on the free resources of schedulable nodes, as they are
  kEver,  // on an empty cluster with every configured node up: could it run at all?
};

// Places one gang. Errors:
//   kNow:  UNAVAILABLE with the pending reason in the message ("Resources: ...") when it does not
//          fit now.
//   kEver: FAILED_PRECONDITION with what to change ("asks for 16 GPUs per node; the largest node in
//          partition gpu has 8") when it can never fit; NOT_FOUND for an unknown partition.
Result<Placement> Place(const JobRequest& request, const ClusterView& view, PlaceMode mode);

// Marks a placement's resources as used in `view` (the caller applies decisions one by one).
// REQUIRES: the placement fits (as returned by Place(kNow) on this view).
void Allocate(const Placement& placement, ClusterView& view);

// Returns a placement's resources to `view`.
void Release(const Placement& placement, ClusterView& view);

}  // namespace muster::core
