// The agent's connection to the controller: Register, then one Session stream for heartbeats,
// reports and commands, reconnecting with backoff (the gRPC link, NewGrpcControllerLink). Tests
// give the agent a fake link and play the controller themselves.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "muster/common/tls_files.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

// Thread-safe.
class ControllerLink {
 public:
  // Called on the link's own thread.
  struct Callbacks {
    // Builds the registration (inventory, the jobs held, the jobs whose state was lost).
    std::function<v1::RegisterRequest()> make_register;
    // The session is up (registered and Hello sent).
    std::function<void(const v1::RegisterResponse&)> on_connected;
    std::function<void(v1::ControllerMessage)> on_message;
    std::function<void()> on_disconnected;
    // Whether a controller answering at this epoch is older than one this node obeyed. With
    // several controllers the link then tries the next: a deposed leader that still answers
    // has its commands refused anyway, and the new leader is elsewhere. May be empty.
    std::function<bool(uint64_t epoch)> is_stale;
  };

  virtual ~ControllerLink() = default;
  virtual void Start() = 0;
  // Drops the session and stops reconnecting; no callback runs after it returns.
  virtual void Stop() = 0;
  // False when there is no session: the message is dropped (what matters is sent again after the
  // next registration).
  virtual bool Send(const v1::AgentMessage& msg) = 0;
  virtual bool connected() const = 0;
  // Paused: drop the session and do not reconnect until unpaused (tests simulate a dead node).
  virtual void SetPausedForTest(bool paused) = 0;
};

// Makes the link for (controller address, node name, agent instance id, callbacks).
using ControllerLinkFactory = std::function<std::unique_ptr<ControllerLink>(
    const std::string& address, const std::string& node, const std::string& instance_id,
    ControllerLink::Callbacks callbacks)>;

// How the link proves itself and checks the controller: this node's certificate and key, the CA,
// and the name the controller's certificate must carry.
struct ControllerLinkTls {
  TlsIdentity identity;
  std::string controller_name;
};

// The real link: gRPC NodeRegistry, jittered exponential backoff. Mutual TLS when tls is set,
// plain TCP otherwise, each registration then answering the controller's challenge with
// node_key ([node_auth]). With several addresses (a hot standby's controllers), one that does not
// answer is passed over for the next at once; only a whole round of failures backs off.
std::unique_ptr<ControllerLink> NewGrpcControllerLink(const std::vector<std::string>& addresses,
                                                      const std::string& node,
                                                      const std::string& instance_id,
                                                      std::optional<ControllerLinkTls> tls,
                                                      std::string node_key,
                                                      ControllerLink::Callbacks callbacks);

}  // namespace muster::agent
