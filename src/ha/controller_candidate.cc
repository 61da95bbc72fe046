// A hot standby's controller: follow the leader, campaign, and serve once elected.
#include "muster/ha/controller_candidate.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "muster/common/config_reload.h"
#include "muster/common/tls_files.h"
#include "muster/ha/etcd_election.h"
#include "muster/ha/replication_follower.h"
#include "muster/store/state_store.h"

namespace muster::ha {

class ControllerCandidate::Impl {
 public:
  explicit Impl(ControllerCandidateOptions o) : o_(std::move(o)) {}
  ~Impl() { Shutdown(true); }

  Status Start();
  Status Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_; });
    return result_;
  }
  void Shutdown(bool resign);

  std::atomic<bool> leading_{false};
  std::unique_ptr<rpc::ControllerServer> server_;  // set once, kept until destruction
  std::unique_ptr<ReplicationFollower> follower_;

 private:
  void Run();
  Status Serve(const Leadership& won);
  std::string LeaderAddress();
  void Finish(Status st) {
    std::lock_guard<std::mutex> l(mu_);
    result_ = std::move(st);
    done_ = true;
    cv_.notify_all();
  }

  const ControllerCandidateOptions o_;
  std::unique_ptr<EtcdElection> election_;
  std::unique_ptr<store::StateStore> copy_;  // the standby's copy, closed before serving from it
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;        // mu_
  bool shutdown_ = false;       // mu_
  bool resign_ = true;          // mu_
  bool lost_ = false;           // mu_: the lead was lost while serving
  bool done_ = false;           // mu_
  Status result_;               // mu_
  std::string unknown_leader_;  // the follower's thread: a leader name logged as unknown
};

Status ControllerCandidate::Impl::Start() {
  const Config& c = o_.config;
  EtcdElectionOptions e;
  e.endpoints = c.controller.etcd_endpoints;
  const std::string prefix = c.controller.etcd_prefix.empty() ? "/muster/" + c.cluster_name + "/"
                                                              : c.controller.etcd_prefix;
  e.key = prefix + "leader";
  e.state_prefix = prefix;
  e.candidate = o_.name;
  e.ttl_s = c.controller.leader_lease_s;
  MUSTER_ASSIGN_OR_RETURN(TlsIdentity etcd_id,
                          LoadTlsIdentity(c.controller.etcd_ca_file, c.controller.etcd_cert_file,
                                          c.controller.etcd_key_file));
  e.tls = std::move(etcd_id);
  for (const ControllerHostConfig& h : c.controllers) e.candidates.push_back(h.name);
  MUSTER_ASSIGN_OR_RETURN(election_, EtcdElection::Create(std::move(e)));

  ReplicationFollowerOptions f;
  f.name = o_.name;
  f.leader_address = [this] { return LeaderAddress(); };
  if (c.tls.enabled()) {
    // The standby shows the leader the controller's own certificate: only a controller follows.
    MUSTER_ASSIGN_OR_RETURN(TlsIdentity id, LoadControllerTlsIdentity(c.tls));
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = std::move(id.ca_pem);
    tls.pem_cert_chain = std::move(id.cert_pem);
    tls.pem_private_key = std::move(id.key_pem);
    f.credentials = grpc::SslCredentials(tls);
    f.controller_name = c.tls.controller_name;
  }
  store::StoreOptions so;
  so.reserve_bytes = uint64_t{c.controller.state_reserve_mb} << 20;
  MUSTER_ASSIGN_OR_RETURN(copy_, store::OpenRocksDbStateStore(c.controller.state_dir, so));
  f.store = copy_.get();
  follower_ = std::make_unique<ReplicationFollower>(std::move(f));
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutdown_) return Status{StatusCode::kCancelled, "shut down before it started"};
    started_ = true;
  }
  spdlog::info("controller {} stands by: following the leader into {}, campaigning at {}", o_.name,
               c.controller.state_dir, c.controller.etcd_endpoints.front());
  follower_->Start();
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

std::string ControllerCandidate::Impl::LeaderAddress() {
  auto leader = election_->Leader();
  if (!leader.ok() || leader->leader == o_.name) return "";
  for (const ControllerHostConfig& h : o_.config.controllers) {
    if (h.name == leader->leader) return h.agent_address;
  }
  if (unknown_leader_ != leader->leader) {
    spdlog::error("controller {}: the leader {} is not among [[controllers]]; cannot follow it",
                  o_.name, leader->leader);
    unknown_leader_ = leader->leader;
  }
  return "";
}

void ControllerCandidate::Impl::Run() {
  auto won = election_->Campaign([this] {
    std::lock_guard<std::mutex> l(mu_);
    lost_ = true;
    cv_.notify_all();
  });
  follower_->Stop();
  bool shutdown, resign;
  {
    std::lock_guard<std::mutex> l(mu_);
    shutdown = shutdown_;
    resign = resign_;
  }
  if (!won.ok() || shutdown) {
    if (won.ok() && resign) election_->Resign();  // won as Shutdown came: hand it on at once
    copy_.reset();
    Finish(won.ok() || won.status().code() == StatusCode::kCancelled ? Status::Ok() : won.status());
    return;
  }
  Finish(Serve(*won));
}

Status ControllerCandidate::Impl::Serve(const Leadership& won) {
  spdlog::info(
      "controller {} takes the lead (epoch {}) from its copy of the state (change {} of "
      "epoch {})",
      o_.name, won.epoch, follower_->applied_seq(), follower_->leader_epoch());
  copy_.reset();  // the server opens the state directory itself
  rpc::ControllerServerOptions so;
  so.config = o_.config;
  so.controller_name = o_.name;
  // The file as it reads now: the leader may have been reconfigured since this one started. What
  // only a start sets up (addresses, credentials, the election) stays as it started.
  if (!o_.config.source.empty()) {
    Result<Config> file = LoadConfig(o_.config.source);
    if (file.ok()) file = ConfigForController(*file, o_.name);
    if (file.ok()) {
      ConfigReload reload = MergeReloadedConfig(o_.config, std::move(*file));
      for (const std::string& c : reload.changes) {
        spdlog::info("controller {}: since its start, the configuration changed: {}", o_.name, c);
      }
      so.config = std::move(reload.config);
    } else {
      spdlog::warn("controller {} leads with the configuration it started with: {}", o_.name,
                   file.status().ToString());
    }
  }
  so.threads = o_.threads;
  so.clock = o_.clock;
  so.min_epoch = static_cast<uint64_t>(won.epoch);
  so.replication.enabled = true;
  so.replication.ack_timeout = o_.ack_timeout;
  EtcdElection* election = election_.get();
  so.replication.membership = [election](const std::string& standby, bool in_sync) {
    return election->RecordInSync(standby, in_sync);
  };
  so.replication.may_write = [election] {
    // UNAVAILABLE: a client tries the other controllers, as it would for one that is down.
    return election->leading() ? Status::Ok() : Unavailable("this controller no longer leads");
  };
  auto server = rpc::ControllerServer::Create(std::move(so));
  Status st = server.ok() ? (*server)->Start() : server.status();
  if (!st.ok()) {
    spdlog::critical("controller {} won the lead but cannot serve: {}; handing it on", o_.name,
                     st.ToString());
    if (server.ok()) (*server)->Shutdown();
    election_->Resign();
    return st;
  }
  bool resign;
  bool lost;
  {
    std::unique_lock<std::mutex> l(mu_);
    server_ = std::move(*server);
    leading_ = true;
    cv_.wait(l, [&] { return shutdown_ || lost_; });
    leading_ = false;
    resign = resign_;
    lost = lost_;
  }
  if (lost)
    spdlog::critical("controller {} lost the lead (epoch {}): stopping", o_.name, won.epoch);
  server_->Shutdown();
  if (resign && !lost) {
    election_->Resign();
  } else {
    election_->Stop();
  }
  return lost ? Status{StatusCode::kAborted, "lost the lead (epoch " + std::to_string(won.epoch) +
                                                 "); a new leader serves"}
              : Status::Ok();
}

void ControllerCandidate::Impl::Shutdown(bool resign) {
  bool started;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutdown_) return;
    shutdown_ = true;
    resign_ = resign;
    started = started_;
  }
  cv_.notify_all();
  if (!started) {
    Finish(Status::Ok());
    return;
  }
  if (!leading_) election_->Stop();  // ends a campaign in progress
  if (thread_.joinable()) thread_.join();
}

// ---------------------------------------------------------------------------------------------

ControllerCandidate::ControllerCandidate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ControllerCandidate::~ControllerCandidate() = default;

Result<std::unique_ptr<ControllerCandidate>> ControllerCandidate::Create(
    ControllerCandidateOptions options) {
  if (options.config.controller.etcd_endpoints.empty()) {
    return InvalidArgument(options.config.source + ": a standby needs controller.etcd_endpoints");
  }
  if (!IsValidNodeName(options.name)) {
    return InvalidArgument("controller name '" + options.name + "' is not valid");
  }
  return std::unique_ptr<ControllerCandidate>(
      new ControllerCandidate(std::make_unique<Impl>(std::move(options))));
}

Status ControllerCandidate::Start() { return impl_->Start(); }
Status ControllerCandidate::Wait() { return impl_->Wait(); }
void ControllerCandidate::Shutdown(bool resign) { impl_->Shutdown(resign); }
bool ControllerCandidate::leading() const { return impl_->leading_; }
rpc::ControllerServer* ControllerCandidate::server() {
  return impl_->leading_ ? impl_->server_.get() : nullptr;
}
uint64_t ControllerCandidate::applied_seq() const {
  return impl_->follower_ ? impl_->follower_->applied_seq() : 0;
}

}  // namespace muster::ha
