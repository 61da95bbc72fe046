// The scheduling core's value types: an immutable snapshot of the cluster in, decisions out.
// Plain C++ only: no I/O, no clocks, no threads, no protobuf (CI checks the includes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace muster::core {

using JobId = uint64_t;
using NodeIndex = uint32_t;
using TimeMs = int64_t;

// One node as the scheduler sees it: capacity from configuration, free resources by index.
struct NodeView {
  std::string name;
  std::string topology;  // tiers above the node, outermost first: "spine1/leaf3"
  uint32_t cpus = 0;
  uint64_t memory_mb = 0;
  uint32_t gpus = 0;  // GPU indices 0 .. gpus-1
  std::string gpu_type;
  bool schedulable = false;  // registered, responding, not drained, nothing stale to clean up

  std::vector<bool> cpu_free;  // size cpus
  uint64_t memory_free_mb = 0;
  std::vector<bool> gpu_free;  // size gpus

  // Builds a node with everything free.
  static NodeView Empty(std::string name, uint32_t cpus, uint64_t memory_mb, uint32_t gpus,
                        std::string gpu_type, std::string topology);
  uint32_t FreeCpus() const;
  uint32_t FreeGpus() const;
  bool Idle() const;  // nothing allocated
};

struct PartitionView {
  std::string name;
  std::vector<NodeIndex> nodes;
  int64_t max_time_ms = 0;  // 0: unlimited
  uint32_t priority_tier = 1;
};

// An immutable snapshot of nodes and partitions for one pass.
struct ClusterView {
  std::vector<NodeView> nodes;
  std::vector<PartitionView> partitions;

  const PartitionView* FindPartition(const std::string& name) const;
};

// A normalised resource request: how many nodes, and what each node must give.
struct JobRequest {
  std::vector<std::string> partitions;  // candidates in order of preference; never empty
  uint32_t nodes = 1;
  std::vector<uint32_t> tasks_per_node;  // size == nodes (block distribution)
  uint32_t cpus_per_task = 1;
  uint64_t mem_per_node_mb = 0;  // 0: memory not reserved
  uint32_t gpus_per_node = 0;
  std::string gpu_type;    // empty: any
  bool exclusive = false;  // whole nodes
  int64_t time_limit_ms = 0;
};

struct PendingJob {
  JobId id = 0;
  int64_t priority = 0;
  TimeMs submit_time_ms = 0;
  JobRequest request;
};

// What a started job gets on one node, by index: never just counted.
struct NodePlacement {
  NodeIndex node = 0;
  std::vector<uint32_t> cpus;
  uint64_t mem_mb = 0;
  std::vector<uint32_t> gpus;
  uint32_t ntasks = 0;
};

// A whole gang: every node or none.
struct Placement {
  std::string partition;
  std::vector<NodePlacement> nodes;  // ordered by node index; the first runs the batch script
};

struct JobStart {
  JobId job = 0;
  Placement placement;
};

// Why a job did not start in this pass. `reason` uses Slurm's names (Resources, Priority,
// ReqNodeNotAvail, PartitionNodeLimit, ...); `detail` is a sentence for people.
struct PendingReason {
  JobId job = 0;
  std::string reason;
  std::string detail;
};

struct SchedulePass {
  std::vector<JobStart> starts;
  std::vector<PendingReason> pending;
};

struct SchedulerConfig {
  // Placeholder for the policy knobs that arrive with the full core (weights, backfill depth).
};

}  // namespace muster::core
