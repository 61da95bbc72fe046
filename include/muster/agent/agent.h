// musterd as a library: the daemon's main() and the in-process test cluster run this same class;
// several agents may live in one process (distinct names, spool dirs and ports). Its parts
// (src/agent/): discovery, the controller session (heartbeats, epoch fence), the job supervisor,
// the job spool (re-adoption after a restart), the step service, the admin's scripts, GPU health;
// and two seams, the Launcher (how processes start) and the ControllerLink (how the controller is
// reached), which tests replace with fakes.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "muster/agent/agent_options.h"
#include "muster/common/config.h"
#include "muster/common/status.h"

namespace muster::agent {

// Thread-safe: Start and the ways to stop may be called from any thread.
class Agent {
 public:
  static Result<std::unique_ptr<Agent>> Create(AgentOptions options);
  ~Agent();

  // Probes the hardware, re-adopts what a previous agent left running, binds the step port and
  // starts talking to the controller.
  Status Start();
  // Probes the hardware only (`musterd --probe`): what was found, and the [[nodes]] entry that
  // configures it.
  static Result<std::string> Probe(AgentOptions options);

  // Stops as the configuration says: with agent.kill_jobs_on_stop the jobs end (Shutdown),
  // otherwise they keep running for the next agent (Detach), as a real node's do.
  void Stop();
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
  // Commands refused because they came from a controller older than one this node obeyed.
  uint64_t refused_commands() const;
  // The port of its /metrics ([agent] metrics_address); 0 when it serves none.
  int metrics_port() const;
  // Runs `fn` on the agent's event loop (its io thread), after what is queued there: a watchdog
  // pinged from there stops when the loop is wedged. Dropped (false) once the agent has stopped.
  bool PostToLoop(std::function<void()> fn);

  // Tests: stop heartbeats (the node looks dead to the controller) and drop the session.
  void SetSilentForTest(bool silent);

 private:
  class Impl;
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::agent
