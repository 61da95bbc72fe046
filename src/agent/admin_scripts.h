// The admin's scripts: the prolog before a job starts on a node, the epilog after it is gone, and
// the periodic health check. They run as root with a clean environment (nothing of any user's
// leaks into them), their output captured, killed after their timeout; a failure drains the node
// (Slurm's rules).
//
// Io thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent_context.h"
#include "muster/v1/agent.pb.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

// Runs `program`; `done` gets "" on success, else why it failed: the first line of its output
// with text (as Slurm's health check reports it), its timeout, or its exit.
void RunAdminScript(AgentContext& ctx, const std::string& what, const std::string& program,
                    std::vector<std::string> env, uint32_t timeout_s,
                    std::function<void(const std::string& error)> done);

// What a prolog or epilog is told about its job (SLURM_JOB_ID, SLURM_JOB_USER, ...).
std::vector<std::string> AdminScriptEnv(const v1::LaunchJob& launch, const std::string& node,
                                        const std::string& visible_devices,
                                        const std::string& cgroup);

// `muster node reboot`, issued once the node has no job: [agent] reboot_program, checked again
// (CheckTrustedProgram), as root with MUSTER_REBOOT_REASON. A failure (no program, one another
// user could change, an exit, its timeout) is told to the controller, which drains the node
// with it; success is the host going down. The same order sent again in the same boot (the
// controller repeats it at each new session until the node is back from a new boot) is run
// once: a file in the job state directory holds the boot id and the order's issued_ms (a new
// boot makes it stale wherever it lives), and a failed run removes it.
void RunRebootProgram(AgentContext& ctx, const v1::RebootNode& order);

// health_check_program every health_check_interval_s; each result goes to the controller, which
// drains the node on failure and resumes it when the check passes again.
class HealthCheck {
 public:
  explicit HealthCheck(AgentContext& ctx) : ctx_(ctx), timer_(ctx.io) {}
  void Start();
  void Stop() { timer_.cancel(); }
  // The last result, sent again after a reconnect.
  const std::optional<v1::NodeHealth>& last() const { return last_; }

 private:
  void Run();
  void Done(const std::string& error);

  AgentContext& ctx_;
  boost::asio::steady_timer timer_;
  bool running_ = false;
  std::optional<v1::NodeHealth> last_;
};

}  // namespace muster::agent
