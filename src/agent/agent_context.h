// What the agent's parts share: its options (resolved at start), the io thread's context where
// all of them run, the executor and clock the job lifecycles' timers run on, the launcher, the
// job cgroups, the node's inventory, and the way to the controller.
//
// Used on the agent's io thread, but for the inventory (guarded by `mu`: the link thread reads it
// to register).
#pragma once

// clang-format off
#include <utility>  // Asio 1.74 uses std::exchange without including <utility> itself
#include <boost/asio.hpp>
// clang-format on
#include <functional>
#include <mutex>
#include <string>

#include "agent_metrics.h"
#include "cgroup.h"
#include "muster/agent/agent_options.h"
#include "muster/agent/launcher.h"
#include "muster/common/clock.h"
#include "muster/common/executor.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

class AgentContext {
 public:
  AgentContext(AgentOptions& options, boost::asio::io_context& io, Executor& executor,
               const Clock& clock, Launcher& launcher)
      : options(options), io(io), executor(executor), clock(clock), launcher(launcher) {}

  const std::string& node() const { return options.node_name; }
  // To the controller; dropped while there is no session (what matters is sent again after the
  // next registration).
  void Send(const v1::AgentMessage& msg) const {
    if (send) send(msg);
  }
  // Runs `done` on the io thread with the process's wait status once `pidfd` says it exited.
  void WatchExit(pid_t pid, int pidfd, std::function<void(int status)> done);

  AgentOptions& options;
  boost::asio::io_context& io;
  // Timers of the jobs' lives run on it (the io thread in the daemon); `clock` is the wall
  // clock their time limits are measured on. Tests give both a virtual clock.
  Executor& executor;
  const Clock& clock;
  Launcher& launcher;
  JobCgroups cgroups;                                 // set at start
  std::function<void(const v1::AgentMessage&)> send;  // set at start
  bool stopping = false;                              // no new work: the agent is stopping
  // What step credentials are checked with; from the controller at each registration, kept in
  // memory only (a restarted agent gets it again when it registers).
  std::string step_key;
  // This agent process's instance (new at each start): a step grant names the one it is for.
  std::string instance_id;
  AgentCounters counters;  // for /metrics
  mutable std::mutex mu;
  v1::NodeInventory inventory;  // mu
};

}  // namespace muster::agent
