// A gRPC client's own thread and what its reconnect loop needs from it: a stop flag, the call in
// progress (which Stop cancels) and waits between attempts that Stop cuts short. The agent's
// controller link and the standby's replication follower run on one (gRPC's blocking API).
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace muster::grpc_client {

class ClientThread {
 public:
  ClientThread() = default;
  ~ClientThread();  // Stop()
  ClientThread(const ClientThread&) = delete;
  ClientThread& operator=(const ClientThread&) = delete;

  // Runs `loop` on the thread; it should return soon once stopping().
  void Start(std::function<void()> loop);
  // stopping() turns true for good, the current call is cancelled, a wait ends, and the thread is
  // joined. Not from the thread itself.
  void Stop();
  bool stopping() const { return stopping_.load(); }

  // The call Stop cancels (nullptr: none); it must stay alive until replaced. Once stopping,
  // none is kept and it returns false: the loop must not start that call (Stop cannot reach it).
  bool SetCurrent(grpc::ClientContext* ctx);
  // Cancels the current call without stopping.
  void CancelCurrent();
  // Sleeps for `duration` or until Stop; false when stopping.
  bool WaitFor(std::chrono::milliseconds duration);
  // Blocks until `ready()` or Stop. `ready` is checked under the thread's lock, and again after
  // each Wake(): whoever changes what it reads calls Wake() after.
  void WaitUntil(const std::function<bool()>& ready);
  void Wake();

 private:
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  grpc::ClientContext* current_ = nullptr;  // mu_
};

}  // namespace muster::grpc_client
