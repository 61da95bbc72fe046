// Gang placement for one job: choose nodes (preferring a single topology group, best fit), then
// CPUs, memory and GPUs by index on each. The full topology-aware placer replaces the node choice
// in a later issue; the contract (whole gang or nothing, resources by index) stays.
#include <algorithm>
#include <map>
#include <string>

#include "muster/common/strings.h"
#include "muster/core/scheduler.h"
#include "placement_internal.h"

namespace muster::core {
namespace {

bool TypeMatches(const NodeView& n, const JobRequest& r) {
  return r.gpu_type.empty() || ToLower(n.gpu_type) == ToLower(r.gpu_type);
}

uint32_t MaxSlotCpus(const JobRequest& r) {
  uint32_t tasks = 1;
  for (uint32_t t : r.tasks_per_node) tasks = std::max(tasks, t);
  return tasks * std::max<uint32_t>(1, r.cpus_per_task);
}

// Could this node hold one slot of the request if it were empty and up?
bool FitsCapacity(const NodeView& n, const JobRequest& r, uint32_t cpus) {
  if (r.gpus_per_node > 0 && (!TypeMatches(n, r) || n.gpus < r.gpus_per_node)) return false;
  return n.cpus >= cpus && n.memory_mb >= r.mem_per_node_mb;
}

// Can this node hold one slot right now?
bool FitsNow(const NodeView& n, const JobRequest& r, uint32_t cpus) {
  if (!n.schedulable || !FitsCapacity(n, r, cpus)) return false;
  if (r.exclusive) return n.Idle();
  return n.FreeCpus() >= cpus && n.memory_free_mb >= r.mem_per_node_mb &&
         n.FreeGpus() >= r.gpus_per_node;
}

std::string Shape(const JobRequest& r) {
  std::string s = std::to_string(r.nodes) + (r.nodes == 1 ? " node" : " nodes");
  std::vector<std::string> per;
  if (r.exclusive) per.push_back("whole node");
  if (r.gpus_per_node) {
    per.push_back(std::to_string(r.gpus_per_node) + " " +
                  (r.gpu_type.empty() ? std::string("GPU") : r.gpu_type + " GPU") +
                  (r.gpus_per_node == 1 ? "" : "s"));
  }
  per.push_back(std::to_string(MaxSlotCpus(r)) + " CPUs");
  if (r.mem_per_node_mb) per.push_back(std::to_string(r.mem_per_node_mb) + " MB");
  return s + " x (" + Join(per, ", ") + ")";
}

// Picks `count` nodes from candidates (ascending index): the smallest topology group that holds
// them all, else the fewest groups, largest first. Result sorted by index.
std::vector<NodeIndex> ChooseNodes(const ClusterView& view, const std::vector<NodeIndex>& cand,
                                   uint32_t count) {
  std::map<std::string, std::vector<NodeIndex>> groups;
  std::vector<std::string> order;
  for (NodeIndex i : cand) {
    auto [it, inserted] = groups.try_emplace(view.nodes[i].topology);
    if (inserted) order.push_back(it->first);
    it->second.push_back(i);
  }
  const std::vector<NodeIndex>* best = nullptr;
  for (const auto& g : order) {
    const auto& v = groups[g];
    if (v.size() >= count && (!best || v.size() < best->size())) best = &v;
  }
  std::vector<NodeIndex> chosen;
  if (best) {
    chosen.assign(best->begin(), best->begin() + count);
  } else {
    std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
      return groups[a].size() > groups[b].size();
    });
    for (const auto& g : order) {
      for (NodeIndex i : groups[g]) {
        if (chosen.size() == count) break;
        chosen.push_back(i);
      }
    }
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::vector<uint32_t> TakeFree(const std::vector<bool>& free, uint32_t count) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < free.size() && out.size() < count; ++i) {
    if (free[i]) out.push_back(i);
  }
  return out;
}

PlaceOutcome PlaceInPartition(const JobRequest& r, const ClusterView& view, const PartitionView& p,
                              PlaceMode mode) {
  const uint32_t slot_cpus = MaxSlotCpus(r);
  std::vector<NodeIndex> fit_now, fit_up, fit_capacity;
  for (NodeIndex i : p.nodes) {
    const NodeView& n = view.nodes[i];
    if (!FitsCapacity(n, r, slot_cpus)) continue;
    fit_capacity.push_back(i);
    if (n.schedulable) fit_up.push_back(i);
    if (FitsNow(n, r, slot_cpus)) fit_now.push_back(i);
  }

  if (mode == PlaceMode::kEver) {
    if (r.nodes > p.nodes.size()) {
      return PlaceOutcome::Success(
          {p.name, {}});  // accepted; pends with PartitionNodeLimit, as in Slurm
    }
    if (fit_capacity.size() >= r.nodes) return PlaceOutcome::Success({p.name, {}});
    // Say which resource no node has enough of, measured on the largest node.
    uint32_t max_gpus = 0, max_cpus = 0;
    uint64_t max_mem = 0;
    std::vector<std::string> types;
    for (NodeIndex i : p.nodes) {
      const NodeView& n = view.nodes[i];
      if (TypeMatches(n, r)) max_gpus = std::max(max_gpus, n.gpus);
      max_cpus = std::max(max_cpus, n.cpus);
      max_mem = std::max(max_mem, n.memory_mb);
      if (n.gpus && std::find(types.begin(), types.end(), n.gpu_type) == types.end()) {
        types.push_back(n.gpu_type);
      }
    }
    const std::string where = " in partition " + p.name;
    if (r.gpus_per_node && !r.gpu_type.empty() && max_gpus == 0) {
      return PlaceOutcome::Fail(StatusCode::kFailedPrecondition, "BadConstraints",
                                "asks for GPU type '" + r.gpu_type + "'; partition " + p.name +
                                    (types.empty() ? " has no GPUs" : " has " + Join(types, ", ")));
    }
    if (r.gpus_per_node > max_gpus) {
      return PlaceOutcome::Fail(StatusCode::kFailedPrecondition, "BadConstraints",
                                "asks for " + std::to_string(r.gpus_per_node) +
                                    " GPUs per node; the largest node" + where + " has " +
                                    std::to_string(max_gpus));
    }
    if (slot_cpus > max_cpus) {
      return PlaceOutcome::Fail(
          StatusCode::kFailedPrecondition, "BadConstraints",
          "asks for " + std::to_string(slot_cpus) + " CPUs on one node; the largest node" + where +
              " has " + std::to_string(max_cpus) + " (spread the tasks over more nodes with -N)");
    }
    if (r.mem_per_node_mb > max_mem) {
      return PlaceOutcome::Fail(StatusCode::kFailedPrecondition, "BadConstraints",
                                "asks for " + std::to_string(r.mem_per_node_mb) +
                                    " MB of memory per node; the largest node" + where + " has " +
                                    std::to_string(max_mem) + " MB");
    }
    return PlaceOutcome::Fail(
        StatusCode::kFailedPrecondition, "BadConstraints",
        "needs " + Shape(r) + "; only " + std::to_string(fit_capacity.size()) + " of " +
            std::to_string(p.nodes.size()) + " nodes" + where + " can hold that");
  }

  if (r.nodes > p.nodes.size()) {
    return PlaceOutcome::Fail(StatusCode::kUnavailable, "PartitionNodeLimit",
                              "needs " + std::to_string(r.nodes) + " nodes; partition " + p.name +
                                  " has " + std::to_string(p.nodes.size()));
  }
  if (r.time_limit_ms > 0 && p.max_time_ms > 0 && r.time_limit_ms > p.max_time_ms) {
    return PlaceOutcome::Fail(StatusCode::kUnavailable, "PartitionTimeLimit",
                              "time limit is longer than partition " + p.name + "'s maximum");
  }
  if (fit_now.size() < r.nodes) {
    if (fit_up.size() < r.nodes) {
      return PlaceOutcome::Fail(StatusCode::kUnavailable, "ReqNodeNotAvail",
                                "needs " + Shape(r) + "; only " + std::to_string(fit_up.size()) +
                                    " of the " + std::to_string(fit_capacity.size()) +
                                    " nodes in partition " + p.name +
                                    " that could hold it are up and not drained");
    }
    return PlaceOutcome::Fail(StatusCode::kUnavailable, "Resources",
                              "needs " + Shape(r) + "; " + std::to_string(fit_now.size()) + " of " +
                                  std::to_string(fit_up.size()) + " usable nodes in partition " +
                                  p.name + " have that free now");
  }

  Placement out;
  out.partition = p.name;
  std::vector<NodeIndex> chosen = ChooseNodes(view, fit_now, r.nodes);
  for (size_t k = 0; k < chosen.size(); ++k) {
    const NodeView& n = view.nodes[chosen[k]];
    NodePlacement np;
    np.node = chosen[k];
    np.ntasks = k < r.tasks_per_node.size() ? r.tasks_per_node[k] : 1;
    if (r.exclusive) {
      np.cpus = TakeFree(n.cpu_free, n.cpus);
      np.gpus = TakeFree(n.gpu_free, n.gpus);
      np.mem_mb = n.memory_free_mb;
    } else {
      np.cpus = TakeFree(n.cpu_free,
                         std::max<uint32_t>(1, np.ntasks) * std::max<uint32_t>(1, r.cpus_per_task));
      np.gpus = TakeFree(n.gpu_free, r.gpus_per_node);
      np.mem_mb = r.mem_per_node_mb;
    }
    out.nodes.push_back(std::move(np));
  }
  return PlaceOutcome::Success(std::move(out));
}

}  // namespace

NodeView NodeView::Empty(std::string name, uint32_t cpus, uint64_t memory_mb, uint32_t gpus,
                         std::string gpu_type, std::string topology) {
  NodeView n;
  n.name = std::move(name);
  n.cpus = cpus;
  n.memory_mb = memory_mb;
  n.gpus = gpus;
  n.gpu_type = std::move(gpu_type);
  n.topology = std::move(topology);
  n.schedulable = true;
  n.cpu_free.assign(cpus, true);
  n.memory_free_mb = memory_mb;
  n.gpu_free.assign(gpus, true);
  return n;
}

uint32_t NodeView::FreeCpus() const {
  return static_cast<uint32_t>(std::count(cpu_free.begin(), cpu_free.end(), true));
}

uint32_t NodeView::FreeGpus() const {
  return static_cast<uint32_t>(std::count(gpu_free.begin(), gpu_free.end(), true));
}

bool NodeView::Idle() const {
  return FreeCpus() == cpus && FreeGpus() == gpus && memory_free_mb == memory_mb;
}

const PartitionView* ClusterView::FindPartition(const std::string& name) const {
  for (const auto& p : partitions) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

PlaceOutcome TryPlace(const JobRequest& request, const ClusterView& view, PlaceMode mode) {
  if (request.partitions.empty()) {
    return PlaceOutcome::Fail(StatusCode::kInvalidArgument, "BadConstraints",
                              "request names no partition");
  }
  if (request.nodes == 0) {
    return PlaceOutcome::Fail(StatusCode::kInvalidArgument, "BadConstraints",
                              "request asks for zero nodes");
  }
  PlaceOutcome first_failure;
  for (const std::string& name : request.partitions) {
    const PartitionView* p = view.FindPartition(name);
    if (!p) {
      std::vector<std::string> names;
      for (const auto& q : view.partitions) names.push_back(q.name);
      return PlaceOutcome::Fail(
          StatusCode::kNotFound, "BadConstraints",
          "partition '" + name + "' does not exist (partitions: " + Join(names, ", ") + ")");
    }
    PlaceOutcome r = PlaceInPartition(request, view, *p, mode);
    if (r.ok) return r;
    if (first_failure.reason.empty()) first_failure = std::move(r);
  }
  return first_failure;
}

Result<Placement> Place(const JobRequest& request, const ClusterView& view, PlaceMode mode) {
  PlaceOutcome r = TryPlace(request, view, mode);
  if (r.ok) return std::move(r.placement);
  if (r.code == StatusCode::kUnavailable) return Status(r.code, r.reason + ": " + r.detail);
  return Status(r.code, r.detail);
}

void Allocate(const Placement& placement, ClusterView& view) {
  for (const NodePlacement& np : placement.nodes) {
    NodeView& n = view.nodes[np.node];
    for (uint32_t c : np.cpus) n.cpu_free[c] = false;
    for (uint32_t g : np.gpus) n.gpu_free[g] = false;
    n.memory_free_mb -= std::min(n.memory_free_mb, np.mem_mb);
  }
}

void Release(const Placement& placement, ClusterView& view) {
  for (const NodePlacement& np : placement.nodes) {
    NodeView& n = view.nodes[np.node];
    for (uint32_t c : np.cpus) n.cpu_free[c] = true;
    for (uint32_t g : np.gpus) n.gpu_free[g] = true;
    n.memory_free_mb = std::min(n.memory_mb, n.memory_free_mb + np.mem_mb);
  }
}

}  // namespace muster::core
