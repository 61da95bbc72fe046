#include "node_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "muster/controller/access.h"

namespace muster::controller {
namespace {

std::string Seconds(TimeMs ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace

NodeManager::NodeManager(EngineContext& ctx) : ctx_(ctx) {
  for (const NodeConfig& nc : ctx.config().nodes) {
    NodeEntry e;
    e.config = nc;
    e.index = nodes_.size();
    e.rec.set_name(nc.name);
    nodes_.push_back(std::move(e));
  }
}

bool NodeManager::Restore(const v1::NodeRecord& rec, store::Mutation& m) {
  NodeEntry* node = Find(rec.name());
  if (node) {
    node->rec = rec;
    return true;
  }
  // Its live settings go with it: a node the file defines again later starts from the file's,
  // as a reconfiguration that brings it back has checked.
  if (rec.has_settings()) {
    v1::NodeRecord kept = rec;
    kept.clear_settings();
    m.PutNode(kept);
  }
  return false;
}

void NodeManager::StartLiveness(TimeMs now) {
  for (auto& n : nodes_) n.last_heard_ms = now;
  liveness_start_ms_ = now;
}

void NodeManager::ContinueLiveness(const NodeManager& previous) {
  for (auto& n : nodes_) {
    const NodeEntry* before = previous.Find(n.name());
    if (!before) continue;
    n.last_heard_ms = before->last_heard_ms;
    n.not_responding = before->not_responding;
    n.down = before->down;
  }
  late_heartbeats_ = previous.late_heartbeats_;
  liveness_start_ms_ = previous.liveness_start_ms_;
}

NodeEntry* NodeManager::Find(const std::string& name) {
  std::optional<size_t> i = ctx_.NodeIndex(name);
  return i ? &nodes_[*i] : nullptr;
}

const NodeEntry* NodeManager::Find(const std::string& name) const {
  std::optional<size_t> i = ctx_.NodeIndex(name);
  return i ? &nodes_[*i] : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Agents

Result<v1::RegisterResponse> NodeManager::Register(const v1::RegisterRequest& req, TimeMs now,
                                                   store::Mutation& m, bool* restarted) {
  const v1::NodeInventory& inv = req.inventory();
  NodeEntry* node = Find(inv.name());
  if (!node) {
    return NotFound("node '" + inv.name() + "' is not in the controller's configuration (" +
                    ctx_.config().source + ")");
  }
  if (req.instance_id().empty()) return InvalidArgument("register without an instance id");
  *restarted = node->registered && node->instance_id != req.instance_id();
  node->registered = true;
  node->session = false;  // until the new stream says Hello
  node->instance_id = req.instance_id();
  node->step_address = inv.step_address();
  node->inventory = inv;
  node->last_heard_ms = now;
  if (node->down || node->not_responding) {
    spdlog::info("node={} is back ({})", inv.name(),
                 node->down ? "was DOWN" : "was not responding");
  }
  node->down = false;
  node->not_responding = false;
  node->reported_jobs.assign(req.running_job_ids().begin(), req.running_job_ids().end());
  node->lost_jobs = {req.lost_job_ids().begin(), req.lost_job_ids().end()};
  node->adopted_jobs.assign(req.adopted_jobs().begin(), req.adopted_jobs().end());
  CompleteReboot(*node, now, m);
  ApplyChecks(*node, now, m);

  const NodeConfig& c = node->config;
  v1::RegisterResponse resp;
  resp.set_epoch(ctx_.epoch());
  resp.set_cpus(c.cpus);
  resp.set_memory_mb(c.memory_mb);
  resp.set_gpus(c.gpus);
  resp.set_gpu_type(c.gpu_type);
  for (const auto& p : ctx_.config().partitions) {
    if (std::find(p.nodes.begin(), p.nodes.end(), c.name) != p.nodes.end()) {
      resp.add_partitions(p.name);
    }
  }
  resp.set_topology(c.topology);
  resp.set_heartbeat_interval_ms(ctx_.scheduling().heartbeat_interval_ms);
  resp.set_cluster_name(ctx_.config().cluster_name);
  resp.set_step_key(ctx_.StepKeyOf(c.name));
  return resp;
}

NodeManager::Registration NodeManager::RegistrationOf(const std::string& name) const {
  const NodeEntry* node = Find(name);
  return node ? Registration{node->instance_id, node->registered} : Registration{};
}

void NodeManager::UndoRegister(const std::string& name, const Registration& before) {
  NodeEntry* node = Find(name);
  if (!node) return;
  node->instance_id = before.instance_id;
  node->registered = before.registered;
}

Result<NodeEntry*> NodeManager::AttachSession(const v1::Hello& hello, TimeMs now) {
  NodeEntry* node = Find(hello.node());
  if (!node || !node->registered || node->instance_id != hello.instance_id()) {
    return FailedPrecondition("node '" + hello.node() +
                              "' has not registered with this instance id; register first");
  }
  node->session = true;
  node->last_heard_ms = now;
  RepeatIssuedReboot(*node, now);
  return node;
}

void NodeManager::DetachSession(const std::string& name, const std::string& instance_id) {
  NodeEntry* node = Find(name);
  if (node && node->instance_id == instance_id && node->session) {
    node->session = false;
    spdlog::info("node={} session closed; liveness decides what happens next", name);
  }
}

NodeEntry* NodeManager::Heard(const std::string& name, TimeMs now) {
  NodeEntry* node = Find(name);
  if (!node) return nullptr;
  if (node->down) {
    // Declared lost, but talking again on its old session: it must register anew so that what
    // it still runs is reconciled (its jobs were requeued meanwhile).
    ctx_.CloseSession(name);
    return nullptr;
  }
  const TimeMs gap = now - node->last_heard_ms;
  if (node->session && gap > 2 * static_cast<TimeMs>(ctx_.scheduling().heartbeat_interval_ms)) {
    ++late_heartbeats_;
  }
  node->last_heard_ms = now;
  if (node->not_responding) {
    node->not_responding = false;
    ctx_.RequestPass();
    spdlog::info("node={} is responding again", name);
  }
  return node;
}

// ---------------------------------------------------------------------------------------------
// Liveness

std::vector<std::pair<NodeEntry*, std::string>> NodeManager::Sweep(TimeMs now) {
  const SchedulingConfig& s = ctx_.scheduling();
  std::vector<std::pair<NodeEntry*, std::string>> lost;
  for (auto& node : nodes_) {
    if (node.down) continue;
    const TimeMs silent = now - node.last_heard_ms;
    if (!node.registered) {
      // Never registered since this controller started.
      if (silent > static_cast<TimeMs>(s.node_down_ms)) {
        lost.emplace_back(&node, "did not register within " + Seconds(s.node_down_ms) +
                                     " of the controller start");
      }
      continue;
    }
    if (silent > static_cast<TimeMs>(s.node_down_ms)) {
      lost.emplace_back(&node, "not responding for " + Seconds(silent));
    } else if (silent > static_cast<TimeMs>(s.node_not_responding_ms) && !node.not_responding) {
      node.not_responding = true;
      spdlog::warn("node={} NOT_RESPONDING: silent for {}", node.name(), Seconds(silent));
    }
  }
  return lost;
}

void NodeManager::MarkDown(NodeEntry& node) {
  node.down = true;
  node.not_responding = true;
  node.stale_jobs.clear();  // whatever ran there is re-examined when it registers again
  ctx_.CloseSession(node.name());
}

bool NodeManager::Schedulable(const NodeEntry& node) const {
  // A reboot issued, or asked for ASAP, takes no new work whatever became of its drain (a
  // check's drain lifted, an operator's resume).
  return node.registered && node.session && !node.down && !node.not_responding &&
         !node.rec.drain() && node.stale_jobs.empty() && node.rec.reboot().issued_ms() == 0 &&
         !node.rec.reboot().asap();
}

std::string NodeManager::WhyUnschedulable(const NodeEntry& node) const {
  if (node.down) return "down";
  if (!node.registered) return "not registered (its agent has not started)";
  if (node.not_responding || !node.session) return "not responding";
  if (node.rec.drain()) {
    return "drained" + (node.rec.reason().empty() ? "" : ": " + node.rec.reason());
  }
  if (!node.stale_jobs.empty()) return "cleaning up jobs it should not run";
  if (node.rec.reboot().issued_ms() != 0) return "rebooting";
  if (node.rec.reboot().asap()) return "to reboot as soon as its jobs end";
  return "";
}

// ---------------------------------------------------------------------------------------------
// Admin

Result<std::vector<NodeEntry*>> NodeManager::ConfirmableDown(const Caller& caller,
                                                             const std::string& hostlist) {
  MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kConfirmNodeDown));
  MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandHostlist(hostlist));
  if (names.empty()) return InvalidArgument("no node names given");
  std::vector<NodeEntry*> out;
  for (const auto& n : names) {
    NodeEntry* node = Find(n);
    if (!node) return NotFound("unknown node " + n);
    if (node->session) {
      return FailedPrecondition("node " + n +
                                " is connected: its agent reports what it still runs itself");
    }
    out.push_back(node);
  }
  return out;
}

Result<std::vector<NodeEntry*>> NodeManager::NodesOf(const std::string& hostlist) {
  MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandHostlist(hostlist));
  if (names.empty()) return InvalidArgument("no node names given");
  std::vector<std::string> unknown;
  std::vector<NodeEntry*> out;
  for (const auto& n : names) {
    if (NodeEntry* node = Find(n)) {
      out.push_back(node);
    } else {
      unknown.push_back(n);
    }
  }
  if (!unknown.empty()) return NotFound("unknown node(s): " + CompressHostlist(unknown));
  return out;
}

Result<std::vector<NodeEntry*>> NodeManager::NodesOrAll(const std::string& hostlist) {
  if (hostlist != "ALL") return NodesOf(hostlist);
  std::vector<NodeEntry*> all;
  for (NodeEntry& n : nodes_) all.push_back(&n);
  return all;
}

Status NodeManager::StoreSettings(const std::vector<std::string>& names,
                                  const std::map<std::string, v1::NodeSettings>& settings) {
  store::Mutation m;
  std::vector<std::pair<NodeEntry*, v1::NodeRecord>> next;
  for (const std::string& name : names) {
    NodeEntry* node = Find(name);
    if (!node) return NotFound("no node named '" + name + "'");
    v1::NodeRecord r = node->rec;
    auto it = settings.find(name);
    if (it == settings.end()) {
      r.clear_settings();
    } else {
      *r.mutable_settings() = it->second;
    }
    m.PutNode(r);
    next.emplace_back(node, std::move(r));
  }
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  for (auto& [node, r] : next) node->rec = std::move(r);
  return Status::Ok();
}

Result<v1::UpdateNodeResponse> NodeManager::Update(const Caller& caller,
                                                   const v1::UpdateNodeRequest& req, TimeMs now) {
  MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kDrainResumeNodes));
  MUSTER_ASSIGN_OR_RETURN(std::vector<NodeEntry*> nodes, NodesOf(req.nodes()));
  store::Mutation m;
  std::vector<v1::NodeRecord> next;
  for (NodeEntry* node : nodes) {
    const std::string& n = node->name();
    v1::NodeRecord r = node->rec;
    if (req.action() == v1::UpdateNodeRequest::DRAIN) {
      if (Trim(req.reason()).empty()) {
        return InvalidArgument("a reason is required to drain a node (--reason)");
      }
      r.set_drain(true);
      r.set_reason(req.reason());
      r.set_reason_user(caller.user);
      r.set_reason_time_ms(now);
      r.clear_drained_by();  // an admin's drain now: only an admin lifts it
    } else if (req.action() == v1::UpdateNodeRequest::RESUME) {
      if (!r.drain() && !node->down) {
        return InvalidArgument("node " + n + " is not drained or down; nothing to resume");
      }
      for (const auto& g : node->inventory.gpus()) {
        if (!g.health().empty()) {
          return FailedPrecondition("node " + n + " still reports gpu" + std::to_string(g.index()) +
                                    " unhealthy (" + g.health() +
                                    "); fix or reset the GPU and restart musterd there first");
        }
      }
      r.set_drain(false);
      r.clear_reason();
      r.clear_reason_user();
      r.clear_reason_time_ms();
      r.clear_drained_by();
    } else {
      return InvalidArgument("unknown node update action");
    }
    m.PutNode(r);
    next.push_back(std::move(r));
  }
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  v1::UpdateNodeResponse resp;
  for (auto& r : next) {
    NodeEntry* node = Find(r.name());
    if (req.action() == v1::UpdateNodeRequest::RESUME && node->down) {
      // Give a node that was declared lost another chance; liveness decides again.
      node->down = false;
      node->not_responding = false;
      node->last_heard_ms = now;
    }
    spdlog::info("node={} {} by user={} reason='{}'", r.name(), r.drain() ? "drained" : "resumed",
                 caller.user, r.reason());
    node->rec = std::move(r);
    resp.add_updated(node->name());
  }
  ctx_.RequestPass();
  return resp;
}

}  // namespace muster::controller
