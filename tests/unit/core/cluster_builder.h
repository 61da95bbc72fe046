// The core's inputs for tests, built one way: clusters of nodes (named, sized, under leaf
// switches), partitions, GRES pools, gang requests and queue entries.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "muster/core/types.h"

namespace muster::core::testing {

struct NodeShape {
  uint32_t cpus = 16;
  uint64_t memory_mb = 64000;
  uint32_t gpus = 8;
  std::string gpu_type = "h100";
};

class ClusterBuilder {
 public:
  // `count` nodes of `shape` named `prefix`<first>, `prefix`<first+1>, ...; `topology(k)` gives
  // the k-th new node's tiers ("spine1/leaf2"), none when empty.
  ClusterBuilder& Nodes(uint32_t count, const NodeShape& shape, const std::string& prefix = "node",
                        uint32_t first = 1,
                        const std::function<std::string(uint32_t k)>& topology = nullptr) {
    for (uint32_t k = 0; k < count; ++k) {
      view_.nodes.push_back(NodeView::Empty(prefix + std::to_string(first + k), shape.cpus,
                                            shape.memory_mb, shape.gpus, shape.gpu_type,
                                            topology ? topology(k) : ""));
    }
    return *this;
  }
  // A partition of the nodes given by index (every node when none is given).
  ClusterBuilder& Partition(const std::string& name, std::vector<NodeIndex> nodes = {},
                            int64_t max_time_ms = 0, uint32_t tier = 1) {
    if (nodes.empty()) {
      for (NodeIndex i = 0; i < view_.nodes.size(); ++i) nodes.push_back(i);
    }
    view_.partitions.push_back({name, std::move(nodes), max_time_ms, tier});
    return *this;
  }
  // Every node registered and up (explanations judge schedulability).
  ClusterBuilder& Schedulable() {
    for (auto& n : view_.nodes) n.schedulable = true;
    return *this;
  }
  NodeView& node(NodeIndex i) { return view_.nodes[i]; }
  ClusterView Build() const { return view_; }

 private:
  ClusterView view_;
};

// Half of `count` nodes under spine1/leaf1, the rest under spine1/leaf2.
inline std::function<std::string(uint32_t)> TwoLeaves(uint32_t count) {
  return [count](uint32_t k) { return k < count / 2 ? "spine1/leaf1" : "spine1/leaf2"; };
}
inline std::function<std::string(uint32_t)> Under(std::string topology) {
  return [topology = std::move(topology)](uint32_t) { return topology; };
}

// A gang: `nodes` nodes, each with `gpus_per_node` GPUs and `tasks_per_node` tasks.
inline JobRequest Gang(uint32_t nodes, uint32_t gpus_per_node, uint32_t tasks_per_node = 1,
                       const std::string& partition = "gpu") {
  JobRequest r;
  r.partitions = {partition};
  r.nodes = nodes;
  r.tasks_per_node.assign(nodes, tasks_per_node);
  r.gpus_per_node = gpus_per_node;
  return r;
}

inline PendingJob Job(JobId id, int64_t fixed_priority, TimeMs submit, JobRequest r) {
  PendingJob j;
  j.id = id;
  j.submit_time_ms = submit;
  j.request = std::move(r);
  j.priority.fixed = fixed_priority;
  return j;
}

// A GRES pool of `units` (MIG slices of a profile, NVMe drives, ...).
inline GresView Pool(std::string name, std::string type, uint32_t units) {
  GresView g;
  g.name = std::move(name);
  g.type = std::move(type);
  g.free.assign(units, true);
  return g;
}
// Each of `gpus` GPUs shared as `per_gpu` shards.
inline GresView Shards(uint32_t gpus, uint32_t per_gpu) {
  GresView g = Pool("shard", "", gpus * per_gpu);
  for (uint32_t i = 0; i < gpus * per_gpu; ++i) g.on_gpu.push_back(i / per_gpu);
  return g;
}

}  // namespace muster::core::testing
