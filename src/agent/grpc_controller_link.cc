#include "grpc_controller_link.h"

#include <spdlog/spdlog.h>

#include <random>

#include "muster/common/job_limits.h"
#include "muster/credentials/node_proof.h"

namespace muster::agent {

GrpcControllerLink::GrpcControllerLink(std::vector<std::string> addresses, std::string node,
                                       std::string instance_id,
                                       std::optional<ControllerLinkTls> tls, std::string node_key,
                                       Callbacks cb)
    : addresses_(std::move(addresses)),
      node_(std::move(node)),
      instance_id_(std::move(instance_id)),
      tls_(std::move(tls)),
      node_key_(std::move(node_key)),
      cb_(std::move(cb)) {}

GrpcControllerLink::~GrpcControllerLink() { Stop(); }

void GrpcControllerLink::Start() {
  client_.Start([this] { Run(); });
}

void GrpcControllerLink::Stop() { client_.Stop(); }

void GrpcControllerLink::SetPausedForTest(bool paused) {
  paused_ = paused;
  if (paused) client_.CancelCurrent();
  client_.Wake();
}

bool GrpcControllerLink::Send(const v1::AgentMessage& msg) {
  std::lock_guard<std::mutex> wl(write_mu_);
  grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>* s;
  {
    std::lock_guard<std::mutex> l(mu_);
    s = stream_;
  }
  return s && s->Write(msg);
}

void GrpcControllerLink::SleepBackoff(int* backoff_ms) {
  static thread_local std::mt19937 rng(std::random_device{}());
  // Full jitter: a restarted controller is not hit by every agent at the same instant.
  int ms = std::uniform_int_distribution<int>(*backoff_ms / 2, *backoff_ms)(rng);
  client_.WaitFor(std::chrono::milliseconds(ms));
  *backoff_ms = std::min(*backoff_ms * 2, 2000);
}

void GrpcControllerLink::Run() {
  // One controller: wait for it (a restart) within the registration's deadline. Several: a
  // standby does not listen until it leads, so a refused connection means "the next one", and a
  // leader that froze must be given up within a few seconds (the standby takes over after its
  // lease), long before the new leader would count this node as down.
  const bool several = addresses_.size() > 1;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, several ? 2'000 : 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, several ? 2'000 : 5'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect quickly after a controller restart; the link adds its own jittered backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A launch carries the whole job: the largest the controller accepts must fit.
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxAgentMessageBytes));
  args.SetMaxSendMessageSize(static_cast<int>(kMaxAgentMessageBytes));
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (tls_) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = tls_->identity.ca_pem;
    o.pem_cert_chain = tls_->identity.cert_pem;
    o.pem_private_key = tls_->identity.key_pem;
    credentials = grpc::SslCredentials(o);
    // The controller's certificate must name the controller, whatever host it runs on.
    args.SetSslTargetNameOverride(tls_->controller_name);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  // One controller: one channel for good. Several: a fresh channel for each attempt, so that a
  // standby that has just taken over is tried at once, not after the backoff its address earned
  // while it did not listen (a reused channel never got through to it at all).
  std::unique_ptr<v1::NodeRegistry::Stub> stub_for_good;
  if (!several) {
    stub_for_good =
        v1::NodeRegistry::NewStub(grpc::CreateCustomChannel(addresses_[0], credentials, args));
  }
  size_t current = 0;
  size_t failed_in_round = 0;
  int backoff_ms = 100;
  int failures = 0;
  while (!client_.stopping()) {
    const std::string& address = addresses_[current];
    std::unique_ptr<v1::NodeRegistry::Stub> attempt;
    if (several) {
      attempt = v1::NodeRegistry::NewStub(grpc::CreateCustomChannel(address, credentials, args));
    }
    v1::NodeRegistry::Stub* stub = several ? attempt.get() : stub_for_good.get();
    if (paused_) {
      client_.WaitUntil([&] { return !paused_.load(); });
      continue;
    }
    v1::RegisterRequest req = cb_.make_register();
    v1::RegisterResponse resp;
    grpc::ClientContext rctx;
    rctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(several ? 2 : 5));
    rctx.set_wait_for_ready(!several);  // one: wait for the channel to connect, not fail fast
    // Stop cancels a registration that waits for an unreachable controller.
    if (!client_.SetCurrent(&rctx)) break;
    grpc::Status st = grpc::Status::OK;
    if (!tls_) {
      // Without TLS the registration answers a fresh challenge with this node's key.
      v1::ChallengeResponse challenge;
      grpc::ClientContext cctx;
      cctx.set_deadline(rctx.deadline());
      cctx.set_wait_for_ready(!several);
      client_.SetCurrent(&cctx);
      st = stub->Challenge(&cctx, v1::ChallengeRequest(), &challenge);
      client_.SetCurrent(&rctx);
      req.set_challenge(challenge.challenge());
      req.set_proof(credentials::NodeProof(node_key_, challenge.challenge(), node_, instance_id_));
    }
    if (st.ok() && !client_.stopping()) st = stub->Register(&rctx, req, &resp);
    client_.SetCurrent(nullptr);
    if (!st.ok()) {
      if (several) {
        current = (current + 1) % addresses_.size();
        if (++failed_in_round < addresses_.size()) continue;  // the next one at once
        failed_in_round = 0;
      }
      if (failures++ % 20 == 0) {
        // A refused certificate looks like an unreachable controller from this side.
        const bool quiet_failure = st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                                   st.error_code() == grpc::StatusCode::UNAVAILABLE;
        spdlog::warn("node={} cannot register with {}: {} (retrying){}", node_,
                     several ? "any controller (last: " + address + ")" : address,
                     st.error_message(),
                     tls_ && quiet_failure
                         ? "; if the controller is up, it may refuse this node's certificate "
                           "(another CA, another node's name): its log says why"
                         : "");
      }
      SleepBackoff(&backoff_ms);
      continue;
    }
    if (several && cb_.is_stale && cb_.is_stale(resp.epoch())) {
      if (failures++ % 20 == 0) {
        spdlog::warn(
            "node={} controller {} answers at epoch {}, older than one this node obeyed: "
            "trying the next controller",
            node_, address, resp.epoch());
      }
      current = (current + 1) % addresses_.size();
      if (++failed_in_round < addresses_.size()) continue;
      failed_in_round = 0;
      SleepBackoff(&backoff_ms);
      continue;
    }
    grpc::ClientContext ctx;
    auto stream = stub->Session(&ctx);
    v1::AgentMessage hello;
    hello.mutable_hello()->set_node(node_);
    hello.mutable_hello()->set_instance_id(instance_id_);
    hello.mutable_hello()->set_epoch(resp.epoch());
    hello.mutable_hello()->set_session_ticket(resp.session_ticket());
    if (!client_.SetCurrent(&ctx)) break;
    if (!stream->Write(hello)) {
      client_.SetCurrent(nullptr);
      stream->Finish().error_message();
      SleepBackoff(&backoff_ms);
      continue;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      stream_ = stream.get();
    }
    connected_ = true;
    failures = 0;
    failed_in_round = 0;
    backoff_ms = 100;
    spdlog::info("node={} connected to controller {} (epoch {})", node_, address, resp.epoch());
    cb_.on_connected(resp);
    v1::ControllerMessage msg;
    while (stream->Read(&msg)) cb_.on_message(std::move(msg));
    connected_ = false;
    {
      std::lock_guard<std::mutex> wl(write_mu_);
      std::lock_guard<std::mutex> l(mu_);
      stream_ = nullptr;
    }
    client_.SetCurrent(nullptr);
    grpc::Status fin = stream->Finish();
    if (!client_.stopping() && !paused_) {
      spdlog::warn("node={} lost the controller session: {}", node_,
                   fin.ok() ? std::string("closed") : fin.error_message());
      cb_.on_disconnected();
      // The leader went: the next controller is the likelier one to lead now.
      if (several) current = (current + 1) % addresses_.size();
      SleepBackoff(&backoff_ms);
    } else {
      cb_.on_disconnected();
    }
  }
}

std::unique_ptr<ControllerLink> NewGrpcControllerLink(const std::vector<std::string>& addresses,
                                                      const std::string& node,
                                                      const std::string& instance_id,
                                                      std::optional<ControllerLinkTls> tls,
                                                      std::string node_key,
                                                      ControllerLink::Callbacks callbacks) {
  return std::make_unique<GrpcControllerLink>(addresses, node, instance_id, std::move(tls),
                                              std::move(node_key), std::move(callbacks));
}

}  // namespace muster::agent
