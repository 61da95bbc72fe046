#include "local_api_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <memory>

#include "muster/common/framing.h"

namespace muster::rpc {

namespace asio = boost::asio;

// One client connection: frames in, frames out, in order.
class LocalApiServer::Connection final : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ApiDispatcher& dispatcher, asio::local::stream_protocol::socket socket)
      : dispatcher_(dispatcher),
        socket_(std::move(socket)),
        session_(std::make_shared<ClientSession>()) {}

  void Start(const Config& config) {
    struct ucred cred {};
    socklen_t len = sizeof cred;
    if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("local api: cannot read peer credentials; closing");
      return;
    }
    session_->caller = ResolveCaller(cred.uid, cred.gid, config);
    ReadHeader();
  }

 private:
  void ReadHeader() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(header_, 8), [this, self](auto ec, size_t) {
      if (ec) return Closed();  // client closed
      uint32_t len = 0;
      if (!DecodeFrameHeader(header_, &len, &method_).ok()) {
        spdlog::warn("local api: bad frame from uid={}; closing", session_->caller.uid);
        return Closed();
      }
      body_.resize(len);
      asio::async_read(socket_, asio::buffer(body_), [this, self](auto ec2, size_t) {
        if (ec2) return Closed();
        dispatcher_.Dispatch(session_, method_, std::move(body_), [this, self](ApiReply r) {
          asio::post(socket_.get_executor(), [this, self, r = std::move(r)] { Reply(r); });
        });
      });
    });
  }

  void Reply(const ApiReply& r) {
    auto self = shared_from_this();
    reply_ = EncodeFrame(static_cast<uint32_t>(r.status.code()),
                         r.status.ok() ? r.payload : r.status.message());
    asio::async_write(socket_, asio::buffer(reply_), [this, self](auto ec, size_t) {
      if (ec) return Closed();
      ReadHeader();
    });
  }

  // The client is gone: so are the allocations it held (a released one is unaffected).
  void Closed() { dispatcher_.SessionClosed(session_); }

  ApiDispatcher& dispatcher_;
  asio::local::stream_protocol::socket socket_;
  std::shared_ptr<ClientSession> session_;
  char header_[8];
  uint32_t method_ = 0;
  std::string body_;
  std::string reply_;
};

LocalApiServer::LocalApiServer(asio::io_context& io, ApiDispatcher& dispatcher,
                               const Config& config)
    : io_(io), dispatcher_(dispatcher), config_(config), acceptor_(asio::make_strand(io)) {}

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
  // Each connection's socket runs on the io_context itself, not on the acceptor's strand.
  acceptor_.async_accept(
      io_, [this](boost::system::error_code ec, asio::local::stream_protocol::socket socket) {
        if (ec) {
          if (ec != asio::error::operation_aborted) {
            spdlog::error("local api accept: {}", ec.message());
            Accept();
          }
          return;
        }
        std::make_shared<Connection>(dispatcher_, std::move(socket))->Start(config_);
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
