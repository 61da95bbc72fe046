// The user API on the controller's Unix socket: framed protobuf (common/framing.h), the caller
// known from SO_PEERCRED. Frames requests into the dispatch layer and replies back, in order, one
// request at a time per connection; nothing else.
#pragma once

// clang-format off
#include <utility>  // Asio 1.74 uses std::exchange without including <utility> itself
#include <boost/asio.hpp>
// clang-format on
#include <string>

#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/rpc/api_dispatch.h"

namespace muster::rpc {

// Listen and Close are called once each, from any thread.
class LocalApiServer {
 public:
  LocalApiServer(boost::asio::io_context& io, ApiDispatcher& dispatcher, const Config& config);

  // Binds `path` (mode 0666: every local user may talk; SO_PEERCRED says who they are) and starts
  // accepting. FAILED_PRECONDITION when another controller serves it; INTERNAL when it cannot bind.
  Status Listen(const std::string& path);
  // Stops accepting new connections and waits until the acceptor is closed.
  void Close();

 private:
  class Connection;
  void Accept();

  boost::asio::io_context& io_;
  ApiDispatcher& dispatcher_;
  const Config& config_;
  boost::asio::local::stream_protocol::acceptor acceptor_;  // on its own strand
};

}  // namespace muster::rpc
