#include "muster/rpc/controller_server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "muster/common/framing.h"
#include "muster/controller/engine.h"
#include "muster/rpc/api_dispatch.h"
#include "muster/store/state_store.h"
#include "muster/v1/node.grpc.pb.h"

namespace muster::rpc {

namespace asio = boost::asio;
using controller::Engine;

class ControllerServer::Impl final : public v1::NodeRegistry::CallbackService {
 public:
  explicit Impl(ControllerServerOptions options)
      : options_(std::move(options)),
        strand_(asio::make_strand(io_)),
        tick_timer_(strand_),
        sched_timer_(strand_),
        acceptor_(io_) {}

  ~Impl() override { Shutdown(); }

  Status Start();
  void Shutdown();
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return stopped_; });
  }

  int agent_port_ = 0;
  uint64_t epoch_ = 0;
  ControllerServerOptions options_;

 private:
  class AgentSession;
  class LocalConnection;

  // gRPC NodeRegistry.
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* req,
                                     v1::RegisterResponse* resp) override;
  grpc::ServerBidiReactor<v1::AgentMessage, v1::ControllerMessage>* Session(
      grpc::CallbackServerContext* ctx) override;

  TimeMs Now() const { return options_.clock->NowMs(); }
  // Every engine event ends here: deliver commands, arm the scheduling timer. On the strand.
  void AfterEvent();
  void ArmTick();
  void StartPass();
  void DoAccept();
  void RunOnStrandAndWait(std::function<void()> fn);

  asio::io_context io_;
  asio::strand<asio::io_context::executor_type> strand_;
  asio::steady_timer tick_timer_;
  asio::steady_timer sched_timer_;
  bool sched_armed_ = false;
  // The core's part of a pass runs here, off the strand, so requests and agent messages are
  // served while it computes; one pass at a time.
  asio::thread_pool sched_pool_{1};
  // sacct's scans of the archive (store reads only), off the strand too.
  asio::thread_pool query_pool_{1};
  bool pass_running_ = false;
  asio::local::stream_protocol::acceptor acceptor_;
  std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;

  std::unique_ptr<store::StateStore> store_;
  std::unique_ptr<Engine> engine_;                 // strand-confined
  std::map<std::string, AgentSession*> sessions_;  // strand-confined
  std::unique_ptr<grpc::Server> grpc_server_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool stopped_ = false;
};

// ---------------------------------------------------------------------------------------------
// One agent's Session stream. gRPC callbacks arrive on gRPC threads; anything touching the engine
// is posted to the strand. Writes are queued, one in flight at a time.
class ControllerServer::Impl::AgentSession final
    : public grpc::ServerBidiReactor<v1::AgentMessage, v1::ControllerMessage> {
 public:
  explicit AgentSession(Impl* server) : server_(server) { StartRead(&in_); }

  // Thread-safe.
  void Send(v1::ControllerMessage msg) {
    std::lock_guard<std::mutex> l(mu_);
    if (finished_) return;
    out_.push_back(std::move(msg));
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
  }

  // Thread-safe, idempotent.
  void End(const grpc::Status& status) {
    std::lock_guard<std::mutex> l(mu_);
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      End(grpc::Status::OK);
      return;
    }
    v1::AgentMessage msg = std::move(in_);
    in_.Clear();
    if (node_.empty()) {
      if (msg.msg_case() != v1::AgentMessage::kHello) {
        End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "first message must be Hello"));
        return;
      }
      node_ = msg.hello().node();
      instance_ = msg.hello().instance_id();
      asio::post(server_->strand_, [this, hello = msg.hello()] {
        Status s = server_->engine_->AttachSession(hello, server_->Now());
        if (!s.ok()) {
          End(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, s.message()));
        } else {
          auto it = server_->sessions_.find(node_);
          if (it != server_->sessions_.end() && it->second != this) {
            it->second->End(grpc::Status(grpc::StatusCode::ABORTED, "replaced by a new session"));
          }
          server_->sessions_[node_] = this;
          attached_ = true;
        }
        server_->AfterEvent();
      });
    } else {
      asio::post(server_->strand_, [this, msg = std::move(msg)] {
        if (attached_) server_->engine_->OnAgentMessage(node_, msg, server_->Now());
        server_->AfterEvent();
      });
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> l(mu_);
    out_.pop_front();
    if (!ok) {
      writing_ = false;
      return;  // the stream is broken; OnReadDone(false)/OnDone follow
    }
    if (!out_.empty() && !finished_) {
      StartWrite(&out_.front());
    } else {
      writing_ = false;
    }
  }

  void OnCancel() override { End(grpc::Status::CANCELLED); }

  void OnDone() override {
    // The last callback: forget and free this session on the strand, where Send is called from.
    asio::post(server_->strand_, [this] {
      auto it = server_->sessions_.find(node_);
      if (it != server_->sessions_.end() && it->second == this) {
        server_->sessions_.erase(it);
        server_->engine_->DetachSession(node_, instance_);
      }
      delete this;
    });
  }

 private:
  Impl* server_;
  v1::AgentMessage in_;
  std::string node_, instance_;  // set by the first read, then read-only
  bool attached_ = false;        // strand-confined
  std::mutex mu_;
  std::deque<v1::ControllerMessage> out_;
  bool writing_ = false;
  bool finished_ = false;
};

grpc::ServerUnaryReactor* ControllerServer::Impl::Register(grpc::CallbackServerContext* ctx,
                                                           const v1::RegisterRequest* req,
                                                           v1::RegisterResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  asio::post(strand_, [this, reactor, req, resp] {
    auto r = engine_->RegisterNode(*req, Now());
    if (r.ok()) {
      *resp = std::move(*r);
      reactor->Finish(grpc::Status::OK);
    } else {
      reactor->Finish(
          grpc::Status(static_cast<grpc::StatusCode>(r.status().code()), r.status().message()));
    }
    AfterEvent();
  });
  return reactor;
}

grpc::ServerBidiReactor<v1::AgentMessage, v1::ControllerMessage>* ControllerServer::Impl::Session(
    grpc::CallbackServerContext*) {
  return new AgentSession(this);
}

// ---------------------------------------------------------------------------------------------
// One client connection on the Unix socket: frames in, frames out, in order.
class ControllerServer::Impl::LocalConnection final
    : public std::enable_shared_from_this<LocalConnection> {
 public:
  LocalConnection(Impl* server, asio::local::stream_protocol::socket socket)
      : server_(server), socket_(std::move(socket)) {}

  void Start() {
    struct ucred cred {};
    socklen_t len = sizeof cred;
    if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("local api: cannot read peer credentials; closing");
      return;
    }
    caller_ = ResolveCaller(cred.uid, cred.gid, server_->options_.config);
    ReadHeader();
  }

 private:
  void ReadHeader() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(header_, 8), [this, self](auto ec, size_t) {
      if (ec) return Closed();  // client closed
      uint32_t len = 0;
      if (!DecodeFrameHeader(header_, &len, &method_).ok()) {
        spdlog::warn("local api: bad frame from uid={}; closing", caller_.uid);
        return Closed();
      }
      body_.resize(len);
      asio::async_read(socket_, asio::buffer(body_), [this, self](auto ec2, size_t) {
        if (ec2) return Closed();
        asio::post(server_->strand_, [this, self] {
          if (method_ == v1::METHOD_LIST_ACCOUNTING) return Accounting();
          ApiReply r;
          try {
            r = DispatchApi(*server_->engine_, caller_, method_, body_, server_->Now());
          } catch (const std::exception& e) {  // last resort: never take the controller down
            r = {Internal(std::string("unexpected error: ") + e.what()), ""};
          }
          server_->AfterEvent();
          if (r.status.ok() && method_ == v1::METHOD_ATTACH_ALLOCATION) {
            // An srun/salloc holds its allocation through this connection.
            v1::AttachAllocationRequest req;
            if (req.ParseFromString(body_)) owned_.push_back(req.job_id());
          }
          Reply(r);
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

  // sacct: the live jobs are read on the strand, the archive is scanned on the query thread (a
  // 100,000-job history would hold the strand, and with it scheduling and every request, for
  // half a second).
  void Accounting() {
    v1::ListAccountingRequest req;
    if (!req.ParseFromString(body_)) {
      return Reply({InvalidArgument("request does not parse as " + req.GetTypeName()), ""});
    }
    auto query = std::make_shared<Engine::AccountingQuery>(
        server_->engine_->PrepareAccounting(req, server_->Now()));
    auto self = shared_from_this();
    asio::post(server_->query_pool_, [this, self, query] {
      auto resp = Engine::ScanAccounting(*query);
      ApiReply r = resp.ok() ? ApiReply{Status::Ok(), resp->SerializeAsString()}
                             : ApiReply{resp.status(), ""};
      asio::post(socket_.get_executor(), [this, self, r = std::move(r)] { Reply(r); });
    });
  }

  // The client is gone: so are the allocations it held (a released one is unaffected).
  void Closed() {
    if (owned_.empty()) return;
    auto self = shared_from_this();
    asio::post(server_->strand_, [this, self] {
      for (uint64_t id : owned_) server_->engine_->AllocationClientGone(id, server_->Now());
      owned_.clear();
      server_->AfterEvent();
    });
  }

  Impl* server_;
  asio::local::stream_protocol::socket socket_;
  controller::Caller caller_;
  std::vector<uint64_t> owned_;  // allocations attached through this connection
  char header_[8];
  uint32_t method_ = 0;
  std::string body_;
  std::string reply_;
};

void ControllerServer::Impl::DoAccept() {
  acceptor_.async_accept(
      [this](boost::system::error_code ec, asio::local::stream_protocol::socket socket) {
        if (ec) {
          if (ec != asio::error::operation_aborted) {
            spdlog::error("local api accept: {}", ec.message());
            DoAccept();
          }
          return;
        }
        std::make_shared<LocalConnection>(this, std::move(socket))->Start();
        DoAccept();
      });
}

// ---------------------------------------------------------------------------------------------

void ControllerServer::Impl::AfterEvent() {
  for (auto& out : engine_->TakeOutgoing()) {
    auto it = sessions_.find(out.node);
    if (it == sessions_.end()) {
      spdlog::debug("node={} has no session; command dropped (reconciled when it reconnects)",
                    out.node);
      continue;
    }
    if (out.close_session) {
      it->second->End(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "node was declared down; register again"));
    } else {
      it->second->Send(std::move(out.message));
    }
  }
  if (engine_->schedule_requested() && !sched_armed_ && !pass_running_) {
    sched_armed_ = true;
    sched_timer_.expires_after(
        std::chrono::milliseconds(options_.config.scheduling.sched_min_interval_ms));
    sched_timer_.async_wait([this](boost::system::error_code ec) {
      sched_armed_ = false;
      if (ec) return;
      StartPass();
    });
  }
}

void ControllerServer::Impl::StartPass() {
  auto in = engine_->PreparePass(Now());
  if (!in) {
    AfterEvent();
    return;
  }
  pass_running_ = true;
  auto input = std::make_shared<Engine::PassInput>(std::move(*in));
  asio::post(sched_pool_, [this, input] {
    auto pass = std::make_shared<core::SchedulePass>(Engine::ComputePass(*input));
    asio::post(strand_, [this, pass] {
      pass_running_ = false;
      if (!engine_) return;
      engine_->ApplyPass(*pass, Now());
      AfterEvent();
    });
  });
}

void ControllerServer::Impl::ArmTick() {
  const auto& s = options_.config.scheduling;
  uint32_t ms = std::clamp<uint32_t>(s.heartbeat_interval_ms / 4, 20, 1000);
  tick_timer_.expires_after(std::chrono::milliseconds(ms));
  tick_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    engine_->Tick(Now());
    AfterEvent();
    ArmTick();
  });
}

Status ControllerServer::Impl::Start() {
  const Config& c = options_.config;
  MUSTER_ASSIGN_OR_RETURN(store_, store::OpenRocksDbStateStore(c.controller.state_dir));
  controller::EngineOptions eo;
  eo.config = c;
  MUSTER_ASSIGN_OR_RETURN(engine_, Engine::Create(std::move(eo), store_.get(), Now()));
  epoch_ = engine_->epoch();

  // Agents' gRPC endpoint.
  grpc::ServerBuilder builder;
  builder.AddListeningPort(c.controller.agent_address, grpc::InsecureServerCredentials(),
                           &agent_port_);
  builder.RegisterService(this);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5'000);
  grpc_server_ = builder.BuildAndStart();
  if (!grpc_server_ || agent_port_ == 0) {
    return FailedPrecondition("cannot listen for agents on " + c.controller.agent_address +
                              " (address in use?)");
  }

  // The user API socket. Refuse to steal it from a live controller.
  const std::string& path = c.controller.socket_path;
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

  work_ = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(
      io_.get_executor());
  asio::post(strand_, [this] {
    ArmTick();
    AfterEvent();
  });
  DoAccept();
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    threads_.emplace_back([this] { io_.run(); });
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    started_ = true;
  }
  spdlog::info("musterctld serving: cluster={} epoch={} agents={}:{} socket={} nodes={}",
               c.cluster_name, epoch_, c.controller.agent_address, agent_port_, path,
               c.nodes.size());
  return Status::Ok();
}

void ControllerServer::Impl::RunOnStrandAndWait(std::function<void()> fn) {
  std::promise<void> done;
  asio::post(strand_, [&] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

void ControllerServer::Impl::Shutdown() {
  bool was_started;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return;
    stopped_ = true;
    was_started = started_;
  }
  if (was_started) {
    RunOnStrandAndWait([this] {
      for (auto& [n, s] : sessions_) {
        s->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "controller shutting down"));
      }
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      tick_timer_.cancel();
      sched_timer_.cancel();
    });
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc_server_->Wait();
    RunOnStrandAndWait([] {});  // sessions' OnDone posted their cleanup; let it run
    work_.reset();
    io_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    sched_pool_.join();  // a pass in flight finishes; its result is dropped with the io_context
    query_pool_.join();  // a scan in flight finishes before the store goes away
    std::error_code ec;
    std::filesystem::remove(options_.config.controller.socket_path, ec);
  } else if (grpc_server_) {
    grpc_server_->Shutdown();
  }
  engine_.reset();
  store_.reset();
  spdlog::info("musterctld stopped");
  cv_.notify_all();
}

// ---------------------------------------------------------------------------------------------

ControllerServer::ControllerServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ControllerServer::~ControllerServer() = default;

Result<std::unique_ptr<ControllerServer>> ControllerServer::Create(
    ControllerServerOptions options) {
  if (options.config.nodes.empty()) {
    return InvalidArgument(options.config.source + ": no [[nodes]] configured");
  }
  if (options.config.partitions.empty()) {
    return InvalidArgument(options.config.source + ": no [[partition]] configured");
  }
  return std::unique_ptr<ControllerServer>(
      new ControllerServer(std::make_unique<Impl>(std::move(options))));
}

Status ControllerServer::Start() { return impl_->Start(); }
void ControllerServer::Shutdown() { impl_->Shutdown(); }
void ControllerServer::Wait() { impl_->Wait(); }
int ControllerServer::agent_port() const { return impl_->agent_port_; }
uint64_t ControllerServer::epoch() const { return impl_->epoch_; }
const std::string& ControllerServer::socket_path() const {
  return impl_->options_.config.controller.socket_path;
}

}  // namespace muster::rpc
