// The scheduler's entry points. Pure and deterministic: same inputs, same decisions; no I/O, no
// clock (time is an argument), no threads.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/core/types.h"

namespace muster::core {

// One scheduling pass over the pending queue:
//  - order: jobs whose preemption victims are leaving, then jobs that held a reservation last
//    pass, then partition priority tier, then jobs that fit within their GPU quota's guarantee
//    before those that would borrow (Kueue's order), then multifactor priority (see
//    priority.h), then submit time, then job id;
//  - each job starts now if its whole gang fits without touching a reservation (topology-aware:
//    the lowest tier that holds it, the fewest leaves, the best fit);
//  - the first `backfill_depth` blocked jobs get a reservation at their earliest start on the
//    availability profile (running jobs end at their time limits);
//  - every job that does not start gets a Slurm-named reason, a sentence, and an expected start
//    (its reservation, or a per-shape estimate) where one can be forecast.
// With backfill_depth == 0 there is no backfill: a blocked job holds back every lower-priority
// job of its partitions.
SchedulePass Schedule(const ClusterView& view, const std::vector<PendingJob>& queue, TimeMs now,
                      const SchedulerConfig& config);

// Indices into `queue` in the order Schedule() considers the jobs.
std::vector<size_t> PriorityOrder(const ClusterView& view, const std::vector<PendingJob>& queue,
                                  TimeMs now, const SchedulerConfig& config);

enum class PlaceMode {
  kNow,   // on the free resources of schedulable nodes, as they are
  kEver,  // on an empty cluster with every configured node up: could it run at all? A node
          // whose CPU topology is unknown counts as having any CPU shape asked for.
  kWhen,  // the earliest start on the availability profile (view.running)
};

// Places one gang. Errors:
//   kNow:  UNAVAILABLE with the pending reason in the message ("Resources: ...") when it does not
//          fit now.
//   kEver: FAILED_PRECONDITION with what to change ("asks for 16 GPUs per node; the largest node in
//          partition gpu has 8") when it can never fit; NOT_FOUND for an unknown partition.
//   kWhen: as kNow when it can never start (nodes down, partition limits); UNAVAILABLE when no
//          start can be forecast. The placement names nodes and start_ms only: which CPUs and
//          GPUs depends on which jobs end first.
Result<Placement> Place(const JobRequest& request, const ClusterView& view, PlaceMode mode,
                        TimeMs now = 0);

// Requests with the same key are interchangeable for placement (the time limit aside): the
// scheduler treats them as one equivalence class, and callers may cache Place(kEver) by it.
std::string ShapeKey(const JobRequest& request);
// The request in words: "2 nodes x (8 GPUs, 64 CPUs) under one leaf switch".
std::string DescribeShape(const JobRequest& request);

// Marks a placement's resources as used in `view` (the caller applies decisions one by one).
// REQUIRES: the placement fits (as returned by Place(kNow) on this view).
void Allocate(const Placement& placement, ClusterView& view);

// Returns a placement's resources to `view`.
void Release(const Placement& placement, ClusterView& view);

}  // namespace muster::core
