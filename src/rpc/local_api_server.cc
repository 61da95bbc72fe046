#include "local_api_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>

#include "muster/common/framing.h"
#include "muster/common/job_limits.h"

namespace muster::rpc {

namespace asio = boost::asio;

class LocalApiServer::Admission {
 public:
  explicit Admission(LocalApiServerOptions options) : options_(options) {}
  const LocalApiServerOptions& options() const { return options_; }
  // Counts a new connection of `uid`; false when over a limit.
  bool Admit(uid_t uid) {
    std::lock_guard<std::mutex> l(mu_);
    if (total_ >= options_.max_connections || per_user_[uid] >= options_.max_connections_per_user) {
      return false;
    }
    ++per_user_[uid];
    ++total_;
    return true;
  }
  void Release(uid_t uid) {
    std::lock_guard<std::mutex> l(mu_);
    if (--per_user_[uid] == 0) per_user_.erase(uid);
    --total_;
  }

 private:
  const LocalApiServerOptions options_;
  std::mutex mu_;
  std::map<uid_t, int> per_user_;  // mu_
  int total_ = 0;                  // mu_
};

// One client connection: frames in, frames out, in order.
class LocalApiServer::Connection final : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ApiDispatcher& dispatcher, std::shared_ptr<Admission> admission,
             asio::local::stream_protocol::socket socket)
      : dispatcher_(dispatcher),
        admission_(std::move(admission)),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        session_(std::make_shared<ClientSession>()) {}
  ~Connection() {
    if (admitted_) admission_->Release(session_->caller.uid);
  }

  void Start(const Config& config) {
    struct ucred cred {};
    socklen_t len = sizeof cred;
    if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("local api: cannot read peer credentials; closing");
      return;
    }
    session_->caller = ResolveCaller(cred.uid, cred.gid, config);
    if (!admission_->Admit(cred.uid)) {
      // Told why, then closed: the limit is per user, so others are not affected.
      reply_ = EncodeFrame(static_cast<uint32_t>(StatusCode::kResourceExhausted),
                           "too many connections from uid " + std::to_string(cred.uid) +
                               " to the controller; close some and try again");
      boost::system::error_code ignored;
      asio::write(socket_, asio::buffer(reply_), ignored);
      return;
    }
    admitted_ = true;
    Read();
  }

 private:
  // The next request: one already received, or more bytes from the client.
  void Read() {
    Frame f;
    if (frames_.Pop(&f)) return Handle(std::move(f));
    ArmDeadline();
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(chunk_), [this, self](auto ec, size_t n) {
      if (ec) return Closed();
      if (Status st = frames_.Append(chunk_.data(), n); !st.ok()) {
        spdlog::warn("local api: {} from uid={}; closing", st.message(), session_->caller.uid);
        return Closed();
      }
      Read();
    });
  }

  // A request that has started must arrive in full within the deadline; between requests a
  // connection may idle (an allocation's owner holds one open for as long as it runs).
  void ArmDeadline() {
    if (!frames_.mid_frame()) {
      if (deadline_armed_) deadline_.cancel();
      deadline_armed_ = false;
      return;
    }
    if (deadline_armed_) return;  // counted from the request's first byte, not its latest
    deadline_armed_ = true;
    deadline_.expires_after(std::chrono::milliseconds(admission_->options().request_deadline_ms));
    auto self = shared_from_this();
    deadline_.async_wait([this, self](auto ec) {
      if (ec) return;  // cancelled: the request arrived, or the connection ended
      spdlog::warn("local api: uid={} sent part of a request and stalled; closing",
                   session_->caller.uid);
      boost::system::error_code ignored;
      socket_.close(ignored);
    });
  }

  void Handle(Frame f) {
    deadline_.cancel();
    deadline_armed_ = false;
    auto self = shared_from_this();
    dispatcher_.Dispatch(session_, f.type, std::move(f.payload), [this, self](ApiReply r) {
      asio::post(socket_.get_executor(), [this, self, r = std::move(r)] { Reply(r); });
    });
  }

  void Reply(const ApiReply& r) {
    auto self = shared_from_this();
    reply_ = EncodeFrame(static_cast<uint32_t>(r.status.code()),
                         r.status.ok() ? r.payload : r.status.message());
    asio::async_write(socket_, asio::buffer(reply_), [this, self](auto ec, size_t) {
      reply_.clear();
      reply_.shrink_to_fit();  // a large listing is not kept for the connection's life
      if (ec) return Closed();
      Read();
    });
  }

  // The client is gone: so are the allocations it held (a released one is unaffected).
  void Closed() {
    deadline_.cancel();
    dispatcher_.SessionClosed(session_);
  }

  ApiDispatcher& dispatcher_;  // used only while the io_context runs, which the server outlives
  std::shared_ptr<Admission> admission_;
  asio::local::stream_protocol::socket socket_;
  asio::steady_timer deadline_;
  std::shared_ptr<ClientSession> session_;
  bool admitted_ = false;
  bool deadline_armed_ = false;
  FrameAssembler frames_{kMaxApiRequestBytes};
  std::array<char, 16 * 1024> chunk_;
  std::string reply_;
};

LocalApiServer::LocalApiServer(asio::io_context& io, ApiDispatcher& dispatcher,
                               const Config& config, LocalApiServerOptions options)
    : io_(io),
      dispatcher_(dispatcher),
      config_(config),
      admission_(std::make_shared<Admission>(options)),
      acceptor_(asio::make_strand(io)) {}

Status LocalApiServer::Listen(const std::string& path) {
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
  acceptor_.open(asio::local::stream_protocol(), ec);
  if (!ec) acceptor_.bind(asio::local::stream_protocol::endpoint(path), ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Internal("cannot listen on " + path + ": " + ec.message());
  ::chmod(path.c_str(), 0666);  // every local user may talk; SO_PEERCRED says who they are
  asio::post(acceptor_.get_executor(), [this] { Accept(); });
  return Status::Ok();
}

void LocalApiServer::Accept() {
  // Each connection runs on a strand of its own (its reads, writes and deadline never run at
  // once), not on the acceptor's.
  acceptor_.async_accept(
      asio::make_strand(io_),
      [this](boost::system::error_code ec, asio::local::stream_protocol::socket socket) {
        if (ec) {
          if (ec != asio::error::operation_aborted) {
            spdlog::error("local api accept: {}", ec.message());
            Accept();
          }
          return;
        }
        std::make_shared<Connection>(dispatcher_, admission_, std::move(socket))->Start(config_);
        Accept();
      });
}

void LocalApiServer::Close() {
  std::promise<void> done;
  asio::post(acceptor_.get_executor(), [&] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    done.set_value();
  });
  done.get_future().wait();
}

}  // namespace muster::rpc
