#include "muster/core/priority.h"

#include <algorithm>
#include <cmath>

namespace muster::core {

PriorityScale PriorityScale::Of(const ClusterView& view) {
  PriorityScale s;
  for (const NodeView& n : view.nodes) s.total_gpus += n.gpus;
  s.total_nodes = view.nodes.size();
  for (const PartitionView& p : view.partitions) s.max_tier = std::max(s.max_tier, p.priority_tier);
  return s;
}

uint32_t TierOf(const JobRequest& r, const ClusterView& view) {
  uint32_t tier = 0;
  for (const std::string& name : r.partitions) {
    if (const PartitionView* p = view.FindPartition(name)) tier = std::max(tier, p->priority_tier);
  }
  return std::max<uint32_t>(tier, 1);
}

PriorityFactors ComputePriority(const PendingJob& job, uint32_t tier, const PriorityScale& scale,
                                TimeMs now, const PriorityWeights& w) {
  PriorityFactors f;
  const JobRequest& r = job.request;
  if (w.max_age_ms > 0 && now > job.submit_time_ms) {
    f.age = std::min(
        1.0, static_cast<double>(now - job.submit_time_ms) / static_cast<double>(w.max_age_ms));
  }
  // Bigger jobs first, as Slurm's default: without it a wide gang waits behind every small job.
  uint64_t gpus = static_cast<uint64_t>(r.gpus_per_node) * r.nodes;
  if (scale.total_gpus > 0 && gpus > 0) {
    f.size = std::min(1.0, static_cast<double>(gpus) / static_cast<double>(scale.total_gpus));
  } else if (scale.total_nodes > 0) {
    f.size = std::min(1.0, static_cast<double>(r.nodes) / static_cast<double>(scale.total_nodes));
  }
  f.partition =
      static_cast<double>(tier) / static_cast<double>(std::max<uint32_t>(1, scale.max_tier));
  f.qos = std::clamp(job.priority.qos, 0.0, 1.0);
  f.fairshare = std::clamp(job.priority.fairshare, 0.0, 1.0);
  f.nice = job.priority.nice;
  if (job.priority.fixed != 0) {
    f.priority = job.priority.fixed;
    return f;
  }
  if (job.priority.by_policy) {
    f.priority = job.priority.policy_priority - f.nice;
    return f;
  }
  double sum = w.age * f.age + w.size * f.size + w.partition * f.partition + w.qos * f.qos +
               w.fairshare * f.fairshare;
  f.priority = static_cast<int64_t>(std::llround(sum)) - f.nice;
  return f;
}

}  // namespace muster::core
