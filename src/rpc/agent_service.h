// The agents' gRPC service (NodeRegistry): Register, then one Session stream per node. It turns
// what agents send into engine events on the controller's strand, and delivers the engine's
// commands to the sessions. No logic of its own.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "muster/controller/controller_runner.h"
#include "muster/credentials/node_proof.h"
#include "muster/logging/log_limiter.h"
#include "muster/v1/node.grpc.pb.h"

namespace muster::rpc {

// gRPC callbacks arrive on gRPC threads; Deliver and EndAll run on the strand.
class AgentService final : public v1::NodeRegistry::CallbackService,
                           public controller::AgentSessions {
 public:
  // With verify_node_names (mutual TLS), a Register or Hello is accepted only for the node its
  // client certificate names; without, a Register must answer a challenge with the node's key
  // ([node_auth]). Either way a Hello must carry the ticket of its node's last registration.
  AgentService(controller::ControllerRunner& runner, bool verify_node_names)
      : runner_(runner),
        verify_node_names_(verify_node_names),
        heartbeat_batch_ms_(
            std::clamp<int64_t>(runner.config().scheduling.heartbeat_interval_ms / 10, 1, 50)) {
    SetConfiguredNodes(runner.config().nodes);
  }
  // The nodes that may register: the config's (again after a reconfiguration). Thread-safe.
  void SetConfiguredNodes(const std::vector<NodeConfig>& nodes) {
    std::unordered_set<std::string> names;
    for (const auto& n : nodes) names.insert(n.name);
    std::lock_guard l(configured_mu_);
    configured_nodes_ = std::move(names);
  }

  grpc::ServerUnaryReactor* Challenge(grpc::CallbackServerContext* ctx,
                                      const v1::ChallengeRequest* req,
                                      v1::ChallengeResponse* resp) override;
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* req,
                                     v1::RegisterResponse* resp) override;
  grpc::ServerBidiReactor<v1::AgentMessage, v1::ControllerMessage>* Session(
      grpc::CallbackServerContext* ctx) override;

  // On the strand.
  void Deliver(std::vector<controller::Outgoing> commands) override;
  // Ends every session (the controller is stopping). On the strand.
  void EndAll(const std::string& why);

 private:
  class AgentSession;

  // OK when the peer may speak for `node`: always without TLS, else when its verified
  // certificate names the node. PERMISSION_DENIED otherwise, saying which names it carries.
  grpc::Status CheckPeerIsNode(const grpc::AuthContext* auth, const std::string& node);
  // Without TLS: OK when the registration answers one of our challenges with its node's key.
  grpc::Status CheckNodeProof(const v1::RegisterRequest& req);
  // Whether a Hello carries its node's last registration's ticket (on the strand).
  bool TicketMatches(const v1::Hello& hello) const;

  // Heartbeats only say "still here": they are collected and handed to the strand together every
  // heartbeat_batch_ms_ (a tenth of the heartbeat interval, at most 50 ms) instead of waking it
  // for each (2,500 a second at 12,500 nodes; the wake-ups, not the engine, were most of their
  // cost). Thread-safe.
  void Heard(const std::string& node, std::chrono::steady_clock::time_point arrived);
  void DrainHeard();  // on the strand

  controller::ControllerRunner& runner_;
  const bool verify_node_names_;
  const int64_t heartbeat_batch_ms_;
  std::map<std::string, AgentSession*> sessions_;  // strand-confined
  credentials::NodeChallenges challenges_;
  std::mutex configured_mu_;
  std::unordered_set<std::string> configured_nodes_;  // configured_mu_
  LogLimiter refusals_{"{} more refused agent registrations not logged"};
  // Per registered node: the instance and ticket of its last registration (strand-confined;
  // configured nodes only).
  std::map<std::string, std::pair<std::string, std::string>> tickets_;
  std::mutex heard_mu_;
  // Per node (configured nodes only: an unknown node's session never attaches), however many
  // heartbeats it sent in the batch: the first one's arrival, and how many.
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, uint32_t>> heard_;
  bool heard_armed_ = false;  // a drain is due; under heard_mu_
};

}  // namespace muster::rpc
