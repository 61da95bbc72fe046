// The user API on the controller's Unix socket: framed protobuf (common/framing.h), the caller
// known from SO_PEERCRED. Frames requests into the dispatch layer and replies back, in order, one
// request at a time per connection; nothing else. What one user can make it hold is bounded: a
// request's size (kMaxApiRequestBytes, memory growing only as bytes arrive), connections per
// user and in all, and the time a started request may take to arrive (LocalApiServerOptions).
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

struct LocalApiServerOptions {
  int max_connections_per_user = 64;
  int max_connections = 4096;
  int request_deadline_ms = 30'000;  // from a request's first byte to its last
};

// Listen and Close are called once each, from any thread.
class LocalApiServer {
 public:
  LocalApiServer(boost::asio::io_context& io, ApiDispatcher& dispatcher, const Config& config,
                 LocalApiServerOptions options = {});

  // Binds `path` (mode 0666: every local user may talk; SO_PEERCRED says who they are) and starts
  // accepting. FAILED_PRECONDITION when another controller serves it; INTERNAL when it cannot bind.
  Status Listen(const std::string& path);
  // Stops accepting new connections and waits until the acceptor is closed.
  void Close();

 private:
  class Connection;
  // Connections per user and in all. Shared with the connections, which may outlive the server
  // (their pending handlers go with the io_context).
  class Admission;
  void Accept();

  boost::asio::io_context& io_;
  ApiDispatcher& dispatcher_;
  const Config& config_;
  std::shared_ptr<Admission> admission_;
  boost::asio::local::stream_protocol::acceptor acceptor_;  // on its own strand
};

}  // namespace muster::rpc
