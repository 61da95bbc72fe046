#include "muster/metrics/metrics_server.h"

#include <string_view>

#include "muster/common/own_files.h"

namespace muster::metrics {
namespace {

// The time depends on what the peer sent, never on the token: not even its length shows.
bool TokenMatches(const std::string& expected, std::string_view authorization) {
  const std::string want = "Bearer " + expected;
  size_t diff = authorization.size() ^ want.size();
  for (size_t i = 0; i < authorization.size(); ++i) {
    diff |= static_cast<unsigned char>(authorization[i] ^ want[i % want.size()]);
  }
  volatile size_t result = diff;  // no early exit
  return result == 0;
}

}  // namespace

MetricsServer::MetricsServer(boost::asio::io_context& io, std::string server, std::string token,
                             Render render)
    : http_(io, std::move(server), "metrics", kMaxConnections,
            [token = std::move(token), render = std::move(render)](
                const HttpRequest& req, std::function<void(HttpResponse)> reply) {
              HttpResponse r;
              if (req.target != "/metrics") {
                r.status = 404;
                r.body = "try /metrics\n";
                return reply(std::move(r));
              }
              if (!TokenMatches(token, req.authorization)) {
                r.status = 401;
                r.body = "a bearer token is required\n";
                r.headers.push_back({"WWW-Authenticate", "Bearer"});
                return reply(std::move(r));
              }
              render([reply = std::move(reply)](std::string body) {
                HttpResponse ok;
                ok.content_type = "text/plain; version=0.0.4; charset=utf-8";
                ok.body = std::move(body);
                reply(std::move(ok));
              });
            }) {}

MetricsServer::~MetricsServer() = default;

Result<std::string> ReadMetricsToken(const std::string& path) {
  MUSTER_ASSIGN_OR_RETURN(std::string text,
                          ReadProtectedFile(path, "the metrics token", /*secret=*/true, 4096));
  const std::string token = text.substr(0, text.find('\n'));
  if (token.size() < 16) {
    return InvalidArgument("the metrics token in " + path +
                           " is shorter than 16 characters (make one: `openssl rand -hex 32`)");
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return InvalidArgument("the metrics token in " + path +
                             " has a character that is not printable ASCII");
    }
  }
  return token;
}

}  // namespace muster::metrics
