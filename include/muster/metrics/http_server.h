// The daemons' small HTTP endpoints (/metrics, the controller's web view): HTTP/1.1 on TCP, one
// request per connection, GET and HEAD only, no request body. What one peer may cost is
// bounded: `max_connections` at once (when all are taken, the oldest still sending its request
// makes room for a newcomer), a request's headers within kMaxHeaderBytes and sent within
// kRequestTimeoutMs. What to answer is the handler's.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "muster/common/status.h"

namespace muster::metrics {

struct HttpRequest {
  bool head = false;   // HEAD: the reply's body is not sent
  std::string target;  // "/queue?x=1", as sent
  std::string authorization;
  std::string cookie;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // Set-Cookie, Location, ...
  // Called once the connection that carried it is over (sent, or given up on), on any thread.
  std::function<void()> finished;
};

class HttpServer {
 public:
  static constexpr size_t kMaxHeaderBytes = 8192;
  static constexpr int kRequestTimeoutMs = 5'000;

  // Answers a request, later if it must (from the daemon's own strand or thread), on any thread.
  using Handler = std::function<void(const HttpRequest&, std::function<void(HttpResponse)>)>;
  // `server`: the daemon's name, for the Server header; `what`: the endpoint's, for logs.
  HttpServer(boost::asio::io_context& io, std::string server, std::string what, int max_connections,
             Handler handler);
  // Close() first while the io_context runs, or destroy it once the io_context has stopped.
  ~HttpServer();

  // Binds host:port and accepts; returns the bound port.
  Result<int> Listen(const std::string& host_port);
  // Stops accepting, and waits for that on the io_context (which must run on another thread than
  // the caller's); connections under way finish or time out.
  void Close();

  struct Shared;  // what connections share with the server (http_server.cc)

 private:
  void Accept();
  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;  // after an accept error, on the acceptor's strand
  std::shared_ptr<Shared> shared_;
};

}  // namespace muster::metrics
