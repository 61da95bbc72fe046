// The nodes as the controller knows them: registration and sessions of their agents, liveness
// (NOT_RESPONDING, then DOWN), admin drain and resume, and the drains that follow from checks
// (less hardware than configured, unhealthy GPUs, the admin's health check, failed prologs and
// epilogs). What nodes hold is the resource ledger's; what happens to their jobs, the job
// manager's. Like Kudu's TSManager with Mesos's slave observer: liveness is driven by the clock
// it is given (Sweep), never by a timer of its own.
//
// Strand-confined.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine_context.h"
#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/store/state_store.h"
#include "muster/v1/controller.pb.h"
#include "muster/v1/node.pb.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

struct NodeEntry {
  NodeConfig config;
  size_t index = 0;    // configuration order; the ledger's index of the node too
  v1::NodeRecord rec;  // admin state: drain, reason (persisted)
  bool registered = false;
  bool session = false;
  bool down = false;  // declared lost; cleared by a new registration
  bool not_responding = false;
  TimeMs last_heard_ms = 0;
  std::string instance_id;
  std::string step_address;
  v1::NodeInventory inventory;
  std::set<uint64_t> stale_jobs;             // reported by the agent but not ours: terminate first
  std::set<uint64_t> unconfirmed_jobs;       // requeued while it was lost; may still run here
  std::vector<uint64_t> reported_jobs;       // from the last Register, reconciled at AttachSession
  std::set<uint64_t> lost_jobs;              // ditto: started there once, state lost since
  std::vector<v1::AdoptedJob> adopted_jobs;  // ditto: what it read back from its spool

  const std::string& name() const { return config.name; }
};

class NodeManager {
 public:
  explicit NodeManager(EngineContext& ctx);

  // Recovery: the admin state a node had. False when the config no longer defines it (its live
  // settings are then dropped, into `m`).
  bool Restore(const v1::NodeRecord& rec, store::Mutation& m);
  // Every node gets node_down_ms from `now` to register.
  void StartLiveness(TimeMs now);
  // A replacement engine's nodes (ControllerRunner::Reconfigure): each node both configs define
  // goes on being silent, not responding or down since when the previous engine saw it so, so
  // that a dead node still goes down however often the controller is reconfigured.
  void ContinueLiveness(const NodeManager& previous);

  // muster node confirm-down: the named nodes, none with an agent session (admins).
  Result<std::vector<NodeEntry*>> ConfirmableDown(const Caller& caller,
                                                  const std::string& hostlist);

  NodeEntry* Find(const std::string& name);
  const NodeEntry* Find(const std::string& name) const;
  NodeEntry& at(size_t i) { return nodes_[i]; }
  const NodeEntry& at(size_t i) const { return nodes_[i]; }
  const std::vector<NodeEntry>& all() const { return nodes_; }
  size_t size() const { return nodes_.size(); }

  // ---- Agents. ----
  // A node's agent registers (again): its inventory is checked against the configuration and its
  // GPUs' health (drains go into `m`). `restarted` says it is a new agent instance. NOT_FOUND for
  // a node the configuration does not define, INVALID_ARGUMENT without an instance id.
  Result<v1::RegisterResponse> Register(const v1::RegisterRequest& req, TimeMs now,
                                        store::Mutation& m, bool* restarted);
  // The store refused what Register staged: the node is back to the agent instance it knew
  // before, so that the agent's next try is seen as the restart it is.
  struct Registration {
    std::string instance_id;
    bool registered = false;
  };
  Registration RegistrationOf(const std::string& node) const;
  void UndoRegister(const std::string& node, const Registration& before);
  // The agent's Session stream says Hello. FAILED_PRECONDITION unless it registered with this
  // instance id.
  Result<NodeEntry*> AttachSession(const v1::Hello& hello, TimeMs now);
  void DetachSession(const std::string& node, const std::string& instance_id);
  // A message came from the node: it is alive. nullptr for an unknown node, or one declared down
  // that still talks on its old session (which is closed, so that it registers anew and what it
  // runs is reconciled).
  NodeEntry* Heard(const std::string& name, TimeMs now);

  // ---- Liveness. ----
  // Marks nodes silent for node_not_responding_ms NOT_RESPONDING and returns those to declare
  // lost (silent for node_down_ms, or never registered that long after the start), with why.
  std::vector<std::pair<NodeEntry*, std::string>> Sweep(TimeMs now);
  // The node is DOWN: unschedulable until it registers again; its session is dropped.
  void MarkDown(NodeEntry& node);

  // ---- Admin. ----
  // PERMISSION_DENIED for non-admins; INVALID_ARGUMENT for a drain without a reason or a resume
  // of a node that is neither drained nor down; NOT_FOUND for unknown nodes; FAILED_PRECONDITION
  // for a resume of a node that still reports an unhealthy GPU.
  Result<v1::UpdateNodeResponse> Update(const Caller& caller, const v1::UpdateNodeRequest& req,
                                        TimeMs now);

  // Stores each named node's live settings (none left for a node `settings` lacks), the record's
  // other fields as they are (Engine::CommitNodeSettings).
  Status StoreSettings(const std::vector<std::string>& nodes,
                       const std::map<std::string, v1::NodeSettings>& settings);

  // ---- Checks and health (node_health.cc). ----
  // Drains the node for check `by` ("hardware", "gpu_health", "health_check", "prolog",
  // "epilog") with `reason`, or lifts that check's own drain when `reason` is empty. An admin's
  // drain is never overridden or lifted by a check.
  void SetCheckDrain(NodeEntry& node, const std::string& by, const std::string& reason, TimeMs now,
                     store::Mutation& m);
  // A GPU's health changed. True when it turned unhealthy: the jobs bound to it lose it.
  bool OnGpuHealth(NodeEntry& node, const v1::GpuHealth& h, TimeMs now, store::Mutation& m);
  // The admin's health check passed or failed.
  void OnNodeHealth(NodeEntry& node, const v1::NodeHealth& h, TimeMs now, store::Mutation& m);

  // ---- Reboots (node_reboots.cc). ----
  // muster node reboot (admins): each node is told to run its reboot program once it has no
  // job; with `asap` it takes no new work meanwhile. INVALID_ARGUMENT for a bad next state or a
  // node whose agent has no reboot program; FAILED_PRECONDITION for one already rebooting.
  Result<v1::UpdateNodeResponse> RequestReboot(const Caller& caller,
                                               const v1::UpdateNodeRequest& req, TimeMs now);
  // muster node cancel-reboot (admins): reboots not yet issued are dropped, and an ASAP drain
  // lifted. FAILED_PRECONDITION for a node whose reboot was issued (it cannot be called back).
  Result<v1::UpdateNodeResponse> CancelReboot(const Caller& caller,
                                              const v1::UpdateNodeRequest& req);
  // Every tick: tells each node whose reboot waits and that holds no job (`busy` says which do)
  // to reboot, and drains those that did not come back within reboot_timeout_s.
  void AdvanceReboots(const std::function<bool(const NodeEntry&)>& busy, TimeMs now);
  // The agent could not run its reboot program: the node is drained with why.
  void OnRebootFailed(NodeEntry& node, const v1::RebootFailed& f, TimeMs now, store::Mutation& m);

  // Heartbeats (any message) that came more than two heartbeat intervals after the one before
  // on the same session, since this controller started.
  uint64_t late_heartbeats() const { return late_heartbeats_; }

  // Whether the scheduler may place work on the node, and if not, why ("drained: bad fan").
  bool Schedulable(const NodeEntry& node) const;
  std::string WhyUnschedulable(const NodeEntry& node) const;

 private:
  // What the node lacks against its configuration ("" when nothing).
  std::string HardwareShortfall(const NodeEntry& node) const;
  // The drains (or automatic resumes) that follow from its hardware and its GPUs' health.
  void ApplyChecks(NodeEntry& node, TimeMs now, store::Mutation& m);
  // At registration: a node back from a new boot has its reboot done (node_reboots.cc).
  void CompleteReboot(NodeEntry& node, TimeMs now, store::Mutation& m);
  // At a new session: an issued reboot whose node is still in the boot it was issued in is sent
  // again (the first order may have been lost with the last session), to an agent that runs
  // each reboot once per boot, and not within the last minute before it would time out.
  void RepeatIssuedReboot(const NodeEntry& node, TimeMs now);
  // The order to the agent for the node's issued reboot.
  static v1::ControllerMessage RebootOrder(const v1::NodeReboot& reboot);
  // The nodes a hostlist names, each configured. NOT_FOUND names the unknown ones.
  Result<std::vector<NodeEntry*>> NodesOf(const std::string& hostlist);
  // The same, or every node for "ALL" (scontrol reboot's word).
  Result<std::vector<NodeEntry*>> NodesOrAll(const std::string& hostlist);

  EngineContext& ctx_;
  std::vector<NodeEntry> nodes_;  // configuration order
  uint64_t late_heartbeats_ = 0;
  TimeMs liveness_start_ms_ = 0;  // when this controller started counting silences
};

}  // namespace muster::controller
