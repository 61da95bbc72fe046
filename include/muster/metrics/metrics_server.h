// `/metrics` over HTTP for Prometheus, as each daemon serves it. Every scraper must present the
// bearer token of the daemon's metrics_token_file (Prometheus: `authorization:
// {credentials_file: ...}`): counts by account, the job mix and a node's tasks are not for every
// user with a shell on the network. What one peer
// may cost is bounded: kMaxConnections at once (when all are taken, the oldest still sending
// its request makes room for a newcomer), a request's headers within 8 KiB and sent within 5 s,
// one request per connection, GET /metrics only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "muster/common/status.h"
#include "muster/metrics/http_server.h"

namespace muster::metrics {

class MetricsServer {
 public:
  static constexpr int kMaxConnections = 16;
  static constexpr size_t kMaxHeaderBytes = HttpServer::kMaxHeaderBytes;
  static constexpr int kRequestTimeoutMs = HttpServer::kRequestTimeoutMs;

  // Produces the body, later if it must (from the daemon's own strand or thread), on any thread.
  using Render = std::function<void(std::function<void(std::string)> done)>;
  // `server`: the daemon's name, for the Server header.
  MetricsServer(boost::asio::io_context& io, std::string server, std::string token, Render render);
  // Close() first while the io_context runs, or destroy it once the io_context has stopped.
  ~MetricsServer();

  // Binds host:port and accepts; returns the bound port.
  Result<int> Listen(const std::string& host_port) { return http_.Listen(host_port); }
  // Stops accepting (HttpServer::Close).
  void Close() { http_.Close(); }

 private:
  HttpServer http_;
};

// Reads the token file a daemon's metrics require: its first line, at least 16 characters, in
// a file only its owner (root or this process's user) may write and nobody else may read.
Result<std::string> ReadMetricsToken(const std::string& path);

}  // namespace muster::metrics
