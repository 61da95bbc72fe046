#include "cluster_index.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string_view>

#include "muster/common/strings.h"

namespace muster::core {
namespace {

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

uint32_t CountFree(const std::vector<bool>& v) {
  return static_cast<uint32_t>(std::count(v.begin(), v.end(), true));
}

// Chooses `want` of the GPUs marked in `free` (the node's free ones, or a subset of them): inside
// the best-fitting link group when one can hold them all, otherwise from the fullest groups
// first, so the set spans as few groups as possible.
std::vector<uint32_t> PickGpusFrom(const NodeView& n, const std::vector<bool>& free,
                                   uint32_t want) {
  std::vector<uint32_t> out;
  if (want == 0) return out;
  if (n.gpu_link_group.size() != free.size()) {
    for (uint32_t g = 0; g < free.size() && out.size() < want; ++g) {
      if (free[g]) out.push_back(g);
    }
    return out;
  }
  std::vector<std::pair<uint32_t, uint32_t>> groups;  // (group, free)
  for (uint32_t g = 0; g < free.size(); ++g) {
    if (!free[g]) continue;
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& e) { return e.first == n.gpu_link_group[g]; });
    if (it == groups.end()) {
      groups.emplace_back(n.gpu_link_group[g], 1);
    } else {
      ++it->second;
    }
  }
  const std::pair<uint32_t, uint32_t>* best = nullptr;
  for (const auto& e : groups) {
    if (e.second >= want &&
        (!best || e.second < best->second || (e.second == best->second && e.first < best->first))) {
      best = &e;
    }
  }
  std::vector<uint32_t> order;
  if (best) {
    order.push_back(best->first);
  } else {
    std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    for (const auto& e : groups) order.push_back(e.first);
  }
  for (uint32_t group : order) {
    for (uint32_t g = 0; g < free.size() && out.size() < want; ++g) {
      if (free[g] && n.gpu_link_group[g] == group) out.push_back(g);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint32_t> PickGpus(const NodeView& n, uint32_t want) {
  return PickGpusFrom(n, n.gpu_free, want);
}

// The known sockets of the node's GPUs (free ones only with `free_only`) as (socket, GPUs there),
// by socket.
std::vector<std::pair<uint32_t, uint32_t>> GpusBySocket(const NodeView& n, bool free_only) {
  std::vector<uint32_t> sockets;
  if (n.gpu_socket.size() != n.gpu_free.size()) return {};
  for (uint32_t g = 0; g < n.gpu_socket.size(); ++g) {
    if (n.gpu_socket[g] != kUnknownSocket && (!free_only || n.gpu_free[g])) {
      sockets.push_back(n.gpu_socket[g]);
    }
  }
  std::sort(sockets.begin(), sockets.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (uint32_t s : sockets) {
    if (out.empty() || out.back().first != s) out.emplace_back(s, 0);
    ++out.back().second;
  }
  return out;
}

// --gpus-per-socket: `per_socket` free GPUs on each of `sockets` sockets. Of the sockets that
// have that many free, those with the fewest first (best fit: fuller sockets stay whole for the
// next such request), then the lower socket; inside each, PickGpusFrom's link-group choice.
// Fewer than asked for when too few sockets have them (FitsNow rules that out).
std::vector<uint32_t> PickGpusBySocket(const NodeView& n, uint32_t per_socket, uint32_t sockets) {
  std::vector<std::pair<uint32_t, uint32_t>> fit;  // (free GPUs, socket)
  for (const auto& [socket, free] : GpusBySocket(n, true)) {
    if (free >= per_socket) fit.emplace_back(free, socket);
  }
  std::sort(fit.begin(), fit.end());
  if (fit.size() > sockets) fit.resize(sockets);
  std::vector<uint32_t> out;
  std::vector<bool> here(n.gpu_free.size());
  for (const auto& [free, socket] : fit) {
    for (uint32_t g = 0; g < here.size(); ++g) here[g] = n.gpu_free[g] && n.gpu_socket[g] == socket;
    for (uint32_t g : PickGpusFrom(n, here, per_socket)) out.push_back(g);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Chooses `want` free CPUs, those on the NUMA nodes of the chosen GPUs first.
std::vector<uint32_t> PickCpus(const NodeView& n, uint32_t want,
                               const std::vector<uint32_t>& gpus) {
  std::vector<uint32_t> out;
  const bool local = !gpus.empty() && n.gpu_numa.size() == n.gpu_free.size() &&
                     n.cpu_numa.size() == n.cpu_free.size();
  if (local) {
    std::vector<uint32_t> numa;
    for (uint32_t g : gpus) numa.push_back(n.gpu_numa[g]);
    for (uint32_t c = 0; c < n.cpu_free.size() && out.size() < want; ++c) {
      if (n.cpu_free[c] && std::find(numa.begin(), numa.end(), n.cpu_numa[c]) != numa.end()) {
        out.push_back(c);
      }
    }
  }
  for (uint32_t c = 0; c < n.cpu_free.size() && out.size() < want; ++c) {
    if (n.cpu_free[c] && (!local || std::find(out.begin(), out.end(), c) == out.end())) {
      out.push_back(c);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

uint32_t MaxSlotCpus(const JobRequest& r) {
  uint32_t tasks = 1;
  if (!r.overcommit) {
    for (uint32_t t : r.tasks_per_node) tasks = std::max(tasks, t);
  }
  return std::max(tasks * std::max<uint32_t>(1, r.cpus_per_task), r.min_cpus_per_node);
}

GangLimits GangLimits::Of(const JobRequest& r) {
  GangLimits l;
  l.max_leaves = r.max_leaves;
  if (r.scope == JobRequest::Scope::kLeaf) l.max_height = 1;
  if (r.scope == JobRequest::Scope::kBlock) l.max_height = 2;
  l.nvlink = r.scope == JobRequest::Scope::kNvlink;
  return l;
}

bool HasFeatures(const NodeView& n, const JobRequest& r) {
  if (r.features.empty()) return true;
  for (const auto& all : r.features) {
    bool ok = true;
    for (const std::string& f : all) {
      if (std::find(n.features.begin(), n.features.end(), f) == n.features.end()) {
        ok = false;
        break;
      }
    }
    if (ok) return true;
  }
  return false;
}

std::string FeatureText(const JobRequest& r) {
  std::vector<std::string> alts;
  for (const auto& all : r.features) alts.push_back(Join(all, "&"));
  return Join(alts, "|");
}

namespace {

// "1 core set aside (--core-spec=1)", "2 threads set aside (--thread-spec=2)".
std::string SpecText(const JobRequest& r) {
  const uint32_t count = r.spec_cores ? r.spec_cores : r.spec_threads;
  const std::string what = r.spec_cores ? "core" : "thread";
  return std::to_string(count) + " " + what + (count == 1 ? "" : "s") + " set aside (--" + what +
         "-spec=" + std::to_string(count) + ")";
}

}  // namespace

std::string CpuShapeMismatch(const NodeView& n, const JobRequest& r, bool unknown_fits) {
  if (!r.AsksForCpuShape()) return "";
  if (n.sockets == 0 || n.cores_per_socket == 0 || n.threads_per_core == 0) {
    return unknown_fits ? "" : "has no known CPU topology (sockets, cores, threads)";
  }
  auto fewer = [](uint32_t want, const char* what) {
    return "has fewer than " + std::to_string(want) + " " + what;
  };
  if (n.sockets < r.min_sockets) return fewer(r.min_sockets, "sockets");
  if (n.cores_per_socket < r.min_cores_per_socket) {
    return fewer(r.min_cores_per_socket, "cores per socket");
  }
  if (n.threads_per_core < r.min_threads_per_core) {
    return fewer(r.min_threads_per_core, "threads per core");
  }
  if (r.gpus_per_socket) {
    const uint32_t sockets = std::max<uint32_t>(1, r.min_sockets);
    if (SocketsWithGpus(n, r.gpus_per_socket, false) < sockets) {
      return "has fewer than " + std::to_string(sockets) + " sockets with " +
             std::to_string(r.gpus_per_socket) + " GPUs each";
    }
  }
  // The slot's tasks (the fullest node's) over its cores or sockets, N per core (socket) at most.
  uint64_t tasks = 1;
  for (uint32_t t : r.tasks_per_node) tasks = std::max<uint64_t>(tasks, t);
  const uint64_t cores = uint64_t{n.sockets} * n.cores_per_socket;
  if (r.ntasks_per_core && tasks > cores * r.ntasks_per_core) {
    const uint64_t want = (tasks + r.ntasks_per_core - 1) / r.ntasks_per_core;
    return "has fewer than " + std::to_string(want) + " cores (" + std::to_string(tasks) +
           " tasks, at most " + std::to_string(r.ntasks_per_core) + " per core)";
  }
  if (r.ntasks_per_socket && tasks > uint64_t{n.sockets} * r.ntasks_per_socket) {
    const uint64_t want = (tasks + r.ntasks_per_socket - 1) / r.ntasks_per_socket;
    return "has fewer than " + std::to_string(want) + " sockets (" + std::to_string(tasks) +
           " tasks, at most " + std::to_string(r.ntasks_per_socket) + " per socket)";
  }
  // -S/--core-spec, --thread-spec: some core (thread) must be left, and the slot must fit in
  // what is.
  if (r.spec_cores || r.spec_threads) {
    const uint64_t threads = cores * n.threads_per_core;
    if (r.spec_cores >= cores || r.spec_threads >= threads) {
      return "has no " + std::string(r.spec_cores ? "core" : "thread") + " left besides the " +
             SpecText(r);
    }
    const uint64_t aside =
        r.spec_cores ? uint64_t{r.spec_cores} * n.threads_per_core : uint64_t{r.spec_threads};
    const uint64_t slot = MaxSlotCpus(r);
    if (n.cpus < aside + slot) {
      return "has fewer than " + std::to_string(slot) + " CPUs besides the " + SpecText(r);
    }
  }
  return "";
}

std::string CpuShapeText(const JobRequest& r) {
  std::vector<std::string> parts;
  auto at_least = [&](uint32_t v, const char* what) {
    if (v) parts.push_back("at least " + std::to_string(v) + " " + what);
  };
  at_least(r.min_sockets, "sockets");
  at_least(r.min_cores_per_socket, "cores per socket");
  at_least(r.min_threads_per_core, "threads per core");
  if (r.gpus_per_socket) {
    const uint32_t sockets = std::max<uint32_t>(1, r.min_sockets);
    parts.push_back(std::to_string(r.gpus_per_socket) + " GPUs on each of " +
                    std::to_string(sockets) + (sockets == 1 ? " socket" : " sockets"));
  }
  auto at_most = [&](uint32_t v, const char* per) {
    if (v)
      parts.push_back("at most " + std::to_string(v) + (v == 1 ? " task per " : " tasks per ") +
                      per);
  };
  at_most(r.ntasks_per_core, "core");
  at_most(r.ntasks_per_socket, "socket");
  if (r.spec_cores || r.spec_threads) {
    parts.push_back(std::to_string(MaxSlotCpus(r)) + " CPUs besides the " + SpecText(r));
  }
  return Join(parts, ", ");
}

Need NeedOf(const JobRequest& r) {
  Need need{MaxSlotCpus(r), r.gpus_per_node, r.mem_per_node_mb, r.exclusive, r.gres};
  if (r.gpus_per_socket) {
    need.gpus_per_socket = r.gpus_per_socket;
    need.gpu_sockets = std::max<uint32_t>(1, r.min_sockets);
  }
  return need;
}

uint32_t SocketsWithGpus(const NodeView& n, uint32_t per_socket, bool free_only) {
  uint32_t count = 0;
  for (const auto& [socket, gpus] : GpusBySocket(n, free_only)) count += gpus >= per_socket ? 1 : 0;
  return count;
}

bool GresMatches(const GresView& pool, const GresRequest& want) {
  return EqualsIgnoreCase(pool.name, want.name) &&
         (want.type.empty() || EqualsIgnoreCase(pool.type, want.type));
}

uint32_t GresUnits(const NodeView& n, const GresRequest& want, bool free_only) {
  uint32_t units = 0;
  for (const GresView& pool : n.gres) {
    if (!GresMatches(pool, want)) continue;
    units += free_only ? pool.FreeUnits() : static_cast<uint32_t>(pool.free.size());
  }
  return units;
}

// Picks `want.count` free units for one request item. Shards come from one GPU when one holds
// them all (the one with the fewest free that does), otherwise from the GPUs with the most free
// shards first.
void PickGres(const NodeView& n, const GresRequest& want, NodePlacement* np) {
  uint32_t left = want.count;
  for (uint32_t p = 0; p < n.gres.size() && left > 0; ++p) {
    const GresView& pool = n.gres[p];
    if (!GresMatches(pool, want)) continue;
    std::vector<uint32_t> units;
    if (pool.shards()) {
      std::map<uint32_t, std::vector<uint32_t>> by_gpu;
      for (uint32_t u = 0; u < pool.free.size(); ++u) {
        if (pool.free[u]) by_gpu[pool.on_gpu[u]].push_back(u);
      }
      std::vector<const std::vector<uint32_t>*> order;
      for (const auto& [g, list] : by_gpu) order.push_back(&list);
      std::stable_sort(order.begin(), order.end(),
                       [](const auto* a, const auto* b) { return a->size() > b->size(); });
      const std::vector<uint32_t>* one = nullptr;
      for (const auto* list : order) {
        if (list->size() >= left && (!one || list->size() < one->size())) one = list;
      }
      if (one) order = {one};
      for (const auto* list : order) {
        for (uint32_t u : *list) {
          if (units.size() < left) units.push_back(u);
        }
      }
    } else {
      for (uint32_t u = 0; u < pool.free.size() && units.size() < left; ++u) {
        if (pool.free[u]) units.push_back(u);
      }
    }
    if (units.empty()) continue;
    left -= static_cast<uint32_t>(units.size());
    std::sort(units.begin(), units.end());
    np->gres.emplace_back(p, std::move(units));
  }
}

bool TypeMatches(const NodeView& n, const JobRequest& r) {
  return r.gpus_per_node == 0 || r.gpu_type.empty() || EqualsIgnoreCase(n.gpu_type, r.gpu_type);
}

ClusterIndex::ClusterIndex(ClusterView* view) : view_(view) {
  const auto& nodes = view_->nodes;
  const uint32_t n = static_cast<uint32_t>(nodes.size());

  // Topology order: by path, then by node index. Nodes with the same path are contiguous, and a
  // path sorts before its extensions, so every domain is a contiguous run of positions.
  std::vector<std::vector<std::string_view>> paths(n);
  for (uint32_t i = 0; i < n; ++i) paths[i] = SplitPath(nodes[i].topology);
  node_at_.resize(n);
  std::iota(node_at_.begin(), node_at_.end(), 0);
  std::stable_sort(node_at_.begin(), node_at_.end(),
                   [&](NodeIndex a, NodeIndex b) { return paths[a] < paths[b]; });
  pos_of_.resize(n);
  leaf_of_.resize(n);
  for (uint32_t p = 0; p < n; ++p) pos_of_[node_at_[p]] = p;

  // Domains in preorder: a stack of the open path.
  domains_.push_back({});
  std::vector<uint32_t> open = {0};
  std::vector<std::string_view> open_path;
  auto close_top = [&] {
    domains_[open.back()].end = static_cast<uint32_t>(domains_.size());
    open.pop_back();
    open_path.pop_back();
  };
  for (uint32_t p = 0; p < n; ++p) {
    const auto& path = paths[node_at_[p]];
    size_t common = 0;
    while (common < open_path.size() && common < path.size() && open_path[common] == path[common])
      ++common;
    while (open_path.size() > common) close_top();
    while (open_path.size() < path.size()) {
      Domain d;
      d.parent = static_cast<int32_t>(open.back());
      std::string name = open_path.empty() ? "" : domains_[open.back()].name + "/";
      d.name = name + std::string(path[open_path.size()]);
      open_path.push_back(path[open_path.size()]);
      open.push_back(static_cast<uint32_t>(domains_.size()));
      domains_.push_back(std::move(d));
    }
    Domain& leaf = domains_[open.back()];
    if (leaf.node_end == 0 || leaf.node_end != p) leaf.node_begin = p;
    leaf.node_end = p + 1;
    leaf_of_[p] = open.back();
  }
  while (!open_path.empty()) close_top();
  domains_[0].end = static_cast<uint32_t>(domains_.size());
  for (size_t d = domains_.size(); d-- > 1;) {
    Domain& parent = domains_[static_cast<size_t>(domains_[d].parent)];
    parent.height = std::max(parent.height, domains_[d].height + 1);
  }
  uint32_t max_height = domains_[0].height;
  by_height_.assign(max_height + 1, {});
  for (uint32_t d = 0; d < domains_.size(); ++d) by_height_[domains_[d].height].push_back(d);

  // Dynamic state and bitsets.
  uint32_t max_gpus = 0;
  free_cpus_.resize(n);
  free_gpus_.resize(n);
  has_gres_.resize(n);
  up_ = NodeSet(n);
  idle_ = NodeSet(n);
  for (uint32_t i = 0; i < n; ++i) {
    free_cpus_[i] = CountFree(nodes[i].cpu_free);
    free_gpus_[i] = CountFree(nodes[i].gpu_free);
    has_gres_[i] = !nodes[i].gres.empty();
    max_gpus = std::max(max_gpus, nodes[i].gpus);
    if (nodes[i].schedulable) up_.Set(pos_of_[i]);
    if (Idle(i)) idle_.Set(pos_of_[i]);
  }
  gpu_bucket_.assign(max_gpus + 1, NodeSet(n));
  for (uint32_t i = 0; i < n; ++i) {
    gpu_bucket_[std::min(free_gpus_[i], max_gpus)].Set(pos_of_[i]);
  }
  // Weight tiers: nearly always one (every node weighs 1), which costs no sort and no sets.
  bool one_weight = true;
  for (uint32_t i = 1; i < n && one_weight; ++i) one_weight = nodes[i].weight == nodes[0].weight;
  if (!one_weight) {
    std::map<uint32_t, std::vector<uint32_t>> by_weight;
    for (uint32_t p = 0; p < n; ++p) by_weight[nodes[node_at_[p]].weight].push_back(p);
    NodeSet upto(n);
    for (const auto& [w, positions] : by_weight) {
      for (uint32_t p : positions) upto.Set(p);
      weight_tiers_.push_back(upto);
    }
  }
  std::map<std::string, int32_t> nvlink_ids;
  nvlink_of_.assign(n, -1);
  for (uint32_t i = 0; i < n; ++i) {
    const std::string& d = nodes[i].nvlink_domain;
    if (d.empty()) continue;
    auto [it, inserted] = nvlink_ids.try_emplace(d, static_cast<int32_t>(nvlink_ids.size()));
    nvlink_of_[pos_of_[i]] = it->second;
  }
  for (const PartitionView& p : view_->partitions) {
    NodeSet s(n);
    for (NodeIndex i : p.nodes) {
      if (i < n) s.Set(pos_of_[i]);
    }
    partition_sets_.push_back(std::move(s));
  }
}

bool ClusterIndex::Idle(NodeIndex n) const {
  const NodeView& v = view_->nodes[n];
  for (size_t p = 0; has_gres_[n] && p < v.gres.size(); ++p) {
    if (v.gres[p].FreeUnits() != v.gres[p].free.size()) return false;
  }
  return free_cpus_[n] == v.cpus && free_gpus_[n] == v.gpus && v.memory_free_mb == v.memory_mb;
}

bool ClusterIndex::FitsCapacity(NodeIndex n, const JobRequest& r, const Need& need,
                                bool unknown_shape_fits) const {
  const NodeView& v = view_->nodes[n];
  if (need.gpus > 0 && (!TypeMatches(v, r) || v.gpus < need.gpus)) return false;
  for (const GresRequest& g : need.gres) {
    if (GresUnits(v, g, false) < g.count) return false;
  }
  return v.cpus >= need.cpus && v.memory_mb >= need.mem_mb && v.tmp_disk_mb >= r.min_tmp_disk_mb &&
         HasFeatures(v, r) && HasCpuShape(v, r, unknown_shape_fits);
}

int64_t ClusterIndex::FindNode(const std::string& name) const {
  if (by_name_.empty()) {
    for (uint32_t i = 0; i < view_->nodes.size(); ++i) by_name_[view_->nodes[i].name] = pos_of_[i];
  }
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : static_cast<int64_t>(it->second);
}

bool ClusterIndex::FitsNow(NodeIndex n, const Need& need) const {
  if (need.exclusive) return Idle(n);
  for (const GresRequest& g : need.gres) {
    if (!has_gres_[n] || GresUnits(view_->nodes[n], g, true) < g.count) return false;
  }
  return free_gpus_[n] >= need.gpus && free_cpus_[n] >= need.cpus &&
         view_->nodes[n].memory_free_mb >= need.mem_mb && GpuSocketsFree(view_->nodes[n], need);
}

NodeSet ClusterIndex::CapacitySet(size_t partition, const JobRequest& r, const Need& need,
                                  bool up_only, bool unknown_shape_fits) const {
  NodeSet out(size());
  partition_sets_[partition].ForEach([&](size_t pos) {
    if (up_only && !up_.Test(pos)) return;
    if (FitsCapacity(node_at_[pos], r, need, unknown_shape_fits)) out.Set(pos);
  });
  for (const std::string& name : r.excluded_nodes) {
    if (int64_t pos = FindNode(name); pos >= 0) out.Reset(static_cast<size_t>(pos));
  }
  return out;
}

void ClusterIndex::FreeNowSet(const NodeSet& base, const Need& need, NodeSet* out) const {
  if (need.exclusive) {
    out->AssignAnd(base, idle_);
    return;
  }
  // Nodes with enough free GPUs, from the buckets; CPUs and memory are checked per node.
  if (need.gpus == 0) {
    *out = base;
  } else {
    *out = NodeSet(size());
    for (uint32_t k = need.gpus; k < gpu_bucket_.size(); ++k) *out |= gpu_bucket_[k];
    *out &= base;
  }
  if (need.cpus == 0 && need.mem_mb == 0 && need.gres.empty() && need.gpus_per_socket == 0) return;
  out->ForEach([&](size_t pos) {
    if (!FitsNow(node_at_[pos], need)) out->Reset(pos);
  });
}

uint32_t ClusterIndex::LeavesNeeded(uint32_t domain, uint32_t count) const {
  std::vector<uint32_t> sizes;
  for (uint32_t d = domain; d < domains_[domain].end; ++d) {
    if (direct_[d]) sizes.push_back(direct_[d]);
  }
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  uint32_t sum = 0, k = 0;
  for (uint32_t s : sizes) {
    sum += s;
    ++k;
    if (sum >= count) break;
  }
  return k;
}

void ClusterIndex::TakeBestNodes(uint32_t leaf, uint32_t count, const NodeSet& cand,
                                 std::vector<NodeIndex>* out) const {
  std::vector<uint32_t> here;
  const Domain& d = domains_[leaf];
  for (size_t pos = cand.Next(d.node_begin); pos < d.node_end; pos = cand.Next(pos + 1)) {
    here.push_back(static_cast<uint32_t>(pos));
  }
  if (here.size() > count) {
    // Best fit: the nodes with the least free, so emptier nodes stay whole.
    std::stable_sort(here.begin(), here.end(), [&](uint32_t a, uint32_t b) {
      NodeIndex na = node_at_[a], nb = node_at_[b];
      if (free_gpus_[na] != free_gpus_[nb]) return free_gpus_[na] < free_gpus_[nb];
      return free_cpus_[na] < free_cpus_[nb];
    });
    here.resize(count);
  }
  for (uint32_t pos : here) out->push_back(node_at_[pos]);
}

void ClusterIndex::FillFromDomain(uint32_t domain, uint32_t count, const NodeSet& cand,
                                  std::vector<NodeIndex>* out) const {
  std::vector<uint32_t> leaves;
  for (uint32_t d = domain; d < domains_[domain].end; ++d) {
    if (direct_[d]) leaves.push_back(d);
  }
  std::stable_sort(leaves.begin(), leaves.end(),
                   [&](uint32_t a, uint32_t b) { return direct_[a] > direct_[b]; });
  // Whole leaves, fullest first, while the rest does not fit in the next one; then the
  // best-fitting leaf for the remainder. This spans the fewest leaves possible.
  size_t i = 0;
  uint32_t need = count;
  while (i < leaves.size() && need > 0) {
    uint32_t cap = direct_[leaves[i]];
    if (cap >= need) break;
    // Would the remaining leaves still make up `need - cap` with fewer whole takes? Greedy
    // largest-first is optimal for the count of leaves, so take this one whole.
    TakeBestNodes(leaves[i], cap, cand, out);
    need -= cap;
    ++i;
  }
  if (need == 0) return;
  size_t best = i;
  for (size_t j = i; j < leaves.size(); ++j) {
    if (direct_[leaves[j]] >= need && direct_[leaves[j]] < direct_[leaves[best]]) best = j;
  }
  TakeBestNodes(leaves[best], need, cand, out);
}

std::vector<NodeIndex> ClusterIndex::ChooseGang(const NodeSet& cand, uint32_t count,
                                                const GangLimits& limits) const {
  std::vector<NodeIndex> out;
  if (count == 0) return out;
  if (placement_ != PlacementMode::kTopology && !limits.any()) {
    // The baselines, where the job asks nothing of the topology.
    if (cand.Count() < count) return out;
    std::vector<size_t> positions;
    cand.ForEach([&](size_t pos) { positions.push_back(pos); });
    if (placement_ == PlacementMode::kRandom) {
      // A partial Fisher-Yates shuffle driven by splitmix64.
      for (size_t i = 0; i < count; ++i) {
        draws_ += 0x9e3779b97f4a7c15ULL;
        uint64_t z = draws_;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        std::swap(positions[i], positions[i + z % (positions.size() - i)]);
      }
    }
    for (size_t i = 0; i < count; ++i) out.push_back(node_at_[positions[i]]);
    std::sort(out.begin(), out.end());
    return out;
  }
  if (limits.nvlink && count > 1) {
    // The best-fitting NVLink domain that holds the whole gang, then the usual choice inside it.
    std::map<int32_t, uint32_t> per_domain;
    cand.ForEach([&](size_t pos) {
      if (nvlink_of_[pos] >= 0) ++per_domain[nvlink_of_[pos]];
    });
    int32_t best = -1;
    for (const auto& [id, n] : per_domain) {
      if (n >= count && (best < 0 || n < per_domain[best])) best = id;
    }
    if (best < 0) return out;
    NodeSet inside(size());
    cand.ForEach([&](size_t pos) {
      if (nvlink_of_[pos] == best) inside.Set(pos);
    });
    GangLimits rest = limits;
    rest.nvlink = false;
    return ChooseGang(inside, count, rest);
  }
  if (count == 1) {
    size_t best = cand.size();
    cand.ForEach([&](size_t pos) {
      if (best == cand.size()) {
        best = pos;
        return;
      }
      NodeIndex a = node_at_[pos], b = node_at_[best];
      if (free_gpus_[a] < free_gpus_[b] ||
          (free_gpus_[a] == free_gpus_[b] && free_cpus_[a] < free_cpus_[b])) {
        best = pos;
      }
    });
    if (best != cand.size()) out.push_back(node_at_[best]);
    return out;
  }
  if (cand.Count() < count) return out;

  direct_.assign(domains_.size(), 0);
  total_.assign(domains_.size(), 0);
  cand.ForEach([&](size_t pos) { ++direct_[leaf_of_[pos]]; });
  for (size_t d = domains_.size(); d-- > 0;) {
    total_[d] += direct_[d];
    if (domains_[d].parent >= 0) total_[static_cast<size_t>(domains_[d].parent)] += total_[d];
  }
  for (size_t h = 1; h < by_height_.size(); ++h) {
    if (limits.max_height && h > limits.max_height) break;
    int64_t best = -1;
    uint32_t best_leaves = 0, best_left = 0;
    for (uint32_t d : by_height_[h]) {
      if (total_[d] < count) continue;
      uint32_t leaves = LeavesNeeded(d, count);
      if (limits.max_leaves && leaves > limits.max_leaves) continue;
      uint32_t left = total_[d] - count;
      if (best < 0 || leaves < best_leaves || (leaves == best_leaves && left < best_left)) {
        best = d;
        best_leaves = leaves;
        best_left = left;
      }
    }
    if (best >= 0) {
      FillFromDomain(static_cast<uint32_t>(best), count, cand, &out);
      std::sort(out.begin(), out.end());
      return out;
    }
  }
  return out;  // nothing within the limits
}

std::vector<NodeIndex> ClusterIndex::ChooseGangWith(const NodeSet& cand, uint32_t count,
                                                    const GangLimits& limits,
                                                    const NodeSet& forced) const {
  std::vector<NodeIndex> out;
  std::vector<uint32_t> fpos;
  forced.ForEach([&](size_t pos) { fpos.push_back(static_cast<uint32_t>(pos)); });
  if (fpos.empty()) return ChooseGang(cand, count, limits);
  if (fpos.size() > count || !cand.Contains(forced)) return out;
  if (limits.nvlink) {
    const int32_t id = nvlink_of_[fpos[0]];
    for (uint32_t pos : fpos) {
      if (id < 0 || nvlink_of_[pos] != id) return out;
    }
    NodeSet inside(size());
    cand.ForEach([&](size_t pos) {
      if (nvlink_of_[pos] == id) inside.Set(pos);
    });
    GangLimits rest = limits;
    rest.nvlink = false;
    return ChooseGangWith(inside, count, rest, forced);
  }
  NodeSet others = cand;
  others.AndNot(forced);
  auto holds_all = [&](uint32_t d) {
    return std::all_of(fpos.begin(), fpos.end(), [&](uint32_t pos) {
      return leaf_of_[pos] >= d && leaf_of_[pos] < domains_[d].end;
    });
  };
  // The domains that hold every forced node: the lowest common one and its ancestors.
  int64_t d = leaf_of_[fpos[0]];
  while (d >= 0 && !holds_all(static_cast<uint32_t>(d)))
    d = domains_[static_cast<size_t>(d)].parent;
  const uint32_t extra = count - static_cast<uint32_t>(fpos.size());
  for (; d >= 0; d = domains_[static_cast<size_t>(d)].parent) {
    const Domain& dom = domains_[static_cast<size_t>(d)];
    if (limits.max_height && dom.height > limits.max_height) break;
    direct_.assign(domains_.size(), 0);
    uint32_t inside = 0;
    others.ForEach([&](size_t pos) {
      if (leaf_of_[pos] >= d && leaf_of_[pos] < dom.end) {
        ++direct_[leaf_of_[pos]];
        ++inside;
      }
    });
    if (inside < extra) continue;
    out.clear();
    for (uint32_t pos : fpos) out.push_back(node_at_[pos]);
    // The forced nodes' own leaves first, then the usual fewest-leaves fill for the rest.
    uint32_t need = extra;
    for (uint32_t pos : fpos) {
      uint32_t leaf = leaf_of_[pos];
      if (need == 0 || direct_[leaf] == 0) continue;
      uint32_t take = std::min(need, direct_[leaf]);
      TakeBestNodes(leaf, take, others, &out);
      need -= take;
      direct_[leaf] = 0;
    }
    if (need > 0) FillFromDomain(static_cast<uint32_t>(d), need, others, &out);
    if (limits.max_leaves && LeavesSpanned(out) > limits.max_leaves) continue;
    std::sort(out.begin(), out.end());
    return out;
  }
  out.clear();
  return out;
}

uint32_t ClusterIndex::LeavesSpanned(const std::vector<NodeIndex>& nodes) const {
  std::vector<uint32_t> leaves;
  for (NodeIndex n : nodes) leaves.push_back(leaf_of_[pos_of_[n]]);
  std::sort(leaves.begin(), leaves.end());
  return static_cast<uint32_t>(std::unique(leaves.begin(), leaves.end()) - leaves.begin());
}

Placement ClusterIndex::Build(const JobRequest& r, const std::string& partition,
                              const std::vector<NodeIndex>& nodes) const {
  Placement out;
  out.partition = partition;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const NodeView& n = view_->nodes[nodes[k]];
    NodePlacement np;
    np.node = nodes[k];
    np.ntasks = k < r.tasks_per_node.size() ? r.tasks_per_node[k] : 1;
    if (r.exclusive) {
      np.gpus = PickGpus(n, n.gpus);
      np.cpus = PickCpus(n, n.cpus, np.gpus);
      np.mem_mb = n.memory_free_mb;
      for (uint32_t p = 0; p < n.gres.size(); ++p) {
        std::vector<uint32_t> all(n.gres[p].free.size());
        std::iota(all.begin(), all.end(), 0);
        // Shards of GPUs taken whole are implied by the GPUs.
        if (!n.gres[p].shards() && !all.empty()) np.gres.emplace_back(p, std::move(all));
      }
    } else {
      np.gpus = r.gpus_per_socket
                    ? PickGpusBySocket(n, r.gpus_per_socket, std::max<uint32_t>(1, r.min_sockets))
                    : PickGpus(n, r.gpus_per_node);
      np.cpus = PickCpus(n,
                         std::max((r.overcommit ? 1 : std::max<uint32_t>(1, np.ntasks)) *
                                      std::max<uint32_t>(1, r.cpus_per_task),
                                  r.min_cpus_per_node),
                         np.gpus);
      np.mem_mb = r.mem_per_node_mb;
      for (const GresRequest& g : r.gres) PickGres(n, g, &np);
    }
    out.nodes.push_back(std::move(np));
  }
  return out;
}

void ClusterIndex::Rebucket(NodeIndex n, uint32_t old_gpus) {
  uint32_t pos = pos_of_[n];
  uint32_t top = MaxGpus();
  gpu_bucket_[std::min(old_gpus, top)].Reset(pos);
  gpu_bucket_[std::min(free_gpus_[n], top)].Set(pos);
  idle_.Assign(pos, Idle(n));
}

void ClusterIndex::Take(const Placement& p) {
  for (const NodePlacement& np : p.nodes) {
    NodeView& n = view_->nodes[np.node];
    uint32_t old_gpus = free_gpus_[np.node];
    for (uint32_t c : np.cpus) {
      if (n.cpu_free[c]) --free_cpus_[np.node];
    }
    n.Take(np);
    free_gpus_[np.node] = CountFree(n.gpu_free);  // shards taken also close their GPUs
    Rebucket(np.node, old_gpus);
  }
}

}  // namespace muster::core
