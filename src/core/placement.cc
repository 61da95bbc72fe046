// The single-job questions: can it start now, can it ever run here, when would it start. All
// three go through the same Planner the scheduling pass uses.
#include <algorithm>
#include <set>
#include <string>
#include <string_view>

#include "cluster_index.h"
#include "muster/common/strings.h"
#include "muster/core/scheduler.h"
#include "planner.h"

namespace muster::core {
namespace {

Status Invalid(const JobRequest& r) {
  if (r.partitions.empty()) return InvalidArgument("request names no partition");
  if (r.nodes == 0) return InvalidArgument("request asks for zero nodes");
  return Status::Ok();
}

// Why no node of the partition could ever hold one slot, measured on the largest node.
std::string NeverFits(const JobRequest& r, const ClusterView& view, const PartitionView& p,
                      uint32_t capable) {
  uint32_t max_gpus = 0, max_cpus = 0;
  uint64_t max_mem = 0, max_tmp = 0;
  std::vector<std::string> types;
  for (NodeIndex i : p.nodes) {
    const NodeView& n = view.nodes[i];
    if (TypeMatches(n, r)) max_gpus = std::max(max_gpus, n.gpus);
    max_cpus = std::max(max_cpus, n.cpus);
    max_mem = std::max(max_mem, n.memory_mb);
    max_tmp = std::max(max_tmp, n.tmp_disk_mb);
    if (n.gpus && std::find(types.begin(), types.end(), n.gpu_type) == types.end()) {
      types.push_back(n.gpu_type);
    }
  }
  const std::string where = " in partition " + p.name;
  const uint32_t slot_cpus = MaxSlotCpus(r);
  if (r.gpus_per_node && !r.gpu_type.empty() && max_gpus == 0) {
    return "asks for GPU type '" + r.gpu_type + "'; partition " + p.name +
           (types.empty() ? " has no GPUs" : " has " + Join(types, ", "));
  }
  if (r.gpus_per_node > max_gpus) {
    return "asks for " + std::to_string(r.gpus_per_node) + " GPUs per node; the largest node" +
           where + " has " + std::to_string(max_gpus);
  }
  if (slot_cpus > max_cpus) {
    return "asks for " + std::to_string(slot_cpus) + " CPUs on one node; the largest node" + where +
           " has " + std::to_string(max_cpus) + " (spread the tasks over more nodes with -N)";
  }
  for (const GresRequest& g : r.gres) {
    uint32_t most = 0;
    for (NodeIndex i : p.nodes) most = std::max(most, GresUnits(view.nodes[i], g, false));
    if (g.count > most) {
      std::string what = g.name + (g.type.empty() ? "" : ":" + g.type);
      return "asks for " + std::to_string(g.count) + " " + what + " per node; the largest node" +
             where + " has " + std::to_string(most);
    }
  }
  if (r.mem_per_node_mb > max_mem) {
    return "asks for " + std::to_string(r.mem_per_node_mb) +
           " MB of memory per node; the largest node" + where + " has " + std::to_string(max_mem) +
           " MB";
  }
  if (r.min_tmp_disk_mb > max_tmp) {
    return "asks for " + std::to_string(r.min_tmp_disk_mb) +
           " MB of temporary disk per node (--tmp); the most a node" + where + " offers is " +
           std::to_string(max_tmp) + " MB (tmp_disk_mb)";
  }
  if (!r.features.empty()) {
    uint32_t with = 0;
    for (NodeIndex i : p.nodes) with += HasFeatures(view.nodes[i], r) ? 1 : 0;
    if (with < r.MinNodes()) {
      return "asks for nodes with features " + FeatureText(r) + "; " + std::to_string(with) +
             " of " + std::to_string(p.nodes.size()) + " nodes" + where + " have them";
    }
  }
  if (r.AsksForCpuShape()) {
    // Nodes that have not reported a CPU topology may yet report one that fits.
    uint32_t with = 0;
    for (NodeIndex i : p.nodes) with += HasCpuShape(view.nodes[i], r, true) ? 1 : 0;
    if (with < r.MinNodes()) {
      return "asks for nodes with " + CpuShapeText(r) + "; " + std::to_string(with) + " of " +
             std::to_string(p.nodes.size()) + " nodes" + where + " have that";
    }
  }
  return "needs " + Planner::Shape(r) + "; only " + std::to_string(capable) + " of " +
         std::to_string(p.nodes.size()) + " nodes" + where + " can hold that";
}

// Why the partition can never hold the gang inside one domain of --topology's scope, even
// with every node empty and up; empty when it can.
std::string ScopeNeverFits(const JobRequest& r, const ClusterView& view, const PartitionView& p) {
  ClusterView copy = view;  // the index needs a view of its own
  size_t part = 0;
  for (size_t i = 0; i < copy.partitions.size(); ++i) {
    if (copy.partitions[i].name == p.name) part = i;
  }
  ClusterIndex index(&copy);
  const Need need = NeedOf(r);
  NodeSet capable = index.CapacitySet(part, r, need, false, /*unknown_shape_fits=*/true);
  NodeSet forced(index.size());
  for (const std::string& name : r.required_nodes) {
    if (int64_t pos = index.FindNode(name); pos >= 0) forced.Set(static_cast<size_t>(pos));
  }
  GangLimits limits = GangLimits::Of(r);
  limits.max_leaves = 0;  // --switches relaxes with time; only the scope is absolute
  if (!index.ChooseGangWith(capable, r.MinNodes(), limits, forced).empty()) return "";
  return "needs " + Planner::Shape(r) + "; no such domain in partition " + p.name +
         " has enough nodes that can hold that";
}

// Every node named by --nodelist or --exclude must exist.
Status NamesExist(const JobRequest& r, const ClusterView& view) {
  if (r.required_nodes.empty() && r.excluded_nodes.empty()) return Status::Ok();
  std::set<std::string_view> names;
  for (const NodeView& n : view.nodes) names.insert(n.name);
  std::vector<std::string> unknown;
  for (const auto* list : {&r.required_nodes, &r.excluded_nodes}) {
    for (const std::string& name : *list) {
      if (!names.count(name)) unknown.push_back(name);
    }
  }
  if (!unknown.empty()) return NotFound("no such node: " + Join(unknown, ","));
  for (const std::string& name : r.required_nodes) {
    if (std::find(r.excluded_nodes.begin(), r.excluded_nodes.end(), name) !=
        r.excluded_nodes.end()) {
      return InvalidArgument("node " + name + " is both required (--nodelist) and excluded");
    }
  }
  if (r.required_nodes.size() > r.MinNodes()) {
    return InvalidArgument(std::to_string(r.required_nodes.size()) +
                           " nodes are required (--nodelist) but the job asks for " +
                           std::to_string(r.MinNodes()));
  }
  return Status::Ok();
}

Result<Placement> Ever(const JobRequest& r, const ClusterView& view) {
  MUSTER_RETURN_IF_ERROR(NamesExist(r, view));
  // --reservation: only the reservation's nodes, unless it is flex.
  std::vector<char> outside;
  if (!r.reservation.empty()) {
    const AdvanceReservation* found = nullptr;
    for (const AdvanceReservation& a : view.advance) {
      if (a.name == r.reservation) found = &a;
    }
    if (!found) return NotFound("reservation " + r.reservation + " does not exist");
    if (!found->flex) {
      outside.assign(view.nodes.size(), 1);
      for (NodeIndex n : found->nodes) {
        if (n < outside.size()) outside[n] = 0;
      }
    }
  }
  std::string first_failure;
  for (const std::string& name : r.partitions) {
    const PartitionView* p = view.FindPartition(name);
    if (!p) {
      std::vector<std::string> names;
      for (const auto& q : view.partitions) names.push_back(q.name);
      return NotFound("partition '" + name + "' does not exist (partitions: " + Join(names, ", ") +
                      ")");
    }
    // More nodes than the partition has is accepted: it pends with PartitionNodeLimit, as in
    // Slurm, until the partition grows.
    if (r.MinNodes() > p->nodes.size()) return Placement{p->name, 0, {}};
    const Need need = NeedOf(r);
    uint32_t capable = 0;
    size_t required_capable = 0;
    for (NodeIndex i : p->nodes) {
      const NodeView& n = view.nodes[i];
      const bool excluded = std::find(r.excluded_nodes.begin(), r.excluded_nodes.end(), n.name) !=
                                r.excluded_nodes.end() ||
                            (!outside.empty() && outside[i]);
      bool gres_ok = true;
      for (const GresRequest& g : r.gres) gres_ok = gres_ok && GresUnits(n, g, false) >= g.count;
      if ((need.gpus == 0 || (TypeMatches(n, r) && n.gpus >= need.gpus)) && n.cpus >= need.cpus &&
          n.memory_mb >= need.mem_mb && n.tmp_disk_mb >= r.min_tmp_disk_mb && HasFeatures(n, r) &&
          HasCpuShape(n, r, true) && !excluded && gres_ok) {
        ++capable;
        if (std::find(r.required_nodes.begin(), r.required_nodes.end(), n.name) !=
            r.required_nodes.end()) {
          ++required_capable;
        }
      }
    }
    const bool fits = capable >= r.MinNodes() && required_capable == r.required_nodes.size();
    if (fits && r.scope == JobRequest::Scope::kAny) return Placement{p->name, 0, {}};
    if (fits) {
      std::string why = ScopeNeverFits(r, view, *p);
      if (why.empty()) return Placement{p->name, 0, {}};
      if (first_failure.empty()) first_failure = why;
      continue;
    }
    if (!first_failure.empty()) continue;
    if (capable >= r.MinNodes()) {
      first_failure = "needs " + Planner::Shape(r) + " on node(s) " + Join(r.required_nodes, ",") +
                      "; not all of them are in partition " + p->name + " and can hold that";
    } else {
      first_failure = NeverFits(r, view, *p, capable);
    }
  }
  return FailedPrecondition(first_failure);
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

uint32_t GresView::FreeUnits() const {
  return static_cast<uint32_t>(std::count(free.begin(), free.end(), true));
}

void NodeView::Take(const NodePlacement& np) {
  for (uint32_t c : np.cpus) cpu_free[c] = false;
  for (uint32_t g : np.gpus) {
    gpu_free[g] = false;
    for (GresView& pool : gres) {
      for (size_t u = 0; u < pool.on_gpu.size(); ++u) {
        if (pool.on_gpu[u] == g) pool.free[u] = false;
      }
    }
  }
  for (const auto& [pool, units] : np.gres) {
    GresView& gv = gres[pool];
    for (uint32_t u : units) {
      gv.free[u] = false;
      if (gv.shards()) gpu_free[gv.on_gpu[u]] = false;
    }
  }
  memory_free_mb -= std::min(memory_free_mb, np.mem_mb);
}

void NodeView::Give(const NodePlacement& np) {
  for (uint32_t c : np.cpus) cpu_free[c] = true;
  for (uint32_t g : np.gpus) {
    gpu_free[g] = true;
    for (GresView& pool : gres) {
      for (size_t u = 0; u < pool.on_gpu.size(); ++u) {
        if (pool.on_gpu[u] == g) pool.free[u] = true;
      }
    }
  }
  std::vector<uint32_t> touched;
  for (const auto& [pool, units] : np.gres) {
    GresView& gv = gres[pool];
    for (uint32_t u : units) {
      gv.free[u] = true;
      if (gv.shards()) touched.push_back(gv.on_gpu[u]);
    }
  }
  // A GPU is whole again once none of its shards is taken.
  for (uint32_t g : touched) {
    bool all_free = true;
    for (const GresView& pool : gres) {
      for (size_t u = 0; u < pool.on_gpu.size(); ++u) {
        if (pool.on_gpu[u] == g && !pool.free[u]) all_free = false;
      }
    }
    if (all_free) gpu_free[g] = true;
  }
  memory_free_mb = std::min(memory_mb, memory_free_mb + np.mem_mb);
}

uint32_t NodeView::FreeCpus() const {
  return static_cast<uint32_t>(std::count(cpu_free.begin(), cpu_free.end(), true));
}

uint32_t NodeView::FreeGpus() const {
  return static_cast<uint32_t>(std::count(gpu_free.begin(), gpu_free.end(), true));
}

bool NodeView::Idle() const {
  for (const GresView& pool : gres) {
    if (pool.FreeUnits() != pool.free.size()) return false;
  }
  return FreeCpus() == cpus && FreeGpus() == gpus && memory_free_mb == memory_mb;
}

const PartitionView* ClusterView::FindPartition(const std::string& name) const {
  for (const auto& p : partitions) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Result<Placement> Place(const JobRequest& request, const ClusterView& view, PlaceMode mode,
                        TimeMs now) {
  MUSTER_RETURN_IF_ERROR(Invalid(request));
  if (mode == PlaceMode::kEver) return Ever(request, view);
  Planner planner(view, now, SchedulerConfig{});
  Planner::Attempt a = planner.TryStart(0, request);
  if (a.kind == Planner::Kind::kStarted) return std::move(a.placement);
  if (a.kind == Planner::Kind::kNotRunnable && a.code != StatusCode::kUnavailable) {
    return Status(a.code, a.detail);
  }
  if (mode == PlaceMode::kNow || a.kind == Planner::Kind::kNotRunnable) {
    return Unavailable(std::string(ReasonName(a.reason)) + ": " + a.detail);
  }
  Planner::Forecast f = planner.EarliestStart(request);
  if (f.start == kNever) {
    return Unavailable("Resources: needs " + Planner::Shape(request) +
                       "; no start time can be forecast: the jobs holding such nodes have no "
                       "time limit, or too few such nodes are up");
  }
  Placement p;
  p.partition = f.partition;
  p.start_ms = f.start;
  for (size_t k = 0; k < f.nodes.size(); ++k) {
    NodePlacement np;
    np.node = f.nodes[k];
    np.ntasks = k < request.tasks_per_node.size() ? request.tasks_per_node[k] : 1;
    p.nodes.push_back(std::move(np));
  }
  return p;
}

std::string DescribeShape(const JobRequest& request) { return Planner::Shape(request); }

void Allocate(const Placement& placement, ClusterView& view) {
  for (const NodePlacement& np : placement.nodes) view.nodes[np.node].Take(np);
}

void Release(const Placement& placement, ClusterView& view) {
  for (const NodePlacement& np : placement.nodes) view.nodes[np.node].Give(np);
}

}  // namespace muster::core
