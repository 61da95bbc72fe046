#include "muster/metrics/http_server.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <future>
#include <list>
#include <mutex>
#include <utility>

#include "muster/common/framing.h"
#include "muster/logging/log_limiter.h"

namespace muster::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {
class Connection;
}  // namespace

struct HttpServer::Shared {
  std::string server;
  std::string what;
  int max_connections = 16;
  Handler handler;
  std::atomic<bool> closed{false};
  LogLimiter refusals{"http: {} more refused connections not logged"};
  std::mutex mu;
  int connections = 0;  // mu
  // Those still reading their request, oldest first: the first to go when a new peer needs
  // room (a scraper sends its request at once; one who holds connections open does not).
  std::list<std::weak_ptr<Connection>> reading;  // mu
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<HttpServer::Shared> shared, asio::ip::tcp::socket socket)
      : shared_(std::move(shared)), stream_(std::move(socket)) {}
  ~Connection() {
    {
      std::lock_guard<std::mutex> l(shared_->mu);
      if (counted_) --shared_->connections;
      if (listed_) shared_->reading.erase(at_);
    }
    if (finished_) finished_();  // never written (the io_context stopped first)
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
    parser_.header_limit(HttpServer::kMaxHeaderBytes);
    parser_.body_limit(0);  // a GET has no body
    stream_.expires_after(std::chrono::milliseconds(HttpServer::kRequestTimeoutMs));
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
      HttpResponse r;
      r.status = 405;
      r.body = "only GET\n";
      r.headers.push_back({"Allow", "GET, HEAD"});
      // Plain text that no browser may read as anything else, as every page of the web view.
      r.headers.push_back({"X-Content-Type-Options", "nosniff"});
      r.headers.push_back({"Content-Security-Policy", "default-src 'none'"});
      r.headers.push_back({"Cache-Control", "no-store"});
      return Reply(std::move(r), false);
    }
    HttpRequest in;
    in.head = req.method() == http::verb::head;
    in.target = std::string(req.target());
    in.authorization = std::string(req[http::field::authorization]);
    in.cookie = std::string(req[http::field::cookie]);
    // The answer may come from the daemon's strand; the reply goes out on this connection's.
    shared_->handler(in, [self = shared_from_this(), head = in.head](HttpResponse r) {
      asio::post(self->stream_.get_executor(),
                 [self, head, r = std::move(r)]() mutable { self->Reply(std::move(r), head); });
    });
  }

  void Reply(HttpResponse r, bool head) {
    finished_ = std::move(r.finished);
    res_.result(static_cast<http::status>(r.status));
    res_.version(11);
    res_.set(http::field::server, shared_->server);
    res_.set(http::field::content_type, r.content_type);
    res_.set(http::field::connection, "close");
    for (const auto& [name, value] : r.headers) res_.insert(name, value);
    res_.keep_alive(false);
    if (head) {
      res_.content_length(r.body.size());
    } else {
      res_.body() = std::move(r.body);
      res_.prepare_payload();
    }
    stream_.expires_after(std::chrono::milliseconds(HttpServer::kRequestTimeoutMs));
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code, size_t) {
      beast::error_code ignored;
      self->stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
      // Sent or given up on: the answer is over, whoever still holds this connection.
      if (auto done = std::exchange(self->finished_, nullptr)) done();
    });
  }

  std::shared_ptr<HttpServer::Shared> shared_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{HttpServer::kMaxHeaderBytes};
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> res_;
  std::list<std::weak_ptr<Connection>>::iterator at_;  // in shared_->reading (its mu)
  bool listed_ = false;                                // shared_->mu
  bool counted_ = false;                               // shared_->mu
  std::function<void()> finished_;                     // the reply's
};

}  // namespace

HttpServer::HttpServer(asio::io_context& io, std::string server, std::string what,
                       int max_connections, Handler handler)
    : io_(io),
      acceptor_(asio::make_strand(io)),
      retry_(acceptor_.get_executor()),
      shared_(std::make_shared<Shared>()) {
  shared_->server = std::move(server);
  shared_->what = std::move(what);
  shared_->max_connections = max_connections;
  shared_->handler = std::move(handler);
}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::Listen(const std::string& host_port) {
  std::string host;
  uint16_t port = 0;
  MUSTER_RETURN_IF_ERROR(SplitHostPort(host_port, &host, &port));
  beast::error_code ec;
  asio::ip::tcp::resolver resolver(acceptor_.get_executor());
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    return Internal("cannot resolve the " + shared_->what + " address " + host_port + ": " +
                    ec.message());
  }
  const asio::ip::tcp::endpoint endpoint = *results.begin();
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Internal("cannot listen for " + shared_->what + " on " + host_port + ": " +
                    ec.message());
  }
  Accept();
  return static_cast<int>(acceptor_.local_endpoint().port());
}

void HttpServer::Accept() {
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
          if (shared->connections >= shared->max_connections) {
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
            spdlog::warn("{}: {} connections answering at once; refused one", shared->what,
                         shared->max_connections);
          }
        }
        Accept();
      });
}

void HttpServer::Close() {
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

}  // namespace muster::metrics
