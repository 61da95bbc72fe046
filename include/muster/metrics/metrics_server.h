// `/metrics` over HTTP for Prometheus, as each daemon serves it. Every scraper must present the
// bearer token of the daemon's metrics_token_file (Prometheus: `authorization:
// {credentials_file: ...}`): counts by account, the job mix and a node's tasks are not for every
// user with a shell on the network. What one peer
// may cost is bounded: kMaxConnections at once (when all are taken, the oldest still sending
// its request makes room for a newcomer), a request's headers within 8 KiB and sent within 5 s,
// one request per connection, GET /metrics only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>

#include "muster/common/status.h"

namespace muster::metrics {

class MetricsServer {
 public:
  static constexpr int kMaxConnections = 16;
  static constexpr size_t kMaxHeaderBytes = 8192;
  static constexpr int kRequestTimeoutMs = 5'000;

  // Produces the body, later if it must (from the daemon's own strand or thread), on any thread.
  using Render = std::function<void(std::function<void(std::string)> done)>;
  // `server`: the daemon's name, for the Server header.
  MetricsServer(boost::asio::io_context& io, std::string server, std::string token, Render render);
  // Close() first while the io_context runs, or destroy it once the io_context has stopped.
  ~MetricsServer();

  // Binds host:port and accepts; returns the bound port.
  Result<int> Listen(const std::string& host_port);
  // Stops accepting, and waits for that on the io_context (which must run on another thread than
  // the caller's); connections under way finish or time out.
  void Close();

  struct Shared;  // what connections share with the server (metrics_server.cc)

 private:
  void Accept();
  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;  // after an accept error, on the acceptor's strand
  std::shared_ptr<Shared> shared_;
};

// Reads the token file a daemon's metrics require: its first line, at least 16 characters, in
// a file only its owner (root or this process's user) may write and nobody else may read.
Result<std::string> ReadMetricsToken(const std::string& path);

}  // namespace muster::metrics
