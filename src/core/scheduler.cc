// The placeholder policy: strict priority order, whole gangs, no backfill. The full core
// (multifactor priority, topology tiers, backfill with reservations) replaces this file's body
// behind the same Schedule() signature.
#include "muster/core/scheduler.h"

#include <algorithm>
#include <set>

#include "placement_internal.h"

namespace muster::core {

SchedulePass Schedule(const ClusterView& view, const std::vector<PendingJob>& queue, TimeMs now,
                      const SchedulerConfig& config) {
  (void)now;
  (void)config;
  std::vector<const PendingJob*> order;
  order.reserve(queue.size());
  for (const auto& j : queue) order.push_back(&j);
  std::stable_sort(order.begin(), order.end(), [](const PendingJob* a, const PendingJob* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    if (a->submit_time_ms != b->submit_time_ms) return a->submit_time_ms < b->submit_time_ms;
    return a->id < b->id;
  });

  ClusterView work = view;        // free resources consumed as jobs start in this pass
  std::set<std::string> blocked;  // partitions where a higher-priority job waits for resources
  SchedulePass pass;
  for (const PendingJob* job : order) {
    const JobRequest& r = job->request;
    bool all_blocked = !r.partitions.empty() &&
                       std::all_of(r.partitions.begin(), r.partitions.end(),
                                   [&](const std::string& p) { return blocked.count(p) > 0; });
    if (all_blocked) {
      pass.pending.push_back(
          {job->id, "Priority",
           "a higher-priority job is waiting for resources in partition " + r.partitions.front()});
      continue;
    }
    // Only the partitions not held back by a higher-priority job are open to this one.
    JobRequest open = r;
    open.partitions.clear();
    for (const auto& p : r.partitions) {
      if (!blocked.count(p)) open.partitions.push_back(p);
    }
    PlaceOutcome placed = TryPlace(open, work, PlaceMode::kNow);
    if (placed.ok) {
      Allocate(placed.placement, work);
      pass.starts.push_back({job->id, std::move(placed.placement)});
      continue;
    }
    pass.pending.push_back({job->id, placed.reason, placed.detail});
    if (placed.reason == "Resources") {
      for (const auto& p : open.partitions) blocked.insert(p);
    }
  }
  return pass;
}

}  // namespace muster::core
