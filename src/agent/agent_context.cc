#include "agent_context.h"

namespace muster::agent {

void AgentContext::WatchExit(pid_t pid, int pidfd, std::function<void(int)> done) {
  auto sd = std::make_shared<boost::asio::posix::stream_descriptor>(io, pidfd);
  sd->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                 [this, sd, pid, done = std::move(done)](boost::system::error_code) {
                   const int status = launcher.Reap(pid, /*our_child=*/true);
                   done(status < 0 ? 0 : status);
                 });
}

}  // namespace muster::agent
