// The agent's connection to the controller: Register, then one Session stream; reconnects with
// jittered exponential backoff. Runs its own thread (gRPC's blocking API); callbacks run on it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "muster/v1/node.grpc.pb.h"

namespace muster::agent {

// Thread-safe.
class ControllerLink {
 public:
  struct Callbacks {
    // Builds the registration (inventory, jobs held). Called on the link thread.
    std::function<v1::RegisterRequest()> make_register;
    // The session is up (registered and Hello sent). Called on the link thread.
    std::function<void(const v1::RegisterResponse&)> on_connected;
    std::function<void(v1::ControllerMessage)> on_message;
    std::function<void()> on_disconnected;
  };

  ControllerLink(std::string address, std::string node, std::string instance_id, Callbacks cb);
  ~ControllerLink();

  void Start();
  void Stop();
  // False when there is no session (the message is dropped; state is re-sent on reconnect).
  bool Send(const v1::AgentMessage& msg);
  bool connected() const { return connected_.load(); }
  // Paused: drop the session and do not reconnect until unpaused (tests simulate a dead node).
  void SetPausedForTest(bool paused);

 private:
  void Run();
  void SleepBackoff(int* backoff_ms);

  const std::string address_, node_, instance_id_;
  Callbacks cb_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::atomic<bool> paused_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  grpc::ClientContext* ctx_ = nullptr;  // guarded by mu_
  grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>* stream_ = nullptr;  // mu_
  std::mutex write_mu_;
};

}  // namespace muster::agent
