// The step service: `muster run` and srun connect to each node of a step and present the job's
// credential; once the request is checked against its job and grant, a StepSupervisor takes the
// connection and runs the step (its tasks as the job's user, their I/O, signals, exits), and the
// controller hears when it ended.
//
// Io thread, but for Listen and address().
#pragma once

#include <memory>
#include <string>

#include "agent_context.h"
#include "job_supervisor.h"
#include "muster/common/status.h"

namespace muster::agent {

class StepService {
 public:
  // What the port holds is bounded before anyone is authenticated: a request's size, the time it
  // may take to arrive (AgentOptions.step_request_deadline_ms), and how many connections may be
  // open (and how many of them unproven).
  static constexpr uint32_t kMaxRequestBytes = 4u << 20;
  static constexpr int kMaxSessions = 1024;
  static constexpr int kMaxUnauthenticated = 64;
  struct Counts {
    int sessions = 0;
    int unauthenticated = 0;
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
};

}  // namespace muster::agent
