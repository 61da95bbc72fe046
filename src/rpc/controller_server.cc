// musterctld's transports around its runner: the Asio executor, the agents' gRPC service and the
// local API socket, started and stopped in order.
#include "muster/rpc/controller_server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <utility>

#include "agent_service.h"
#include "api_server.h"
#include "mail_sender.h"
#include "metrics_text.h"
#include "muster/common/job_limits.h"
#include "muster/common/service_notify.h"
#include "muster/common/tls_files.h"
#include "muster/controller/controller_runner.h"
#include "muster/metrics/metrics_server.h"
#include "muster/rpc/api_dispatch.h"
#include "muster/rpc/asio_executor.h"
#include "muster/web/web_server.h"
#include "replication_service.h"
#include "request_rate.h"

namespace muster::rpc {

class ControllerServer::Impl {
 public:
  explicit Impl(ControllerServerOptions options) : options_(std::move(options)) {}
  ~Impl() { Shutdown(); }

  Status Start();
  void Shutdown();
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return stopped_; });
  }

  bool PostToLoop(std::function<void()> fn) {
    std::lock_guard<std::mutex> l(mu_);
    if (!started_ || stopped_) return false;
    executor_->Post(std::move(fn));
    return true;
  }

  void Reconfigure(std::function<void(Result<v1::ReconfigureResponse>)> done) {
    std::lock_guard<std::mutex> l(mu_);
    if (!started_ || stopped_) {
      done(Unavailable("the controller is not serving"));
      return;
    }
    controller::Caller caller = ResolveCaller(0, 0, options_.config);  // the service manager
    caller.origin = "signal";
    dispatcher_->Reconfigure(caller, std::move(done));
  }

  store::ReplicationLog* replication_log() const {
    return runner_ ? runner_->replication_log() : nullptr;
  }

  ControllerServerOptions options_;
  int agent_port_ = 0;
  int api_port_ = 0;
  int metrics_port_ = 0;
  int web_port_ = 0;
  std::atomic<uint64_t> epoch_{0};

 private:
  // Destroyed in reverse: the services before the runner they call, the runner (engine, store)
  // before the executor its work was queued on.
  std::unique_ptr<AsioExecutor> executor_;
  std::unique_ptr<controller::ControllerRunner> runner_;
  std::unique_ptr<ApiDispatcher> dispatcher_;
  std::unique_ptr<AgentService> agents_;
  std::unique_ptr<MailSender> mail_;  // with controller.mail_prog
  std::unique_ptr<ReplicationService> replication_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<metrics::MetricsServer> metrics_;
  std::unique_ptr<web::WebServer> web_;
  std::unique_ptr<RequestRateLimiter> web_rate_;  // the web view's users

  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool stopped_ = false;
};

Status ControllerServer::Impl::Start() {
  const Config& c = options_.config;
  std::shared_ptr<grpc::ServerCredentials> agent_credentials;
  if (c.tls.enabled()) {
    MUSTER_ASSIGN_OR_RETURN(TlsIdentity id, LoadControllerTlsIdentity(c.tls));
    // Agents must present a certificate from the CA; which node it names is checked per call.
    grpc::SslServerCredentialsOptions tls(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_root_certs = std::move(id.ca_pem);
    tls.pem_key_cert_pairs.push_back({std::move(id.key_pem), std::move(id.cert_pem)});
    agent_credentials = grpc::SslServerCredentials(tls);
  } else {
    // Loopback is no trust boundary: every local user reaches it. Agents prove their node with
    // its key instead of a certificate.
    if (!c.node_auth.enabled()) {
      return FailedPrecondition(
          "without [tls], agents must prove which node they are: set key_file under [node_auth] "
          "(keys made by `muster certs --node-keys`), or configure [tls]");
    }
    agent_credentials = grpc::InsecureServerCredentials();
    // Said at every start: a development setup, not a production one.
    spdlog::warn(
        "agents connect to {} without TLS{}: they prove their node with its key ([node_auth]), "
        "but what they exchange with this controller (jobs' scripts and environments) is not "
        "encrypted. Use [tls] in production",
        c.controller.agent_address,
        IsLoopbackAddress(c.controller.agent_address) ? "" : " (controller.insecure = true)");
  }
  executor_ = std::make_unique<AsioExecutor>();
  controller::ControllerRunnerOptions ro;
  ro.config = c;
  ro.clock = options_.clock;
  ro.executor = executor_.get();
  ro.replication = options_.replication;
  ro.min_epoch = options_.min_epoch;
  MUSTER_ASSIGN_OR_RETURN(ro.store,
                          store::OpenRocksDbStateStore(
                              c.controller.state_dir,
                              {.reserve_bytes = uint64_t{c.controller.state_reserve_mb} << 20}));
  MUSTER_ASSIGN_OR_RETURN(runner_, controller::ControllerRunner::Create(std::move(ro)));
  epoch_ = runner_->epoch();
  // Reconfigure reads the file the controller started from, as this controller's entry of
  // [[controllers]] has it.
  dispatcher_ = std::make_unique<ApiDispatcher>(
      *runner_,
      [source = c.source, name = options_.controller_name]() -> Result<Config> {
        if (source.empty()) return FailedPrecondition("the configuration came from no file");
        MUSTER_ASSIGN_OR_RETURN(Config next, LoadConfig(source));
        if (!name.empty()) {
          MUSTER_ASSIGN_OR_RETURN(next, ConfigForController(next, name));
        }
        if (next.nodes.empty()) return InvalidArgument(source + ": no [[nodes]] configured");
        if (next.partitions.empty()) {
          return InvalidArgument(source + ": no [[partition]] configured");
        }
        return next;
      },
      [this](const v1::ReconfigureResponse& done) {
        epoch_ = done.epoch();
        agents_->SetConfiguredNodes(runner_->engine().config().nodes);
        if (options_.log_level_follows_config) {
          spdlog::set_level(
              spdlog::level::from_str(runner_->engine().config().controller.log_level));
        }
      });
  agents_ = std::make_unique<AgentService>(*runner_, c.tls.enabled());

  // Agents' gRPC endpoint.
  grpc::ServerBuilder builder;
  builder.AddListeningPort(c.controller.agent_address, agent_credentials, &agent_port_);
  builder.RegisterService(agents_.get());
  if (runner_->replication_log()) {
    replication_ = std::make_unique<ReplicationService>(
        runner_->replicating_store(), runner_->replication_log(),
        c.tls.enabled() ? c.tls.controller_name : "");
    builder.RegisterService(replication_.get());
  }
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxAgentMessageBytes));
  builder.SetMaxSendMessageSize(static_cast<int>(kMaxAgentMessageBytes));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Agents of a hot standby ping every 2 s (to give up a frozen leader quickly).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1'000);
  grpc_server_ = builder.BuildAndStart();
  if (!grpc_server_ || agent_port_ == 0) {
    return FailedPrecondition("cannot listen for agents on " + c.controller.agent_address +
                              " (address in use?)");
  }
  api_ = std::make_unique<ApiServer>(executor_->io(), *dispatcher_, options_.config);
  MUSTER_RETURN_IF_ERROR(api_->ListenUnix(c.controller.socket_path));
  if (!c.controller.api_address.empty()) {
    const std::string& listen =
        c.controller.api_listen.empty() ? c.controller.api_address : c.controller.api_listen;
    MUSTER_ASSIGN_OR_RETURN(api_port_, api_->ListenTcp(listen));
  }
  if (!c.controller.metrics_address.empty()) {
    MUSTER_ASSIGN_OR_RETURN(std::string token,
                            metrics::ReadMetricsToken(c.controller.metrics_token_file));
    // Counted on the strand, as `muster diag` counts: the same numbers.
    metrics_ = std::make_unique<metrics::MetricsServer>(
        executor_->io(), "musterctld", std::move(token),
        [this](std::function<void(std::string)> done) {
          runner_->Post([this, done = std::move(done)] {
            ControllerMetrics m;
            m.cluster = runner_->engine().Metrics();
            m.timings = runner_->stats().Histograms();
            m.results = runner_->stats().Results();
            if (const store::ReplicationLog* log = runner_->replication_log()) {
              m.replicating = true;
              m.standbys_in_sync = log->in_sync().size();
            }
            done(PrometheusText(m));
          });
        });
    MUSTER_ASSIGN_OR_RETURN(metrics_port_, metrics_->Listen(c.controller.metrics_address));
  }
  if (!c.controller.web_address.empty()) {
    web::WebOptions wo;
    wo.address = c.controller.web_address;
    wo.url = c.controller.web_url;
    wo.cluster_name = c.cluster_name;
    // The pages ask what `muster` would, as the logged-in user, through the one dispatch layer:
    // the same rules, only reading methods.
    wo.fetch = [this](const web::WebUser& u, uint32_t method, std::string payload,
                      std::function<void(Status, std::string)> done) {
      if (method != v1::METHOD_LIST_NODES && method != v1::METHOD_LIST_JOBS &&
          method != v1::METHOD_GET_JOB && method != v1::METHOD_LIST_SHARES) {
        return done(PermissionDenied("the web view only reads"), "");
      }
      // A user's rate on the web view is the user API's (a bucket of its own); over it, the
      // page is refused rather than held.
      if (u.uid != 0 && !web_rate_->Reserve(u.uid, std::chrono::steady_clock::now(),
                                            std::chrono::steady_clock::duration::zero())) {
        return done(ResourceExhausted("over your request rate (controller.user_request_rate); "
                                      "slow down"),
                    "");
      }
      auto session = std::make_shared<ClientSession>();
      session->caller.uid = u.uid;
      session->caller.gid = u.gid;
      session->caller.user = u.name;
      session->caller.origin = "web";
      session->origin = "web";
      // The answer is parsed and the page rendered off the controller's strand.
      dispatcher_->Dispatch(
          session, method, std::move(payload), [done, &io = executor_->io()](ApiReply r) {
            boost::asio::post(
                io, [done, r = std::move(r)]() mutable { done(r.status, std::move(r.payload)); });
          });
    };
    web_rate_ = std::make_unique<RequestRateLimiter>(c.controller.user_request_rate,
                                                     c.controller.user_request_burst);
    web_ = std::make_unique<web::WebServer>(executor_->io(), std::move(wo));
    MUSTER_ASSIGN_OR_RETURN(web_port_, web_->Listen());
    dispatcher_->SetWebLogin([this](const controller::Caller& caller) {
      return web_->Login({caller.uid, caller.gid, caller.user});
    });
  }

  if (!c.controller.mail_prog.empty()) {
    MailSenderOptions mail{.program = c.controller.mail_prog, .cluster_name = c.cluster_name};
    MUSTER_RETURN_IF_ERROR(ResolveMailUser(c.controller.mail_prog_user, &mail));
    mail_ = std::make_unique<MailSender>(std::move(mail));
  }
  runner_->Start(agents_.get(), mail_.get());
  executor_->Start(options_.threads);
  {
    std::lock_guard<std::mutex> l(mu_);
    started_ = true;
  }
  spdlog::info(
      "musterctld serving: cluster={} epoch={} agents={} (port {}, {}) socket={} api={} "
      "metrics={} web={} nodes={}",
      c.cluster_name, epoch_, c.controller.agent_address, agent_port_,
      c.tls.enabled() ? "mutual TLS" : "no TLS", c.controller.socket_path,
      c.controller.api_address.empty() ? "none" : c.controller.api_address + " (MUNGE)",
      metrics_ ? c.controller.metrics_address + " (port " + std::to_string(metrics_port_) + ")"
               : "none",
      web_ ? c.controller.web_address + " (port " + std::to_string(web_port_) + ")" : "none",
      c.nodes.size());
  return Status::Ok();
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
    api_->Close();
    if (metrics_) metrics_->Close();
    if (web_) web_->Close();
    executor_->RunOnStrandAndWait([this] {
      runner_->Stop();
      agents_->EndAll("controller shutting down");
    });
    if (replication_) {
      // The log first: standbys whose streams now end keep their standing in etcd (they have
      // everything this leader acknowledged), so one of them may take over.
      runner_->replication_log()->Stop();
      replication_->Stop();
    }
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc_server_->Wait();
    executor_->RunOnStrandAndWait([] {});  // sessions' OnDone posted their cleanup; let it run
    executor_->Stop();
    if (mail_) mail_->Stop();
    std::error_code ec;
    std::filesystem::remove(options_.config.controller.socket_path, ec);
  } else if (grpc_server_) {
    grpc_server_->Shutdown();
  }
  api_.reset();
  metrics_.reset();
  web_.reset();
  grpc_server_.reset();
  agents_.reset();
  replication_.reset();
  dispatcher_.reset();
  runner_.reset();
  executor_.reset();
  mail_.reset();
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
int ControllerServer::api_port() const { return impl_->api_port_; }
int ControllerServer::metrics_port() const { return impl_->metrics_port_; }
int ControllerServer::web_port() const { return impl_->web_port_; }
uint64_t ControllerServer::epoch() const { return impl_->epoch_; }
std::vector<std::string> ControllerServer::standbys_in_sync() const {
  auto* log = impl_->replication_log();
  return log ? log->in_sync() : std::vector<std::string>{};
}
bool ControllerServer::PostToLoop(std::function<void()> fn) {
  return impl_->PostToLoop(std::move(fn));
}
void ControllerServer::Reconfigure(std::function<void(Result<v1::ReconfigureResponse>)> done) {
  impl_->Reconfigure(std::move(done));
}
void ControllerServer::ReloadForServiceManager() {
  ServiceNotifier& systemd = ServiceNotifier::Get();
  systemd.Reloading("reading the configuration again");
  Reconfigure([&systemd](Result<v1::ReconfigureResponse> r) {
    if (!r.ok()) {
      spdlog::error("SIGHUP: {}", r.status().message());
      systemd.Ready("serving; the last reload was refused (see the log)");
      return;
    }
    spdlog::info("SIGHUP: reconfigured from {} (epoch {}, {} change(s))", r->source(), r->epoch(),
                 r->changes_size());
    systemd.Ready("serving, epoch " + std::to_string(r->epoch()));
  });
}
const std::string& ControllerServer::socket_path() const {
  return impl_->options_.config.controller.socket_path;
}

}  // namespace muster::rpc
