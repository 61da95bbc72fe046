// Engine: node features, weights and GRES set live. A change is planned against the nodes as
// they stand (the file's with the stored settings laid over them), checked as a reconfiguration
// is (no node left with less than its jobs hold), and stored in the nodes' records;
// ControllerRunner::ChangeNodes then replaces the engine with one recovered under them.
#include "audit_log.h"
#include "engine_context.h"
#include "muster/common/strings.h"
#include "muster/controller/access.h"
#include "muster/controller/engine.h"
#include "node_manager.h"
#include "node_overlay.h"
#include "partition_overlay.h"

namespace muster::controller {

Result<Engine::NodeSettingsPlan> Engine::PlanNodeSettings(const Caller& caller,
                                                          const v1::UpdateNodeRequest& req,
                                                          TimeMs now) const {
  MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kConfigureNodes));
  MUSTER_ASSIGN_OR_RETURN(
      NodeSettingsChange change,
      PlanNodeSettingsChange(req, ctx_->config(), node_settings(), caller.user, now));
  // What the engine would run under: the file with the live partitions and the new settings.
  Overlaid next = OverlayPartitions(file_config_, partition_records_);
  std::vector<std::string> problems;
  OverlayNodeSettings(next.config, change.next, &problems);
  for (const std::string& p : problems) {
    for (const std::string& n : change.nodes) {
      if (p.find("node " + n + " ") != std::string::npos) return InvalidArgument(p);
    }
  }
  MUSTER_RETURN_IF_ERROR(CheckReconfiguration(next.config));
  NodeSettingsPlan plan;
  plan.nodes = std::move(change.nodes);
  for (const std::string& n : plan.nodes) {
    auto it = change.next.find(n);
    if (it != change.next.end()) plan.settings[n] = it->second;
  }
  plan.summary = std::move(change.summary);
  return plan;
}

Status Engine::CommitNodeSettings(const NodeSettingsPlan& plan) {
  return nodes_->StoreSettings(plan.nodes, plan.settings);
}

void Engine::AuditNodeSettings(const Caller& caller, const v1::UpdateNodeRequest& req,
                               const std::string& summary, const Status& result, TimeMs now) {
  const std::string action = req.action() == v1::UpdateNodeRequest::SET ? "set" : "reset";
  audit_->Record(caller, action, "nodes " + req.nodes().substr(0, 1024),
                 summary.empty() ? NodeSettingsRequestText(req) : summary,
                 result.code() != StatusCode::kPermissionDenied, result, now);
}

std::map<std::string, v1::NodeSettings> Engine::node_settings() const {
  std::map<std::string, v1::NodeSettings> out;
  for (const NodeEntry& n : nodes_->all()) {
    if (HasLiveSettings(n.rec.settings())) out[n.name()] = n.rec.settings();
  }
  return out;
}

}  // namespace muster::controller
