// A real controller and N real agents in one process, on loopback with port 0 and fake GPUs
// (Kudu's InternalMiniCluster). Jobs run as real processes. Tests drive it through the same client
// the CLI uses.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/test_etcd.h"
#include "harness/test_munged.h"
#include "muster/agent/agent.h"
#include "muster/client/controller_client.h"
#include "muster/common/status.h"
#include "muster/ha/controller_candidate.h"
#include "muster/rpc/controller_server.h"

namespace muster::testing {

struct InProcessClusterOptions {
  int nodes = 4;
  int gpus_per_node = 8;
  uint32_t heartbeat_interval_ms = 100;
  uint32_t node_not_responding_ms = 400;
  uint32_t node_down_ms = 1200;
  uint32_t kill_grace_ms = 500;
  std::string topology_xml;  // agents read their CPU/PCI layout from this hwloc XML
  uint32_t gpu_health_interval_ms = 100;
  std::string health_check_program;  // [agent] health_check_program, run every second
  // Job cgroups: in a directory of their own under the cgroup v2 mount where it is writable
  // (removed at the end), never the shared default place; false or unwritable: "none".
  bool cgroups = true;
  std::string prolog, epilog;  // [agent] prolog / epilog
  // [agent] reboot_program. Each agent reads its host's boot id from dir()/boot-id.NODE (made
  // at the start), which a stand-in reboot program may rewrite before the test restarts it.
  std::string reboot_program;
  // Mutual TLS between the controller and the agents, with a CA and certificates made by
  // `muster certs`'s code in dir()/tls.
  bool tls = false;
  // The user API on TCP as well (controller.api_address on loopback), with a munged of the
  // cluster's own for the MUNGE credentials (config [munge] socket).
  bool remote_api = false;
  // A hot standby: two controllers (ctl-a, which leads first, and ctl-b, standing by) electing
  // their leader through an etcd of the cluster's own; agents and clients know both.
  bool standby = false;
  uint32_t leader_lease_s = 2;
  // Prometheus' /metrics on a loopback port, behind the bearer token metrics_token().
  bool metrics = false;
};

class InProcessCluster {
 public:
  // Starts the controller and every agent and waits until all nodes are up.
  // Ports are picked free up front (the controller must come back on the same one after a
  // restart); another process may take one before it is bound, so a start that finds its port
  // in use is tried again with new ones.
  static Result<std::unique_ptr<InProcessCluster>> Start(InProcessClusterOptions options = {});
  ~InProcessCluster();

  Result<client::ControllerClient> Client() const;
  const std::string& dir() const { return dir_; }
  const std::string& config_path() const { return config_path_; }
  const Config& config() const { return config_; }
  int metrics_port() const { return controller_ ? controller_->metrics_port() : 0; }
  const std::string& metrics_token() const { return metrics_token_; }
  // Where the agents put job cgroups ("" without cgroups): <root>/<node>/job_<id>.
  const std::string& cgroup_root() const { return cgroup_root_; }

  // Submits a batch script (as the test's own user) with the given spec fields filled in.
  Result<uint64_t> Submit(const std::string& script, v1::JobSpec spec = {});
  Result<v1::JobInfo> Job(uint64_t id) const;
  v1::JobState State(uint64_t id) const;
  Result<v1::NodeInfo> Node(const std::string& name) const;

  // Agents are numbered from 0; agent i is node<i+1>.
  agent::Agent* agent(int i) { return agents_[static_cast<size_t>(i)].get(); }
  void StopAgent(int i);
  // Stops agent i as a musterd restart does: its batch jobs keep running (StartAgent re-adopts).
  void DetachAgent(int i);
  Status StartAgent(int i);
  // A node the config file gained after the start (a reconfiguration): its agent (node<i+1>),
  // with a node key made for it, started from the file as it reads now.
  Status AddAgent(int i);
  // A silent agent sends nothing and drops its session: to the controller it looks dead.
  void SilenceAgent(int i, bool silent);
  // Stops the controller and starts a new one on the same state dir (a new epoch).
  Status RestartController();
  void StopController();
  Status WaitForNodesUp(int timeout_ms);

  // ---- With standby: controller 0 is ctl-a, 1 is ctl-b. ----
  ha::ControllerCandidate* candidate(int i) { return candidates_[i].get(); }
  Status StartCandidate(int i);
  // Stops controller i as a crash would: no hand-over, its lease left to run out.
  void CrashCandidate(int i);
  // The controller that leads, once one does within timeout_ms; -1 if none.
  int WaitForLeader(int timeout_ms) const;
  TestEtcd* etcd() { return etcd_.get(); }

 private:
  static Result<std::unique_ptr<InProcessCluster>> StartOnce(InProcessClusterOptions options);
  InProcessCluster() = default;
  Status StartController();

  InProcessClusterOptions options_;
  std::string dir_, config_path_;
  std::string metrics_token_;
  std::string cgroup_root_;  // "" when the cluster runs without cgroups
  Config config_;
  std::unique_ptr<TestMunged> munged_;
  std::unique_ptr<rpc::ControllerServer> controller_;
  std::unique_ptr<TestEtcd> etcd_;
  std::unique_ptr<ha::ControllerCandidate> candidates_[2];
  std::vector<std::unique_ptr<agent::Agent>> agents_;
};

}  // namespace muster::testing
