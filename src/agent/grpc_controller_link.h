// The agent's gRPC link to the controller: Register, then one Session stream; reconnects with
// jittered exponential backoff. Runs its own thread (gRPC's blocking API); callbacks run on it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "muster/agent/controller_link.h"
#include "muster/grpc_client/client_thread.h"
#include "muster/v1/node.grpc.pb.h"

namespace muster::agent {

// Thread-safe.
class GrpcControllerLink final : public ControllerLink {
 public:
  GrpcControllerLink(std::vector<std::string> addresses, std::string node, std::string instance_id,
                     std::optional<ControllerLinkTls> tls, std::string node_key, Callbacks cb);
  ~GrpcControllerLink() override;

  void Start() override;
  void Stop() override;
  bool Send(const v1::AgentMessage& msg) override;
  bool connected() const override { return connected_.load(); }
  void SetPausedForTest(bool paused) override;

 private:
  void Run();
  void SleepBackoff(int* backoff_ms);

  const std::vector<std::string> addresses_;
  const std::string node_, instance_id_;
  const std::optional<ControllerLinkTls> tls_;
  const std::string node_key_;  // without TLS: answers the controller's challenges
  Callbacks cb_;
  grpc_client::ClientThread client_;  // the thread; cancels the call in progress on Stop
  std::atomic<bool> connected_{false};
  std::atomic<bool> paused_{false};
  std::mutex mu_;
  grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>* stream_ = nullptr;  // mu_
  std::mutex write_mu_;
};

}  // namespace muster::agent
