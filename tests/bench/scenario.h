// Synthetic clusters and queues for the core benchmarks (and a scaled-down one for tests):
// fat-tree topology, 8-GPU nodes, job sizes drawn from the Philly trace's GPU-count histogram.
#pragma once

#include <cstdint>
#include <vector>

#include "muster/core/types.h"

namespace muster::bench {

struct ScenarioSpec {
  uint32_t nodes = 12'500;
  uint32_t gpus_per_node = 8;
  uint32_t nodes_per_leaf = 32;
  uint32_t leaves_per_spine = 16;
  double busy_fraction = 0.6;  // of GPUs, held by running jobs with random end times
  uint32_t pending = 10'000;
  double big_gang_fraction = 0.001;  // pending gangs of 32, 64 or 128 whole nodes
  uint64_t seed = 42;
};

struct Scenario {
  core::ClusterView view;
  std::vector<core::PendingJob> queue;
  core::TimeMs now = 0;
  uint64_t busy_gpus = 0;
};

// One job request in the Philly GPU-size distribution: up to 8 GPUs on one node, more as a gang
// of whole 8-GPU nodes.
core::JobRequest PhillyRequest(uint64_t random, uint32_t gpus_per_node);

Scenario MakeScenario(const ScenarioSpec& spec);

}  // namespace muster::bench
