#include "muster/metrics/metrics_server.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <future>
#include <list>
#include <mutex>

#include "muster/common/framing.h"
#include "muster/common/own_files.h"
#include "muster/common/strings.h"
#include "muster/logging/log_limiter.h"

namespace muster::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {
class Connection;
}  // namespace

struct MetricsServer::Shared {
  std::string server;
  std::string token;
  Render render;
  std::atomic<bool> closed{false};
  LogLimiter refusals{"metrics: {} more refused connections not logged"};
  std::mutex mu;
  int connections = 0;  // mu
  // Those still reading their request, oldest first: the first to go when a new peer needs
  // room (a scraper sends its request at once; one who holds connections open does not).
  std::list<std::weak_ptr<Connection>> reading;  // mu
};

namespace {

// The time depends on what the peer sent, never on the token: not even its length shows.
bool TokenMatches(const std::string& expected, beast::string_view authorization) {
  const std::string want = "Bearer " + expected;
  size_t diff = authorization.size() ^ want.size();
  for (size_t i = 0; i < authorization.size(); ++i) {
    diff |= static_cast<unsigned char>(authorization[i] ^ want[i % want.size()]);
  }
  volatile size_t result = diff;  // no early exit
  return result == 0;
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<MetricsServer::Shared> shared, asio::ip::tcp::socket socket)
      : shared_(std::move(shared)), stream_(std::move(socket)) {}
  ~Connection() {
    std::lock_guard<std::mutex> l(shared_->mu);
    if (counted_) --shared_->connections;
    if (listed_) shared_->reading.erase(at_);
  }

  // Counted, and listed among those reading (both under shared->mu).
  void Admit(std::list<std::weak_ptr<Connection>>::iterator at) {
    counted_ = true;
    at_ = at;
    listed_ = true;
  }
  // Taken off that list by the acceptor (under shared->mu).
  void Unlist() { listed_ = false; }
  // Makes room for a newer peer: closes this one, still reading its request (any thread).
  void Evict() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->stream_.socket().close(ignored);
    });
  }

  void Start() {
    parser_.header_limit(MetricsServer::kMaxHeaderBytes);
    parser_.body_limit(0);  // a GET has no body
    stream_.expires_after(std::chrono::milliseconds(MetricsServer::kRequestTimeoutMs));
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (!ec) self->OnRequest();
                     });
  }

 private:
  void OnRequest() {
    {
      std::lock_guard<std::mutex> l(shared_->mu);
      if (listed_) shared_->reading.erase(at_);
      listed_ = false;
    }
    const auto& req = parser_.get();
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      return Reply(http::status::method_not_allowed, "only GET\n");
    }
    if (req.target() != "/metrics") return Reply(http::status::not_found, "try /metrics\n");
    if (!TokenMatches(shared_->token, req[http::field::authorization])) {
      return Reply(http::status::unauthorized, "a bearer token is required\n");
    }
    // The body comes from the daemon's strand; the reply goes out on this connection's.
    const bool head = req.method() == http::verb::head;
    shared_->render([self = shared_from_this(), head](std::string body) {
      asio::post(self->stream_.get_executor(), [self, head, body = std::move(body)]() mutable {
        self->Reply(http::status::ok, std::move(body), "text/plain; version=0.0.4; charset=utf-8",
                    head);
      });
    });
  }

  void Reply(http::status status, std::string body, const char* type = "text/plain; charset=utf-8",
             bool head = false) {
    res_.result(status);
    res_.version(11);
    res_.set(http::field::server, shared_->server);
    res_.set(http::field::content_type, type);
    res_.set(http::field::connection, "close");
    if (status == http::status::unauthorized) {
      res_.set(http::field::www_authenticate, "Bearer");
    }
    res_.keep_alive(false);
    if (head) {
      res_.content_length(body.size());
    } else {
      res_.body() = std::move(body);
      res_.prepare_payload();
    }
    stream_.expires_after(std::chrono::milliseconds(MetricsServer::kRequestTimeoutMs));
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code, size_t) {
      beast::error_code ignored;
      self->stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    });
  }

  std::shared_ptr<MetricsServer::Shared> shared_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{MetricsServer::kMaxHeaderBytes};
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> res_;
  std::list<std::weak_ptr<Connection>>::iterator at_;  // in shared_->reading (its mu)
  bool listed_ = false;                                // shared_->mu
  bool counted_ = false;                               // shared_->mu
};

}  // namespace

MetricsServer::MetricsServer(asio::io_context& io, std::string server, std::string token,
                             Render render)
    : io_(io),
      acceptor_(asio::make_strand(io)),
      retry_(acceptor_.get_executor()),
      shared_(std::make_shared<Shared>()) {
  shared_->server = std::move(server);
  shared_->token = std::move(token);
  shared_->render = std::move(render);
}

MetricsServer::~MetricsServer() = default;

Result<int> MetricsServer::Listen(const std::string& host_port) {
  std::string host;
  uint16_t port = 0;
  MUSTER_RETURN_IF_ERROR(SplitHostPort(host_port, &host, &port));
  beast::error_code ec;
  asio::ip::tcp::resolver resolver(acceptor_.get_executor());
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    return Internal("cannot resolve the metrics address " + host_port + ": " + ec.message());
  }
  const asio::ip::tcp::endpoint endpoint = *results.begin();
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Internal("cannot listen for metrics on " + host_port + ": " + ec.message());
  Accept();
  return static_cast<int>(acceptor_.local_endpoint().port());
}

void MetricsServer::Accept() {
  acceptor_.async_accept(
      asio::make_strand(io_),
      [this, shared = shared_](beast::error_code ec, asio::ip::tcp::socket socket) {
        if (shared->closed) return;
        if (ec) {
          // Out of descriptors, say: the connection stays queued, so try again in a while rather
          // than at once (a busy loop on the threads the controller's strand runs on).
          retry_.expires_after(std::chrono::milliseconds(100));
          retry_.async_wait([this, shared](beast::error_code wait) {
            if (!wait && !shared->closed) Accept();
          });
          return;
        }
        auto c = std::make_shared<Connection>(shared, std::move(socket));
        std::shared_ptr<Connection> evicted;
        bool admitted = true;
        {
          std::lock_guard<std::mutex> l(shared->mu);
          if (shared->connections >= kMaxConnections) {
            // Room for the newcomer: the oldest that has still not sent its request goes. One
            // already on its way out takes itself off the list.
            for (auto it = shared->reading.begin(); it != shared->reading.end(); ++it) {
              if ((evicted = it->lock())) {
                shared->reading.erase(it);
                evicted->Unlist();
                break;
              }
            }
            admitted = evicted != nullptr;
          }
          if (admitted) {
            ++shared->connections;
            c->Admit(shared->reading.insert(shared->reading.end(), c));
          }
        }
        if (evicted) evicted->Evict();
        if (admitted) {
          c->Start();
        } else {
          // Every connection is past its request (rendering or replying): they end by themselves.
          if (shared->refusals.Allow()) {
            spdlog::warn("metrics: {} connections answering at once; refused one", kMaxConnections);
          }
        }
        Accept();
      });
}

void MetricsServer::Close() {
  if (shared_->closed.exchange(true)) return;
  // On the acceptor's strand, and waited for: nothing posted outlives the server.
  std::promise<void> done;
  asio::post(acceptor_.get_executor(), [&] {
    beast::error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
    done.set_value();
  });
  done.get_future().wait();
}

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
