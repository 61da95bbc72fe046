// musterd as a library: inventory, the controller session, job launch and supervision, and the step
// service that `muster run` talks to. The daemon's main() and the in-process test cluster run this
// same class; several agents may live in one process (distinct names, spool dirs and ports).
#pragma once

#include <memory>
#include <string>

#include "muster/common/config.h"
#include "muster/common/status.h"

namespace muster::agent {

struct AgentOptions {
  Config config;
  std::string config_path;         // exported to jobs as MUSTER_CONF
  std::string node_name;           // default: the host name
  std::string gpu_fixture;         // fake GPUs from this file instead of NVML
  std::string topology_xml;        // CPU/PCI layout from this hwloc XML instead of the machine
  std::string gpu_faults;          // fixture mode: injected GPU faults (default spool/gpu-faults)
  std::string spool_dir;           // default: config.agent.spool_dir/<node>
  std::string step_address;        // default: config.agent.step_address
  std::string controller_address;  // default: config.controller.agent_address
};

// Thread-safe: Start/Shutdown may be called from any thread.
class Agent {
 public:
  static Result<std::unique_ptr<Agent>> Create(AgentOptions options);
  ~Agent();

  // Probes the hardware, binds the step port and starts talking to the controller.
  Status Start();
  // Probes the hardware only (`musterd --probe`): what was found, and the [[nodes]] entry that
  // configures it.
  static Result<std::string> Probe(AgentOptions options);
  // Terminates every job on this node (SIGTERM, then SIGKILL) and stops. Idempotent.
  void Shutdown();
  // Stops without touching batch jobs (an agent restart or upgrade): they keep running under
  // their keepers and the next agent on this spool dir re-adopts them. Step tasks end (their I/O
  // runs through this process). Idempotent; after it, Shutdown does nothing.
  void Detach();

  const std::string& node_name() const;
  std::string step_address() const;
  bool connected() const;
  size_t num_jobs() const;

  // Tests: stop heartbeats (the node looks dead to the controller) and drop the session.
  void SetSilentForTest(bool silent);

 private:
  class Impl;
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::agent
