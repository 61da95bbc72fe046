// The user API's transports: framed protobuf (common/framing.h) on the controller's Unix socket,
// the caller known from SO_PEERCRED, and on TCP for commands on other hosts, where a connection's
// first request must prove its user with a MUNGE credential. Frames requests into the dispatch
// layer and replies back, in order, one request at a time per connection; nothing else. What one
// user (or, before it is known, one address) can make it hold is bounded: a request's size
// (memory growing only as bytes arrive), connections per user and in all, unauthenticated TCP
// connections per address and in all, and the time a started request or an authentication may
// take (ApiServerOptions).
#pragma once

// clang-format off
#include <utility>  // Asio 1.74 uses std::exchange without including <utility> itself
#include <boost/asio.hpp>
// clang-format on
#include <memory>
#include <string>

#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/rpc/api_dispatch.h"

namespace muster::rpc {

class MungeVerifier;

struct ApiServerOptions {
  int max_connections_per_user = 64;
  int max_connections = 4096;
  int request_deadline_ms = 30'000;  // from a request's first byte to its last
  // How long a client may take to read a reply (one page at most: a listing's are bounded). A
  // connection reads no next request before its reply is written, so one that asks and never
  // reads holds one reply until this, then is closed.
  int reply_deadline_ms = 30'000;
  // TCP connections that have not authenticated yet: how long they have, and how many may wait.
  int authenticate_deadline_ms = 10'000;
  int max_unauthenticated = 256;
  int max_unauthenticated_per_address = 32;
  // A user over its request rate (config controller.user_request_rate) waits at most this long
  // for its turn; beyond that the request is refused (RESOURCE_EXHAUSTED).
  int max_throttle_ms = 5'000;
};

// Listen* and Close are called once each, from any thread.
class ApiServer {
 public:
  ApiServer(boost::asio::io_context& io, ApiDispatcher& dispatcher, const Config& config,
            ApiServerOptions options = {});
  // After the io_context has stopped (handlers no longer run).
  ~ApiServer();

  // Binds `path` (mode 0666: every local user may talk; SO_PEERCRED says who they are) and starts
  // accepting. FAILED_PRECONDITION when another controller serves it; INTERNAL when it cannot bind.
  Status ListenUnix(const std::string& path);
  // Binds host:port for other hosts and starts accepting; returns the port (port 0: any). Each
  // connection authenticates with MUNGE (config.munge.socket) before anything else.
  // FAILED_PRECONDITION when MUNGE is not installed; INTERNAL when it cannot bind.
  Result<int> ListenTcp(const std::string& address);
  // Stops accepting new connections and waits until the acceptors are closed.
  void Close();

  // What connections share; they may outlive the server (their pending handlers go with the
  // io_context).
  struct Shared;

 private:
  class Connection;
  using Acceptor = boost::asio::basic_socket_acceptor<boost::asio::generic::stream_protocol>;
  void Accept(Acceptor& acceptor, bool tcp);

  boost::asio::io_context& io_;
  std::shared_ptr<Shared> shared_;
  // Destroyed with the server, after the io_context has stopped running handlers (the
  // connections reach it through Shared only from handlers).
  std::unique_ptr<MungeVerifier> verifier_;
  Acceptor unix_;  // each acceptor on a strand of its own
  Acceptor tcp_;
};

}  // namespace muster::rpc
