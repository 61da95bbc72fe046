// The step service: `muster run` and srun connect to each node of a step and present the job's
// credential; once the request is checked against its job and grant, a StepSupervisor takes the
// connection and runs the step (its tasks as the job's user, their I/O, signals, exits), and the
// controller hears when it ended.
//
// Io thread, but for Listen and address().
#pragma once

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "agent_context.h"
#include "job_supervisor.h"
#include "muster/common/log_limit.h"
#include "muster/common/status.h"

namespace muster::agent {

class StepService {
 public:
  // What the port holds is bounded before anyone is authenticated: a request's size, the time it
  // may take to arrive (AgentOptions.step_request_deadline_ms), and how many connections may be
  // open (and how many of them unproven).
  static constexpr uint32_t kMaxRequestBytes = 4u << 20;
  static constexpr int kMaxSessions = 1024;
  // Unproven connections: in all (a new one beyond it pushes out the oldest, so that one peer
  // holding them all cannot lock the port), and from one address (refused beyond it).
  static constexpr int kMaxUnauthenticated = 64;
  static constexpr int kMaxUnauthenticatedPerAddress = 8;
  struct Counts {
    int sessions = 0;
    int unauthenticated = 0;
    std::map<std::string, int> unauthenticated_from;  // by peer address
    // The unproven sessions, oldest first: what is pushed out when the port is full. Each
    // closes its socket when called.
    std::list<std::pair<uint64_t, std::function<void()>>> unproven;
    uint64_t next_serial = 0;
  };

  StepService(AgentContext& ctx, JobSupervisor& jobs);

  // Binds agent.step_address ("host:port", port 0: any) and starts accepting; `hostname` is the
  // address advertised when it binds every address. FAILED_PRECONDITION when it cannot listen.
  Status Listen(const std::string& step_address, const std::string& hostname);
  // "host:port" as clients reach it.
  const std::string& address() const { return address_; }
  void Close();

 private:
  void Accept();

  AgentContext& ctx_;
  JobSupervisor& jobs_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::string address_;
  std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();  // io thread
  LogLimit refusals_;  // refusals are logged, a flood of them is not
};

}  // namespace muster::agent
