#include "resource_ledger.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

namespace muster::controller {
namespace {

// The node's GRES pools from its config: MIG slices and other GRES as configured, then the
// shards of every whole GPU.
std::vector<core::GresView> GresPools(const NodeConfig& nc) {
  std::vector<core::GresView> pools;
  for (const auto& g : nc.gres) {
    core::GresView v;
    v.name = g.name;
    v.type = g.type;
    v.free.assign(g.count, true);
    pools.push_back(std::move(v));
  }
  if (nc.shards_per_gpu > 0 && nc.gpus > 0) {
    core::GresView v;
    v.name = "shard";
    v.free.assign(nc.gpus * nc.shards_per_gpu, true);
    for (uint32_t u = 0; u < nc.gpus * nc.shards_per_gpu; ++u) {
      v.on_gpu.push_back(u / nc.shards_per_gpu);
    }
    pools.push_back(std::move(v));
  }
  return pools;
}

// The pool of `view` that GRES units recorded under (name, type) belong to, or -1.
int32_t PoolOf(const core::NodeView& view, const v1::GresUnits& g) {
  for (size_t p = 0; p < view.gres.size(); ++p) {
    if (view.gres[p].name == g.name() && view.gres[p].type == g.type()) {
      return static_cast<int32_t>(p);
    }
  }
  return -1;
}

}  // namespace

ResourceLedger::ResourceLedger(const Config& config) {
  for (const NodeConfig& nc : config.nodes) {
    Node n;
    n.view =
        core::NodeView::Empty(nc.name, nc.cpus, nc.memory_mb, nc.gpus, nc.gpu_type, nc.topology);
    n.view.schedulable = false;
    n.view.features = nc.features;
    n.view.tmp_disk_mb = nc.tmp_disk_mb;
    n.view.nvlink_domain = nc.nvlink_domain;
    n.view.weight = nc.weight;
    n.view.gres = GresPools(nc);
    nodes_.push_back(std::move(n));
  }
}

core::NodePlacement ResourceLedger::PlacementOf(const v1::NodeAllocation& na, size_t i) const {
  const core::NodeView& view = nodes_[i].view;
  core::NodePlacement np;
  np.node = static_cast<core::NodeIndex>(i);
  for (uint32_t c : na.cpu_ids()) {
    if (c < view.cpus) np.cpus.push_back(c);
  }
  for (uint32_t g : na.gpu_indices()) {
    if (g < view.gpus) np.gpus.push_back(g);
  }
  np.mem_mb = na.mem_mb();
  np.ntasks = na.ntasks();
  for (const v1::GresUnits& g : na.gres()) {
    int32_t pool = PoolOf(view, g);
    if (pool < 0) continue;
    std::vector<uint32_t> units;
    for (uint32_t u : g.units()) {
      if (u < view.gres[static_cast<size_t>(pool)].free.size()) units.push_back(u);
    }
    np.gres.emplace_back(static_cast<uint32_t>(pool), std::move(units));
  }
  return np;
}

void ResourceLedger::Hold(uint64_t job, const core::Placement& placement) {
  for (const core::NodePlacement& np : placement.nodes) {
    Node& n = nodes_[np.node];
    n.view.Take(np);
    n.held[job] = np;
  }
}

void ResourceLedger::HoldRecovered(
    const v1::JobRecord& rec,
    const std::function<std::optional<size_t>(const std::string&)>& index_of) {
  std::set<std::string> holding;
  // A suspended job's CPUs are parked: its preemptor may hold them now. A run that ended
  // suspended holds none.
  const bool suspended = rec.state() == v1::RUNNING && rec.suspend_time_ms() > 0;
  const bool no_cpus = suspended || rec.ended_suspended();
  if (rec.state() == v1::RUNNING) {
    for (const auto& na : rec.allocation().nodes()) holding.insert(na.node());
  }
  for (const auto& n : rec.completing_nodes()) holding.insert(n);
  for (const auto& na : rec.allocation().nodes()) {
    if (!holding.count(na.node())) continue;
    std::optional<size_t> i = index_of(na.node());
    if (!i) continue;
    Node& node = nodes_[*i];
    core::NodeView& v = node.view;
    core::NodePlacement np = PlacementOf(na, *i);
    std::vector<uint32_t> parked;
    if (no_cpus) parked = std::exchange(np.cpus, {});
    // Never hold anything twice: drop (and report) what the node does not have (the config
    // changed) or what is already held.
    auto keep = [&](const std::string& what, std::vector<uint32_t>& ids, auto&& is_free,
                    size_t recorded) {
      if (ids.size() < recorded) {
        spdlog::error("job={} node={} holds {} {} unit(s) the node does not have", rec.id(),
                      na.node(), recorded - ids.size(), what);
      }
      std::erase_if(ids, [&](uint32_t u) {
        if (is_free(u)) return false;
        spdlog::error("job={} node={} {} {} is already held; not held twice", rec.id(), na.node(),
                      what, u);
        return true;
      });
    };
    keep(
        "cpu", np.cpus, [&](uint32_t c) { return v.cpu_free[c]; },
        no_cpus ? 0 : static_cast<size_t>(na.cpu_ids_size()));
    keep(
        "gpu", np.gpus, [&](uint32_t g) { return v.gpu_free[g]; },
        static_cast<size_t>(na.gpu_indices_size()));
    for (const v1::GresUnits& g : na.gres()) {
      if (PoolOf(v, g) < 0) {
        spdlog::error("job={} node={} holds {} unit(s) of {}:{}, which the node no longer has",
                      rec.id(), na.node(), g.units_size(), g.name(), g.type());
      }
    }
    for (auto& [pool, units] : np.gres) {
      const core::GresView& gv = v.gres[pool];
      size_t recorded = 0;
      for (const v1::GresUnits& g : na.gres()) {
        if (PoolOf(v, g) == static_cast<int32_t>(pool)) recorded += g.units_size();
      }
      keep(
          gv.name, units, [&](uint32_t u) { return gv.free[u]; }, recorded);
    }
    v.Take(np);
    node.held[rec.id()] = std::move(np);
    if (suspended) {
      node.parked[rec.id()] = std::move(parked);
      ++parked_jobs_[rec.id()];
    }
  }
}

bool ResourceLedger::Release(uint64_t job, size_t i) {
  Node& n = nodes_[i];
  if (n.parked.erase(job)) Unparked(job);
  auto it = n.held.find(job);
  if (it == n.held.end()) return false;
  n.view.Give(it->second);
  n.held.erase(it);
  return true;
}

void ResourceLedger::Park(uint64_t job, size_t i) {
  Node& n = nodes_[i];
  auto it = n.held.find(job);
  if (it == n.held.end() || n.parked.count(job)) return;
  core::NodePlacement cpus;
  cpus.node = static_cast<core::NodeIndex>(i);
  cpus.cpus = std::move(it->second.cpus);
  it->second.cpus.clear();
  n.view.Give(cpus);
  n.parked[job] = std::move(cpus.cpus);
  ++parked_jobs_[job];
}

bool ResourceLedger::CpusBack(uint64_t job, size_t i) const {
  const Node& n = nodes_[i];
  auto it = n.parked.find(job);
  if (it == n.parked.end()) return true;
  for (uint32_t c : it->second) {
    if (!n.view.cpu_free[c]) return false;
  }
  return true;
}

void ResourceLedger::Unpark(uint64_t job, size_t i) {
  Node& n = nodes_[i];
  auto it = n.parked.find(job);
  if (it == n.parked.end()) return;
  core::NodePlacement cpus;
  cpus.node = static_cast<core::NodeIndex>(i);
  cpus.cpus = std::move(it->second);
  n.parked.erase(it);
  Unparked(job);
  auto held = n.held.find(job);
  if (held == n.held.end()) return;
  n.view.Take(cpus);
  held->second.cpus = std::move(cpus.cpus);
}

void ResourceLedger::DropParked(uint64_t job, size_t i) {
  if (nodes_[i].parked.erase(job)) Unparked(job);
}

void ResourceLedger::Unparked(uint64_t job) {
  auto it = parked_jobs_.find(job);
  if (it != parked_jobs_.end() && --it->second == 0) parked_jobs_.erase(it);
}

bool ResourceLedger::Fits(const core::Placement& placement) const {
  for (const core::NodePlacement& np : placement.nodes) {
    if (np.node >= nodes_.size()) return false;
    const core::NodeView& v = nodes_[np.node].view;
    for (uint32_t c : np.cpus) {
      if (c >= v.cpu_free.size() || !v.cpu_free[c]) return false;
    }
    for (uint32_t g : np.gpus) {
      if (g >= v.gpu_free.size() || !v.gpu_free[g]) return false;
    }
    if (v.memory_free_mb < np.mem_mb) return false;
    for (const auto& [pool, units] : np.gres) {
      if (pool >= v.gres.size()) return false;
      for (uint32_t u : units) {
        if (u >= v.gres[pool].free.size() || !v.gres[pool].free[u]) return false;
      }
    }
  }
  return true;
}

v1::Allocation ResourceLedger::ToAllocation(const core::Placement& placement) const {
  v1::Allocation a;
  a.set_partition(placement.partition);
  for (const core::NodePlacement& np : placement.nodes) {
    const core::NodeView& v = nodes_[np.node].view;
    v1::NodeAllocation* na = a.add_nodes();
    na->set_node(v.name);
    for (uint32_t c : np.cpus) na->add_cpu_ids(c);
    for (uint32_t g : np.gpus) na->add_gpu_indices(g);
    na->set_mem_mb(np.mem_mb);
    na->set_ntasks(np.ntasks);
    for (const auto& [pool, units] : np.gres) {
      const core::GresView& gv = v.gres[pool];
      v1::GresUnits* g = na->add_gres();
      g->set_name(gv.name);
      g->set_type(gv.type);
      for (uint32_t u : units) {
        g->add_units(u);
        if (gv.shards()) g->add_on_gpu(gv.on_gpu[u]);
      }
    }
  }
  return a;
}

void ResourceLedger::AddRunningUse(core::ClusterView& view,
                                   const std::function<TimeMs(uint64_t)>& end_of) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const auto& [job, np] : nodes_[i].held) {
      core::RunningUse use{job,
                           static_cast<core::NodeIndex>(i),
                           end_of(job),
                           static_cast<uint32_t>(np.cpus.size()),
                           static_cast<uint32_t>(np.gpus.size()),
                           np.mem_mb,
                           {}};
      if (!np.gres.empty()) {
        use.gres.assign(nodes_[i].view.gres.size(), 0);
        for (const auto& [pool, units] : np.gres) {
          use.gres[pool] += static_cast<uint32_t>(units.size());
        }
      }
      view.running.push_back(std::move(use));
    }
  }
}

Status ResourceLedger::CheckInvariants() const {
  for (const Node& node : nodes_) {
    const core::NodeView& v = node.view;
    const std::string& name = v.name;
    std::vector<int> cpu_use(v.cpus, 0), gpu_use(v.gpus, 0), shard_use(v.gpus, 0);
    std::vector<std::vector<int>> gres_use;
    for (const core::GresView& gv : v.gres) gres_use.emplace_back(gv.free.size(), 0);
    uint64_t mem = 0;
    for (const auto& [job, np] : node.held) {
      for (uint32_t c : np.cpus) {
        if (c >= cpu_use.size() || ++cpu_use[c] > 1) {
          return Internal("cpu " + std::to_string(c) + " on " + name + " is held twice");
        }
      }
      for (uint32_t g : np.gpus) {
        if (g >= gpu_use.size() || ++gpu_use[g] > 1) {
          return Internal("gpu " + std::to_string(g) + " on " + name + " is held twice");
        }
      }
      mem += np.mem_mb;
      for (const auto& [pool, units] : np.gres) {
        if (pool >= gres_use.size()) return Internal("job holds an unknown GRES on " + name);
        const core::GresView& gv = v.gres[pool];
        for (uint32_t u : units) {
          auto& use = gres_use[pool];
          if (u >= use.size() || ++use[u] > 1) {
            return Internal(gv.name + " unit " + std::to_string(u) + " on " + name +
                            " is held twice");
          }
          if (gv.shards()) ++shard_use[gv.on_gpu[u]];
        }
      }
    }
    for (size_t p = 0; p < gres_use.size(); ++p) {
      const core::GresView& gv = v.gres[p];
      for (size_t u = 0; u < gres_use[p].size(); ++u) {
        const bool closed = gv.shards() && gpu_use[gv.on_gpu[u]] > 0;
        if ((gres_use[p][u] == 0 && !closed) != static_cast<bool>(gv.free[u])) {
          return Internal(gv.name + " free map of " + name + " disagrees with its jobs");
        }
      }
    }
    for (size_t g = 0; g < shard_use.size(); ++g) {
      if (shard_use[g] > 0 && gpu_use[g] > 0) {
        return Internal("gpu " + std::to_string(g) + " on " + name +
                        " is held whole and as shards");
      }
      gpu_use[g] += shard_use[g];
    }
    for (size_t c = 0; c < cpu_use.size(); ++c) {
      if ((cpu_use[c] == 0) != static_cast<bool>(v.cpu_free[c])) {
        return Internal("cpu free map of " + name + " disagrees with its jobs");
      }
    }
    for (size_t g = 0; g < gpu_use.size(); ++g) {
      if ((gpu_use[g] == 0) != static_cast<bool>(v.gpu_free[g])) {
        return Internal("gpu free map of " + name + " disagrees with its jobs");
      }
    }
    if (v.memory_free_mb != v.memory_mb - std::min(mem, v.memory_mb)) {
      return Internal("memory of " + name + " disagrees with its jobs");
    }
  }
  return Status::Ok();
}

}  // namespace muster::controller
