// Multifactor priority: each factor normalised to 0..1, weighted, summed. Pure: `now` is an input.
#pragma once

#include <cstdint>

#include "muster/core/types.h"

namespace muster::core {

struct PriorityFactors {
  double age = 0;
  double size = 0;
  double partition = 0;
  double qos = 0;
  double fairshare = 0;
  int64_t nice = 0;
  int64_t priority = 0;  // the weighted sum minus nice, or the admin's fixed value
};

// What the size and partition factors are measured against.
struct PriorityScale {
  uint64_t total_gpus = 0;
  uint64_t total_nodes = 0;
  uint32_t max_tier = 1;

  static PriorityScale Of(const ClusterView& view);
};

// `tier` is the highest priority tier among the job's partitions.
PriorityFactors ComputePriority(const PendingJob& job, uint32_t tier, const PriorityScale& scale,
                                TimeMs now, const PriorityWeights& weights);

// The highest tier among the request's partitions (1 when none is known).
uint32_t TierOf(const JobRequest& r, const ClusterView& view);

}  // namespace muster::core
