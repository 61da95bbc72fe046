// Checks users' MUNGE credentials for the TCP API off the I/O threads: munged answers in well
// under a millisecond, but a stuck or restarting munged must not stall the connections of
// everyone else. One worker thread and a bounded queue; when it is full a credential is refused
// as busy rather than queued without end.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "muster/common/munge.h"
#include "muster/common/status.h"

namespace muster::rpc {

// Thread-safe.
class MungeVerifier {
 public:
  using Done = std::function<void(Result<MungeIdentity>)>;

  // munge: the loaded library; socket: munged's; payload: what every credential must carry.
  MungeVerifier(const Munge& munge, std::string socket, std::string payload,
                size_t max_queued = 256);
  // Stops the worker; credentials still queued get UNAVAILABLE.
  ~MungeVerifier();

  // `done` runs on the worker thread. UNAUTHENTICATED for a bad credential or one carrying
  // another payload; UNAVAILABLE when munged does not answer or too many wait.
  void Verify(std::string credential, Done done);

 private:
  void Run();

  const Munge& munge_;
  const std::string socket_, payload_;
  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::string, Done>> queue_;  // mu_
  bool stop_ = false;                               // mu_
  std::thread worker_;
};

}  // namespace muster::rpc
