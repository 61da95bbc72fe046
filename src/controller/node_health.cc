// NodeManager: hardware reconciliation (what an agent reports against the configuration, as
// Slurm's gres.c does) and the drains that follow from checks and health.
#include <spdlog/spdlog.h>

#include <map>

#include "muster/common/strings.h"
#include "node_manager.h"

namespace muster::controller {

std::string NodeManager::HardwareShortfall(const NodeEntry& node) const {
  const NodeConfig& c = node.config;
  const v1::NodeInventory& inv = node.inventory;
  std::vector<std::string> missing;
  if (inv.cpus() < c.cpus) {
    missing.push_back("CPUs: " + std::to_string(inv.cpus()) + " of " + std::to_string(c.cpus) +
                      " configured");
  }
  if (inv.memory_mb() < c.memory_mb) {
    missing.push_back("memory: " + std::to_string(inv.memory_mb()) + " of " +
                      std::to_string(c.memory_mb) + " MB configured");
  }
  if (c.gpus > 0) {
    // Whole GPUs of the configured type (a GPU in MIG mode is used as its slices).
    uint32_t usable = 0;
    std::map<std::string, uint32_t> other_types;
    for (const auto& g : inv.gpus()) {
      if (g.mig_enabled()) continue;
      if (c.gpu_type.empty() || EqualsIgnoreCase(g.type(), c.gpu_type)) {
        ++usable;
      } else {
        ++other_types[g.type()];
      }
    }
    if (usable < c.gpus) {
      std::string what = "GPUs: " + std::to_string(usable) +
                         (c.gpu_type.empty() ? "" : " " + c.gpu_type) + " of " +
                         std::to_string(c.gpus) + " configured";
      for (const auto& [type, n] : other_types) {
        what += " (found " + std::to_string(n) + " " + type + ")";
      }
      missing.push_back(what);
    }
  }
  // MIG slices, checked when the agent reports MIG at all (fixtures without MIG say nothing).
  bool reports_mig = false;
  std::map<std::string, uint32_t> slices;
  for (const auto& g : inv.gpus()) {
    reports_mig = reports_mig || g.mig_enabled();
    for (const auto& d : g.mig_devices()) ++slices[ToLower(d.profile())];
  }
  if (reports_mig) {
    for (const auto& gr : c.gres) {
      if (gr.name != "gpu" || gr.type.empty()) continue;
      uint32_t have = slices[ToLower(gr.type)];
      if (have < gr.count) {
        missing.push_back("MIG " + gr.type + ": " + std::to_string(have) + " of " +
                          std::to_string(gr.count) + " configured");
      }
    }
  }
  return Join(missing, "; ");
}

void NodeManager::SetCheckDrain(NodeEntry& node, const std::string& by, const std::string& reason,
                                TimeMs now, store::Mutation& m) {
  v1::NodeRecord& r = node.rec;
  if (!reason.empty()) {
    if (r.drain() && r.drained_by().empty()) {
      // An admin's drain stays, with the admin's reason; the finding is logged.
      spdlog::warn("node={} {} check: {} (already drained by an admin)", node.name(), by, reason);
      return;
    }
    if (r.drain() && r.drained_by() != by) return;  // another check holds it; first reason wins
    if (r.drain() && r.reason() == reason) return;
    r.set_drain(true);
    r.set_reason(reason);
    r.set_reason_user("muster");
    r.set_reason_time_ms(now);
    r.set_drained_by(by);
    m.PutNode(r);
    spdlog::warn("node={} drained: {}", node.name(), reason);
    ctx_.RequestPass();
    return;
  }
  if (r.drain() && r.drained_by() == by) {
    spdlog::info("node={} resumed: the {} check passes again (was: {})", node.name(), by,
                 r.reason());
    r.set_drain(false);
    r.clear_reason();
    r.clear_reason_user();
    r.clear_reason_time_ms();
    r.clear_drained_by();
    m.PutNode(r);
    ctx_.RequestPass();
  }
}

void NodeManager::ApplyChecks(NodeEntry& node, TimeMs now, store::Mutation& m) {
  const v1::NodeInventory& inv = node.inventory;
  std::string shortfall = HardwareShortfall(node);
  SetCheckDrain(node, "hardware", shortfall.empty() ? "" : "Low " + shortfall, now, m);
  std::vector<std::string> sick;
  for (const auto& g : inv.gpus()) {
    if (!g.health().empty()) sick.push_back("gpu" + std::to_string(g.index()) + ": " + g.health());
  }
  SetCheckDrain(node, "gpu_health", Join(sick, "; "), now, m);
  if (inv.cpus() > node.config.cpus || inv.memory_mb() > node.config.memory_mb ||
      static_cast<uint32_t>(inv.gpus_size()) > node.config.gpus) {
    spdlog::info(
        "node={} has more than configured ({} CPUs, {} MB, {} GPUs; config {}, {}, {}): "
        "scheduling the configured amounts",
        node.name(), inv.cpus(), inv.memory_mb(), inv.gpus_size(), node.config.cpus,
        node.config.memory_mb, node.config.gpus);
  }
}

bool NodeManager::OnGpuHealth(NodeEntry& node, const v1::GpuHealth& h, TimeMs now,
                              store::Mutation& m) {
  v1::GpuDevice* gpu = nullptr;
  for (auto& g : *node.inventory.mutable_gpus()) {
    if (g.index() == h.index()) gpu = &g;
  }
  if (!gpu) {
    spdlog::warn("node={} reports health for gpu{}, which it never reported; ignored", node.name(),
                 h.index());
    return false;
  }
  if (gpu->health() == h.health()) return false;
  gpu->set_health(h.health());
  ApplyChecks(node, now, m);
  return !h.health().empty();
}

void NodeManager::OnNodeHealth(NodeEntry& node, const v1::NodeHealth& h, TimeMs now,
                               store::Mutation& m) {
  std::string reason = h.ok() ? "" : Trim(h.reason()).empty() ? "health check failed" : h.reason();
  SetCheckDrain(node, "health_check", reason, now, m);
}

}  // namespace muster::controller
