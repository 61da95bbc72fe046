#include "node_views.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <vector>

#include "muster/common/strings.h"
#include "node_overlay.h"

namespace muster::controller {

NodeViews::NodeViews(const EngineContext& ctx, const NodeManager& nodes,
                     const ResourceLedger& ledger)
    : ctx_(ctx), nodes_(nodes), ledger_(ledger) {}

v1::NodeState NodeViews::StateOf(const NodeEntry& n) const {
  if (n.down) return v1::NODE_DOWN;
  if (!n.registered) return v1::NODE_UNKNOWN;
  if (n.not_responding) return v1::NODE_NOT_RESPONDING;
  if (ledger_.held(n.index).empty()) return v1::NODE_IDLE;
  return ledger_.node(n.index).FreeCpus() == 0 ? v1::NODE_ALLOCATED : v1::NODE_MIXED;
}

void NodeViews::CountResources(ClusterMetrics* m) const {
  std::map<std::string, std::vector<std::string>> partitions;  // node -> its partitions
  for (const auto& p : ctx_.config().partitions) {
    for (const std::string& n : p.nodes) partitions[n].push_back(p.name);
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const NodeEntry& n = nodes_.at(i);
    const core::NodeView& view = ledger_.node(n.index);
    const v1::NodeState st = StateOf(n);
    const bool lost =
        st == v1::NODE_DOWN || st == v1::NODE_UNKNOWN || st == v1::NODE_NOT_RESPONDING;
    std::string state;
    if (!lost && n.rec.drain()) {
      state = st == v1::NODE_IDLE ? "drained" : "draining";
    } else {
      state = v1::NodeState_Name(st).substr(5);  // NODE_IDLE -> idle
      std::transform(state.begin(), state.end(), state.begin(), ::tolower);
    }
    ++m->nodes[state];
    m->nodes_responding += n.session;
    if (n.inventory.gpus_size() > 0) {
      auto& [reported, unhealthy] = m->node_gpu_health[n.name()];
      for (const auto& g : n.inventory.gpus()) {
        ++reported;
        unhealthy += !g.health().empty();
      }
    }
    if (view.gpus == 0) continue;
    const uint32_t allocated = view.gpus - view.FreeGpus();
    const std::string& type = view.gpu_type;
    std::vector<std::string>& parts = partitions[n.name()];
    if (parts.empty()) parts.push_back("");  // in no partition: counted all the same
    for (const std::string& part : parts) {
      if (lost) {
        m->gpus[{"down", type, part}] += view.gpus;
        continue;
      }
      if (allocated > 0) m->gpus[{"allocated", type, part}] += allocated;
      if (view.gpus > allocated) {
        m->gpus[{n.rec.drain() ? "drained" : "idle", type, part}] += view.gpus - allocated;
      }
    }
  }
}

v1::NodeInfo NodeViews::ToNodeInfo(const NodeEntry& n) const {
  const core::NodeView& view = ledger_.node(n.index);
  v1::NodeInfo info;
  info.set_name(n.name());
  info.set_state(StateOf(n));
  info.set_drain(n.rec.drain());
  info.set_reason(n.rec.reason());
  info.set_reason_user(n.rec.reason_user());
  info.set_reason_time_ms(n.rec.reason_time_ms());
  info.set_drained_by(n.rec.drained_by());
  if (!n.rec.drain() && n.down) info.set_reason("Not responding");
  if (n.rec.has_reboot()) {
    info.set_reboot(n.rec.reboot().issued_ms() != 0 ? "issued" : "requested");
    if (info.reason().empty()) info.set_reason(n.rec.reboot().reason());
  }
  for (const auto& p : ctx_.config().partitions) {
    if (std::find(p.nodes.begin(), p.nodes.end(), n.name()) != p.nodes.end()) {
      info.add_partitions(p.name);
    }
  }
  info.set_cpus(view.cpus);
  info.set_cpus_allocated(view.cpus - view.FreeCpus());
  info.set_memory_mb(view.memory_mb);
  info.set_memory_allocated_mb(view.memory_mb - view.memory_free_mb);
  info.set_gpus(view.gpus);
  info.set_gpus_allocated(view.gpus - view.FreeGpus());
  info.set_gpu_type(view.gpu_type);
  info.set_topology(n.config.topology);
  info.set_tmp_disk_mb(n.config.tmp_disk_mb);
  info.set_features(Join(n.config.features, ","));
  info.set_weight(n.config.weight);
  for (const std::string& s : LiveSettingNames(n.rec.settings())) info.add_live(s);
  std::set<uint32_t> whole;  // GPUs taken whole on this node
  for (const auto& [id, placement] : ledger_.held(n.index)) {
    info.add_job_ids(id);
    whole.insert(placement.gpus.begin(), placement.gpus.end());
  }
  info.set_last_heartbeat_ms(n.registered ? n.last_heard_ms : 0);
  info.set_agent_address(n.step_address);
  *info.mutable_gpu_devices() = n.inventory.gpus();
  info.set_topology_source(n.inventory.topology_source());
  info.set_isolation(n.inventory.isolation());
  info.set_packages(n.inventory.packages());
  info.set_cores(n.inventory.cores());
  info.set_threads(n.inventory.threads());
  *info.mutable_numa_nodes() = n.inventory.numa_nodes();
  *info.mutable_hcas() = n.inventory.hcas();
  *info.mutable_pci_gpus() = n.inventory.pci_gpus();
  std::vector<std::string> total, used;
  for (const core::GresView& g : view.gres) {
    const std::string name = g.name + (g.type.empty() ? "" : ":" + g.type);
    total.push_back(name + ":" + std::to_string(g.free.size()));
    // Shards closed because their GPU is taken whole are not in use as shards.
    uint32_t in_use = 0;
    for (size_t u = 0; u < g.free.size(); ++u) {
      if (!g.free[u] && !(g.shards() && whole.count(g.on_gpu[u]))) ++in_use;
    }
    used.push_back(name + ":" + std::to_string(in_use));
  }
  info.set_gres(Join(total, ","));
  info.set_gres_used(Join(used, ","));
  return info;
}

Result<v1::ListNodesResponse> NodeViews::ListNodes(const v1::ListNodesRequest& req) const {
  std::set<std::string> names(req.names().begin(), req.names().end());
  v1::ListNodesResponse resp;
  for (const auto& n : nodes_.all()) {
    if (!names.empty() && !names.count(n.name())) continue;
    *resp.add_nodes() = ToNodeInfo(n);
  }
  return resp;
}

}  // namespace muster::controller
