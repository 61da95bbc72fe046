#include "api_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>

#include "munge_verifier.h"
#include "muster/common/framing.h"
#include "muster/common/job_limits.h"
#include "muster/logging/log_limiter.h"
#include "request_rate.h"

namespace muster::rpc {

namespace asio = boost::asio;
using Socket = asio::generic::stream_protocol::socket;

namespace {

// An authentication request is a MUNGE credential of a few hundred bytes.
constexpr uint32_t kMaxAuthenticateBytes = 64 * 1024;

std::string PeerAddress(const Socket& socket) {
  boost::system::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return "?";
  char text[INET6_ADDRSTRLEN] = {};
  const sockaddr* sa = ep.data();
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
  } else if (sa->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof text);
  } else {
    return "?";
  }
  return text;
}

}  // namespace

// Connections per user and in all, and unauthenticated ones per address and in all.
struct ApiServer::Shared {
  Shared(ApiDispatcher& d, const Config& c, ApiServerOptions o)
      : dispatcher(d),
        config(c),
        options(o),
        rate(c.controller.user_request_rate, c.controller.user_request_burst) {}

  bool Admit(uid_t uid) {
    std::lock_guard<std::mutex> l(mu);
    if (total >= options.max_connections || per_user[uid] >= options.max_connections_per_user) {
      return false;
    }
    ++per_user[uid];
    ++total;
    return true;
  }
  void Release(uid_t uid) {
    std::lock_guard<std::mutex> l(mu);
    if (--per_user[uid] == 0) per_user.erase(uid);
    --total;
  }
  // An unauthenticated connection from `address`: false when that address has its fill (it is
  // refused). When all the slots are taken the oldest stranger is pushed out for it (`evict`
  // closes a connection), so that one peer holding them all cannot keep everyone else out.
  bool AdmitStranger(const std::string& address, uint64_t* serial, std::function<void()> evict) {
    std::function<void()> oldest;
    {
      std::lock_guard<std::mutex> l(mu);
      if (strangers_per_address[address] >= options.max_unauthenticated_per_address) {
        return false;
      }
      if (strangers >= options.max_unauthenticated && !stranger_queue.empty()) {
        oldest = std::move(stranger_queue.front().second);
        stranger_queue.pop_front();
      }
      ++strangers_per_address[address];
      ++strangers;
      *serial = next_stranger++;
      stranger_queue.emplace_back(*serial, std::move(evict));
    }
    if (oldest) {
      if (refusals.Allow()) {
        spdlog::warn("api: {} unauthenticated connections; closing the oldest",
                     options.max_unauthenticated);
      }
      oldest();
    }
    return true;
  }
  void ReleaseStranger(const std::string& address, uint64_t serial) {
    std::lock_guard<std::mutex> l(mu);
    if (--strangers_per_address[address] == 0) strangers_per_address.erase(address);
    --strangers;
    std::erase_if(stranger_queue, [&](const auto& e) { return e.first == serial; });
  }

  // Used only while the io_context runs, which the server and these outlive.
  ApiDispatcher& dispatcher;
  const Config& config;
  MungeVerifier* verifier = nullptr;  // the server's; set by ListenTcp before it accepts
  const ApiServerOptions options;
  RequestRateLimiter rate;
  LogLimiter refusals{"api: {} more refused connections not logged"};

 private:
  std::mutex mu;
  std::map<uid_t, int> per_user;                     // mu
  int total = 0;                                     // mu
  std::map<std::string, int> strangers_per_address;  // mu
  int strangers = 0;                                 // mu
  // The strangers, oldest first, each with what closes it (mu).
  std::list<std::pair<uint64_t, std::function<void()>>> stranger_queue;
  uint64_t next_stranger = 0;  // mu
};

// One client connection: frames in, frames out, in order.
class ApiServer::Connection final : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<Shared> shared, Socket socket)
      : shared_(std::move(shared)),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        throttle_(socket_.get_executor()),
        session_(std::make_shared<ClientSession>()) {}
  ~Connection() {
    if (admitted_) shared_->Release(session_->caller.uid);
    LeaveStrangers();
  }

  Socket::executor_type executor() { return socket_.get_executor(); }

  // Unix socket: the kernel says who is calling.
  void StartLocal() {
    struct ucred cred {};
    socklen_t len = sizeof cred;
    if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("api: cannot read a local peer's credentials; closing");
      return;
    }
    session_->origin = "local";
    Admitted(cred.uid, cred.gid);
    if (admitted_) Read();
  }

  // TCP: nobody yet, until the first request proves who with MUNGE, within the deadline.
  void StartRemote() {
    session_->origin = PeerAddress(socket_);
    int one = 1;
    ::setsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::weak_ptr<Connection> weak = shared_from_this();
    auto evict = [weak, executor = socket_.get_executor()] {
      asio::post(executor, [weak] {
        if (auto c = weak.lock(); c && !c->authenticated_) {
          c->LeaveStrangers();  // first: whoever sees the close finds the place free
          boost::system::error_code ignored;
          c->socket_.close(ignored);
        }
      });
    };
    if (!shared_->AdmitStranger(session_->origin, &stranger_serial_, std::move(evict))) {
      if (shared_->refusals.Allow()) {
        spdlog::warn("api: too many unauthenticated connections from {}; refused",
                     session_->origin);
      }
      return ReplyAndClose(ResourceExhausted(
          "too many connections from " + session_->origin + " that have not authenticated yet (" +
          std::to_string(shared_->options.max_unauthenticated_per_address) +
          " at most an address); authenticate or close some"));
    }
    stranger_ = true;
    frames_.set_max_payload(kMaxAuthenticateBytes);
    deadline_.expires_after(std::chrono::milliseconds(shared_->options.authenticate_deadline_ms));
    auto self = shared_from_this();
    deadline_.async_wait([this, self](auto ec) {
      if (ec || authenticated_) return;
      if (shared_->refusals.Allow()) {
        spdlog::warn("api: {} did not authenticate in time; closing", session_->origin);
      }
      LeaveStrangers();  // first: a peer that sees the close and reconnects finds the place free
      boost::system::error_code ignored;
      socket_.close(ignored);
    });
    Read();
  }

 private:
  void Admitted(uid_t uid, gid_t gid) {
    session_->caller = ResolveCaller(uid, gid, shared_->config);
    session_->caller.origin = session_->origin;
    if (!shared_->Admit(uid)) {
      // Told why, then closed: the limit is per user, so others are not affected.
      return ReplyAndClose(ResourceExhausted("too many connections from uid " +
                                             std::to_string(uid) +
                                             " to the controller; close some and try again"));
    }
    admitted_ = true;
    authenticated_ = true;
    frames_.set_max_payload(kMaxApiRequestBytes);
  }

  // The next request: one already received, or more bytes from the client.
  void Read() {
    Frame f;
    if (frames_.Pop(&f)) return Handle(std::move(f));
    ArmDeadline();
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(chunk_), [this, self](auto ec, size_t n) {
      if (ec) return Closed();
      if (Status st = frames_.Append(chunk_.data(), n); !st.ok()) {
        spdlog::warn("api: {} from {} ({}); closing", st.message(), Who(), session_->origin);
        return Closed();
      }
      Read();
    });
  }

  std::string Who() const {
    return authenticated_ ? "uid=" + std::to_string(session_->caller.uid) : "an unknown client";
  }

  // A request that has started must arrive in full within the deadline; between requests a
  // connection may idle (an allocation's owner holds one open for as long as it runs). Before
  // authentication the authentication deadline runs instead.
  void ArmDeadline() {
    if (!authenticated_) return;
    if (!frames_.mid_frame()) {
      if (deadline_armed_) deadline_.cancel();
      deadline_armed_ = false;
      return;
    }
    if (deadline_armed_) return;  // counted from the request's first byte, not its latest
    deadline_armed_ = true;
    deadline_.expires_after(std::chrono::milliseconds(shared_->options.request_deadline_ms));
    auto self = shared_from_this();
    deadline_.async_wait([this, self](auto ec) {
      if (ec) return;  // cancelled: the request arrived, or the connection ended
      spdlog::warn("api: {} ({}) sent part of a request and stalled; closing", Who(),
                   session_->origin);
      boost::system::error_code ignored;
      socket_.close(ignored);
    });
  }

  void Handle(Frame f) {
    if (f.type == v1::METHOD_AUTHENTICATE) return Authenticate(std::move(f));
    if (!authenticated_) {
      if (shared_->refusals.Allow()) {
        spdlog::warn("api: {} sent a request before authenticating; closing", session_->origin);
      }
      return ReplyAndClose(Unauthenticated(
          "authenticate first: over TCP the first request carries a MUNGE credential"));
    }
    deadline_.cancel();
    deadline_armed_ = false;
    // The user's turn: now, after a wait its rate calls for, or (too long a wait) not at all.
    auto wait = shared_->rate.Reserve(session_->caller.uid, std::chrono::steady_clock::now(),
                                      std::chrono::milliseconds(shared_->options.max_throttle_ms));
    if (!wait) {
      if (shared_->refusals.Allow()) {
        spdlog::warn("api: uid={} ({}) is over its request rate; request refused",
                     session_->caller.uid, session_->origin);
      }
      return Reply({ResourceExhausted("too many requests from " + session_->caller.user +
                                      " (controller.user_request_rate); slow down"),
                    ""},
                   false);
    }
    if (wait->count() > 0) {
      throttle_.expires_after(*wait);
      auto self = shared_from_this();
      auto frame = std::make_shared<Frame>(std::move(f));
      throttle_.async_wait([this, self, frame](auto ec) {
        if (!ec) Dispatch(std::move(*frame));
      });
      return;
    }
    Dispatch(std::move(f));
  }

  void Dispatch(Frame f) {
    auto self = shared_from_this();
    shared_->dispatcher.Dispatch(session_, f.type, std::move(f.payload), [this, self](ApiReply r) {
      asio::post(socket_.get_executor(), [this, self, r = std::move(r)] { Reply(r, false); });
    });
  }

  void Authenticate(Frame f) {
    if (authenticated_ || !shared_->verifier) {
      // Never a second identity on one connection, and never MUNGE on the local socket.
      return Reply({FailedPrecondition("this connection is already authenticated"), ""}, false);
    }
    v1::AuthenticateRequest req;
    if (!req.ParseFromString(f.payload)) {
      return ReplyAndClose(Unauthenticated("the authentication request does not parse"));
    }
    auto self = shared_from_this();
    shared_->verifier->Verify(req.munge_credential(), [this, self](Result<MungeIdentity> id) {
      asio::post(socket_.get_executor(),
                 [this, self, id = std::move(id)]() mutable { Authenticated(std::move(id)); });
    });
  }

  void Authenticated(Result<MungeIdentity> id) {
    if (!id.ok()) {
      if (shared_->refusals.Allow()) {
        spdlog::warn("api: {} failed to authenticate: {}", session_->origin, id.status().message());
      }
      Status why = id.status().code() == StatusCode::kUnavailable
                       ? id.status()
                       : Unauthenticated(id.status().message());
      return ReplyAndClose(why);
    }
    if (id->ttl_s > static_cast<int64_t>(shared_->config.munge.max_ttl_s)) {
      if (shared_->refusals.Allow()) {
        spdlog::warn("api: {} authenticated with a credential of {} s (munge.max_ttl_s {})",
                     session_->origin, id->ttl_s, shared_->config.munge.max_ttl_s);
      }
      return ReplyAndClose(Unauthenticated(
          "the MUNGE credential lives " + std::to_string(id->ttl_s) + " s, longer than the " +
          std::to_string(shared_->config.munge.max_ttl_s) + " s this controller accepts"));
    }
    deadline_.cancel();
    LeaveStrangers();
    Admitted(id->uid, id->gid);
    if (!admitted_) return;  // refused and closed
    spdlog::debug("api: {} authenticated as uid={} (MUNGE, encoded on {})", session_->origin,
                  id->uid, id->origin);
    v1::AuthenticateResponse resp;
    resp.set_uid(session_->caller.uid);
    resp.set_gid(session_->caller.gid);
    resp.set_user(session_->caller.user);
    Reply({Status::Ok(), resp.SerializeAsString()}, false);
  }

  void Reply(const ApiReply& r, bool close_after) {
    auto self = shared_from_this();
    reply_ = EncodeFrame(static_cast<uint32_t>(r.status.code()),
                         r.status.ok() ? r.payload : r.status.message());
    // The client must take it in time (the timer is free: no request is being read meanwhile).
    deadline_.expires_after(std::chrono::milliseconds(shared_->options.reply_deadline_ms));
    writing_ = true;
    deadline_.async_wait([this, self](auto ec) {
      if (ec || !writing_) return;  // written in time, or the connection ended
      if (shared_->refusals.Allow()) {
        spdlog::warn("api: {} ({}) did not read its reply in time; closing", Who(),
                     session_->origin);
      }
      boost::system::error_code ignored;
      socket_.close(ignored);
    });
    asio::async_write(socket_, asio::buffer(reply_), [this, self, close_after](auto ec, size_t) {
      writing_ = false;
      deadline_.cancel();
      reply_.clear();
      reply_.shrink_to_fit();  // a large listing is not kept for the connection's life
      if (ec || close_after) {
        boost::system::error_code ignored;
        socket_.shutdown(asio::socket_base::shutdown_both, ignored);
        return Closed();
      }
      Read();
    });
  }

  // Says why, then closes: nothing else is read from this connection.
  void ReplyAndClose(const Status& why) { Reply({why, ""}, true); }
  // A closed or authenticated connection gives its place back at once: the handlers still
  // holding the connection may outlive its socket by a moment, and a peer that reconnects
  // right after a deadline must not find its own dead connection counted against it.
  void LeaveStrangers() {
    if (!stranger_) return;
    stranger_ = false;
    shared_->ReleaseStranger(session_->origin, stranger_serial_);
  }

  // The client is gone: so are the allocations it held (a released one is unaffected).
  void Closed() {
    deadline_.cancel();
    throttle_.cancel();
    if (authenticated_) shared_->dispatcher.SessionClosed(session_);
  }

  std::shared_ptr<Shared> shared_;
  Socket socket_;
  asio::steady_timer deadline_;
  asio::steady_timer throttle_;  // holds a request back until its user's turn
  std::shared_ptr<ClientSession> session_;
  bool admitted_ = false;         // counted in the per-user limits
  bool stranger_ = false;         // counted as unauthenticated
  uint64_t stranger_serial_ = 0;  // its place among the strangers
  bool authenticated_ = false;    // session_->caller is who is calling
  bool deadline_armed_ = false;
  bool writing_ = false;  // a reply is on its way out (its deadline runs)
  FrameAssembler frames_{kMaxApiRequestBytes};
  std::array<char, 16 * 1024> chunk_;
  std::string reply_;
};

ApiServer::ApiServer(asio::io_context& io, ApiDispatcher& dispatcher, const Config& config,
                     ApiServerOptions options)
    : io_(io),
      shared_(std::make_shared<Shared>(dispatcher, config, options)),
      unix_(asio::make_strand(io)),
      tcp_(asio::make_strand(io)) {}

ApiServer::~ApiServer() = default;

Status ApiServer::ListenUnix(const std::string& path) {
  // Refuse to steal the socket from a live controller.
  std::error_code fec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), fec);
  if (std::filesystem::exists(path)) {
    auto probe = ConnectUnix(path);
    if (probe.ok()) {
      ::close(*probe);
      return FailedPrecondition("another controller is serving " + path);
    }
    std::filesystem::remove(path, fec);
  }
  boost::system::error_code ec;
  asio::local::stream_protocol::endpoint endpoint(path);
  unix_.open(asio::generic::stream_protocol(AF_UNIX, 0), ec);
  if (!ec) unix_.bind(asio::generic::stream_protocol::endpoint(endpoint), ec);
  if (!ec) unix_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Internal("cannot listen on " + path + ": " + ec.message());
  ::chmod(path.c_str(), 0666);  // every local user may talk; SO_PEERCRED says who they are
  asio::post(unix_.get_executor(), [this] { Accept(unix_, false); });
  return Status::Ok();
}

Result<int> ApiServer::ListenTcp(const std::string& address) {
  MUSTER_ASSIGN_OR_RETURN(const Munge* munge, Munge::Get());
  std::string host;
  uint16_t port = 0;
  MUSTER_RETURN_IF_ERROR(SplitHostPort(address, &host, &port));
  boost::system::error_code ec;
  asio::ip::tcp::resolver resolver(io_);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    return Internal("cannot resolve the API address " + address + ": " + ec.message());
  }
  asio::ip::tcp::endpoint endpoint = *results.begin();
  asio::generic::stream_protocol protocol(endpoint.protocol().family(), IPPROTO_TCP);
  tcp_.open(protocol, ec);
  if (!ec) tcp_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) tcp_.bind(asio::generic::stream_protocol::endpoint(endpoint), ec);
  if (!ec) tcp_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Internal("cannot listen for the API on " + address + ": " + ec.message());
  verifier_ = std::make_unique<MungeVerifier>(*munge, shared_->config.munge.socket,
                                              "muster-api:" + shared_->config.cluster_name);
  shared_->verifier = verifier_.get();
  const asio::generic::stream_protocol::endpoint local = tcp_.local_endpoint(ec);
  // sin_port and sin6_port sit at the same place.
  int bound_port = ec ? 0 : ntohs(reinterpret_cast<const sockaddr_in*>(local.data())->sin_port);
  asio::post(tcp_.get_executor(), [this] { Accept(tcp_, true); });
  return bound_port;
}

void ApiServer::Accept(Acceptor& acceptor, bool tcp) {
  // Each connection runs on a strand of its own (its reads, writes and deadline never run at
  // once), not on the acceptor's.
  acceptor.async_accept(
      asio::make_strand(io_), [this, &acceptor, tcp](boost::system::error_code ec, Socket socket) {
        if (ec) {
          // Closed (shutting down): an accept on it fails at once, again and again.
          if (ec != asio::error::operation_aborted && acceptor.is_open()) {
            spdlog::error("api accept: {}", ec.message());
            Accept(acceptor, tcp);
          }
          return;
        }
        auto connection = std::make_shared<Connection>(shared_, std::move(socket));
        asio::post(connection->executor(), [connection, tcp] {
          tcp ? connection->StartRemote() : connection->StartLocal();
        });
        Accept(acceptor, tcp);
      });
}

void ApiServer::Close() {
  for (Acceptor* acceptor : {&unix_, &tcp_}) {
    std::promise<void> done;
    asio::post(acceptor->get_executor(), [&] {
      boost::system::error_code ignored;
      acceptor->close(ignored);
      done.set_value();
    });
    done.get_future().wait();
  }
}

}  // namespace muster::rpc
