// NodeManager: reboots an admin asks for (`muster node reboot`, `scontrol reboot`). A reboot
// waits for the node's last job, is issued to its agent (which runs [agent] reboot_program), and
// is done when the node registers from another boot; it is persisted in the node's record, so a
// controller restart or reconfiguration carries it on.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "muster/common/strings.h"
#include "muster/controller/access.h"
#include "node_manager.h"

namespace muster::controller {
namespace {

// The node's drain, lifted (whoever set it).
void Undrain(v1::NodeRecord& r) {
  r.set_drain(false);
  r.clear_reason();
  r.clear_reason_user();
  r.clear_reason_time_ms();
  r.clear_drained_by();
}

// An admin-level drain: only an admin's resume lifts it.
void DrainForAdmin(v1::NodeRecord& r, const std::string& reason, const std::string& user,
                   TimeMs now) {
  r.set_drain(true);
  r.set_reason(reason);
  r.set_reason_user(user);
  r.set_reason_time_ms(now);
  r.clear_drained_by();
}

constexpr char kRebootDrain[] = "reboot";  // drained_by of an ASAP reboot's drain
constexpr size_t kMaxReasonBytes = 1024;

}  // namespace

Result<v1::UpdateNodeResponse> NodeManager::RequestReboot(const Caller& caller,
                                                          const v1::UpdateNodeRequest& req,
                                                          TimeMs now) {
  MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kRebootNodes));
  const std::string next_state = ToLower(req.next_state());
  if (next_state != "" && next_state != "resume" && next_state != "down") {
    return InvalidArgument("unknown next state '" + req.next_state().substr(0, 64) +
                           "' after a reboot (resume or down)");
  }
  MUSTER_ASSIGN_OR_RETURN(std::vector<NodeEntry*> nodes, NodesOrAll(req.nodes()));
  for (const NodeEntry* node : nodes) {
    if (node->rec.reboot().issued_ms() != 0) {
      return FailedPrecondition("node " + node->name() + " is rebooting already");
    }
    if (node->registered && !node->inventory.can_reboot()) {
      return InvalidArgument("node " + node->name() +
                             " has no reboot program: set [agent] reboot_program in its "
                             "muster.toml and restart musterd there");
    }
  }
  store::Mutation m;
  std::vector<v1::NodeRecord> next;
  for (const NodeEntry* node : nodes) {
    v1::NodeRecord r = node->rec;
    v1::NodeReboot* rb = r.mutable_reboot();
    rb->set_requested_ms(now);
    rb->set_user(caller.user);
    rb->set_next_state(next_state);
    rb->set_reason(req.reason().empty() ? (req.asap() ? "Reboot ASAP" : "reboot requested")
                                        : req.reason().substr(0, kMaxReasonBytes));
    if (req.asap()) {
      rb->set_asap(true);
      if (!r.drain()) {
        DrainForAdmin(r, rb->reason(), caller.user, now);
        r.set_drained_by(kRebootDrain);
      }
    }
    m.PutNode(r);
    next.push_back(std::move(r));
  }
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  v1::UpdateNodeResponse resp;
  for (v1::NodeRecord& r : next) {
    NodeEntry* node = Find(r.name());
    spdlog::info("node={} reboot requested by user={} asap={} next_state={} reason='{}'", r.name(),
                 caller.user, r.reboot().asap(),
                 r.reboot().next_state().empty() ? "as before" : r.reboot().next_state(),
                 r.reboot().reason());
    node->rec = std::move(r);
    resp.add_updated(node->name());
  }
  ctx_.RequestPass();
  return resp;
}

Result<v1::UpdateNodeResponse> NodeManager::CancelReboot(const Caller& caller,
                                                         const v1::UpdateNodeRequest& req) {
  MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kRebootNodes));
  MUSTER_ASSIGN_OR_RETURN(std::vector<NodeEntry*> nodes, NodesOrAll(req.nodes()));
  if (req.nodes() == "ALL") {
    // Every node with a reboot still to issue.
    nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                               [](const NodeEntry* n) {
                                 return !n->rec.has_reboot() || n->rec.reboot().issued_ms() != 0;
                               }),
                nodes.end());
  }
  for (const NodeEntry* node : nodes) {
    if (!node->rec.has_reboot()) {
      return FailedPrecondition("node " + node->name() + " has no reboot pending");
    }
    if (node->rec.reboot().issued_ms() != 0) {
      return FailedPrecondition("node " + node->name() +
                                "'s reboot was issued already; it cannot be called back");
    }
  }
  store::Mutation m;
  std::vector<v1::NodeRecord> next;
  for (const NodeEntry* node : nodes) {
    v1::NodeRecord r = node->rec;
    if (r.drain() && r.drained_by() == kRebootDrain) Undrain(r);
    r.clear_reboot();
    m.PutNode(r);
    next.push_back(std::move(r));
  }
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  v1::UpdateNodeResponse resp;
  for (v1::NodeRecord& r : next) {
    NodeEntry* node = Find(r.name());
    spdlog::info("node={} reboot cancelled by user={}", r.name(), caller.user);
    node->rec = std::move(r);
    resp.add_updated(node->name());
  }
  ctx_.RequestPass();
  return resp;
}

void NodeManager::AdvanceReboots(const std::function<bool(const NodeEntry&)>& busy, TimeMs now) {
  store::Mutation m;
  std::vector<std::pair<NodeEntry*, v1::NodeRecord>> next;
  std::vector<NodeEntry*> issue;
  const TimeMs timeout = static_cast<TimeMs>(ctx_.scheduling().reboot_timeout_s) * 1000;
  for (NodeEntry& node : nodes_) {
    if (!node.rec.has_reboot()) continue;
    const v1::NodeReboot& rb = node.rec.reboot();
    v1::NodeRecord r = node.rec;
    if (rb.issued_ms() != 0) {
      // From this controller's start at the earliest: a node that came back while no
      // controller ran has had no chance to say so yet.
      if (now - std::max(rb.issued_ms(), liveness_start_ms_) <= timeout) continue;
      DrainForAdmin(r, rb.reason() + ": reboot timed out", "muster", now);
      r.clear_reboot();
      spdlog::warn("node={} did not come back within {}s of its reboot; drained", node.name(),
                   ctx_.scheduling().reboot_timeout_s);
    } else {
      if (!node.registered || !node.session || node.down || node.not_responding ||
          !node.stale_jobs.empty() || busy(node)) {
        continue;
      }
      if (!node.inventory.can_reboot()) {
        DrainForAdmin(r, rb.reason() + ": reboot failed: no reboot_program on the node", "muster",
                      now);
        r.clear_reboot();
        spdlog::warn("node={} cannot reboot: its agent has no reboot_program; drained",
                     node.name());
      } else {
        r.mutable_reboot()->set_issued_ms(now);
        r.mutable_reboot()->set_boot_id(node.inventory.boot_id());
        issue.push_back(&node);
      }
    }
    m.PutNode(r);
    next.emplace_back(&node, std::move(r));
  }
  if (next.empty()) return;
  if (Status s = ctx_.Commit(m); !s.ok()) {
    spdlog::error("cannot store the nodes' reboots (tried again next tick): {}", s.ToString());
    return;
  }
  for (auto& [node, r] : next) node->rec = std::move(r);
  for (NodeEntry* node : issue) {
    spdlog::info("node={} reboot issued (boot {})", node->name(), node->rec.reboot().boot_id());
    ctx_.Send(node->name(), RebootOrder(node->rec.reboot()));
  }
  ctx_.RequestPass();
}

v1::ControllerMessage NodeManager::RebootOrder(const v1::NodeReboot& reboot) {
  v1::ControllerMessage msg;
  msg.mutable_reboot_node()->set_reason(reboot.reason());
  msg.mutable_reboot_node()->set_issued_ms(static_cast<uint64_t>(reboot.issued_ms()));
  return msg;
}

void NodeManager::RepeatIssuedReboot(const NodeEntry& node, TimeMs now) {
  const v1::NodeReboot& rb = node.rec.reboot();
  if (rb.issued_ms() == 0 || rb.boot_id().empty() || node.inventory.boot_id() != rb.boot_id()) {
    return;
  }
  if (!node.inventory.reboot_once_per_boot()) {
    spdlog::warn(
        "node={} is still in boot {}, but its agent would run a repeated reboot again: "
        "not sent again (it times out if the first order was lost)",
        node.name(), rb.boot_id());
    return;
  }
  // A reboot started now could come back after the timeout drained the node.
  constexpr TimeMs kLastMinute = 60'000;
  const TimeMs timeout = static_cast<TimeMs>(ctx_.scheduling().reboot_timeout_s) * 1000;
  if (now - std::max(rb.issued_ms(), liveness_start_ms_) > timeout - kLastMinute) return;
  spdlog::info("node={} is still in boot {}: its reboot is sent again", node.name(), rb.boot_id());
  ctx_.Send(node.name(), RebootOrder(rb));
}

void NodeManager::CompleteReboot(NodeEntry& node, TimeMs now, store::Mutation& m) {
  v1::NodeRecord& r = node.rec;
  const v1::NodeReboot& rb = r.reboot();
  // An unreadable boot id ("") never counts as another boot: such a reboot times out.
  if (rb.issued_ms() == 0 || node.inventory.boot_id().empty() || rb.boot_id().empty() ||
      node.inventory.boot_id() == rb.boot_id()) {
    return;
  }
  const std::string next_state = rb.next_state();
  if (next_state == "resume" ||
      (next_state.empty() && rb.asap() && r.drained_by() == kRebootDrain)) {
    Undrain(r);
  } else if (next_state == "down") {
    DrainForAdmin(r, rb.reason() + ": reboot complete", rb.user(), now);
  }
  spdlog::info("node={} is back from its reboot (boot {}){}", node.name(), node.inventory.boot_id(),
               r.drain() ? "; still drained: " + r.reason() : "");
  r.clear_reboot();
  m.PutNode(r);
  ctx_.RequestPass();
}

void NodeManager::OnRebootFailed(NodeEntry& node, const v1::RebootFailed& f, TimeMs now,
                                 store::Mutation& m) {
  v1::NodeRecord& r = node.rec;
  if (r.reboot().issued_ms() == 0) return;  // nothing was asked of it
  const std::string error(Trim(f.error()).substr(0, 512));
  DrainForAdmin(r, r.reboot().reason() + ": reboot failed: " + error, "muster", now);
  r.clear_reboot();
  m.PutNode(r);
  spdlog::warn("node={} reboot failed: {}; drained", node.name(), error);
}

}  // namespace muster::controller
