#include "agent_service.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>

#include "muster/common/clock.h"
#include "muster/common/job_limits.h"
#include "muster/common/node_keys.h"
#include "muster/common/strings.h"
#include "muster/credentials/step_credential.h"

namespace muster::rpc {
namespace {

using StatsClock = controller::ServiceStats::Clock;

// sdiag's name for an agent message.
const char* AgentKind(v1::AgentMessage::MsgCase c) {
  switch (c) {
    case v1::AgentMessage::kHello:
      return "agent/hello";
    case v1::AgentMessage::kHeartbeat:
      return "agent/heartbeat";
    case v1::AgentMessage::kJobStarted:
      return "agent/job_started";
    case v1::AgentMessage::kJobLaunchFailed:
      return "agent/job_launch_failed";
    case v1::AgentMessage::kBatchExited:
      return "agent/batch_exited";
    case v1::AgentMessage::kJobCleaned:
      return "agent/job_cleaned";
    case v1::AgentMessage::kGpuHealth:
      return "agent/gpu_health";
    case v1::AgentMessage::kNodeHealth:
      return "agent/node_health";
    case v1::AgentMessage::kStepEnded:
      return "agent/step_ended";
    default:
      return "agent/unknown";
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// One agent's Session stream. gRPC callbacks arrive on gRPC threads; anything touching the engine
// is posted to the strand. Writes are queued, one in flight at a time.
class AgentService::AgentSession final
    : public grpc::ServerBidiReactor<v1::AgentMessage, v1::ControllerMessage> {
 public:
  // peer_check: the verdict on the peer for a node name (captured at the start: the auth context
  // belongs to the call).
  AgentSession(AgentService* service, std::function<grpc::Status(const std::string&)> peer_check)
      : service_(service), peer_check_(std::move(peer_check)) {
    StartRead(&in_);
  }

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
    const auto arrived = StatsClock::now();
    if (node_.empty()) {
      if (msg.msg_case() != v1::AgentMessage::kHello) {
        End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "first message must be Hello"));
        return;
      }
      if (grpc::Status peer = peer_check_(msg.hello().node()); !peer.ok()) {
        End(peer);
        return;
      }
      node_ = msg.hello().node();
      instance_ = msg.hello().instance_id();
      service_->runner_.executor().Post([this, hello = msg.hello(), arrived] {
        controller::ControllerRunner& runner = service_->runner_;
        Status s = runner.stopped() ? Unavailable("the controller is stopping")
                   : !service_->TicketMatches(hello)
                       ? PermissionDenied(
                             "this session's ticket is not from the last "
                             "registration of node '" +
                             node_.substr(0, kMaxShortStringBytes) + "' with this controller")
                       : runner.engine().AttachSession(hello, runner.Now());
        if (!s.ok()) {
          End(grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message()));
        } else {
          auto& sessions = service_->sessions_;
          auto it = sessions.find(node_);
          if (it != sessions.end() && it->second != this) {
            it->second->End(grpc::Status(grpc::StatusCode::ABORTED, "replaced by a new session"));
          }
          sessions[node_] = this;
          attached_ = true;
          generation_ = runner.engine_generation();
          attached_once_ = true;
        }
        runner.AfterEvent();
        runner.stats().Record(AgentKind(v1::AgentMessage::kHello), StatsClock::now() - arrived);
      });
    } else if (msg.msg_case() == v1::AgentMessage::kHeartbeat && attached_once_.load()) {
      service_->Heard(node_, arrived);
    } else {
      service_->runner_.Post([this, msg = std::move(msg), arrived] {
        controller::ControllerRunner& runner = service_->runner_;
        // A session of an engine that a reconfiguration replaced is being closed: what it still
        // says is reported again when the agent registers with the new one.
        if (attached_ && generation_ == runner.engine_generation()) {
          runner.engine().OnAgentMessage(node_, msg, runner.Now());
        }
        runner.AfterEvent();
        runner.stats().Record(AgentKind(msg.msg_case()), StatsClock::now() - arrived);
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

  // The engine it attached to (on the strand).
  uint64_t generation() const { return generation_; }

  void OnDone() override {
    // The last callback: forget and free this session on the strand, where Send is called from.
    // Posted past a stop too (never dropped), so that the session is always freed.
    service_->runner_.executor().Post([this] {
      auto& sessions = service_->sessions_;
      auto it = sessions.find(node_);
      if (it != sessions.end() && it->second == this) {
        sessions.erase(it);
        if (generation_ == service_->runner_.engine_generation()) {
          service_->runner_.engine().DetachSession(node_, instance_);
        }
      }
      delete this;
    });
  }

 private:
  AgentService* service_;
  std::function<grpc::Status(const std::string&)> peer_check_;
  v1::AgentMessage in_;
  std::string node_, instance_;  // set by the first read, then read-only
  bool attached_ = false;        // strand-confined
  uint64_t generation_ = 0;      // the engine it attached to (strand-confined)
  // The same, readable from gRPC threads (heartbeats of a session not yet attached take the
  // strand's way, in order behind its Hello).
  std::atomic<bool> attached_once_{false};
  std::mutex mu_;
  std::deque<v1::ControllerMessage> out_;
  bool writing_ = false;
  bool finished_ = false;
};

grpc::Status AgentService::CheckPeerIsNode(const grpc::AuthContext* auth, const std::string& node) {
  if (!verify_node_names_) return grpc::Status::OK;
  if (!auth || !auth->IsPeerAuthenticated()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no verified client certificate");
  }
  // The peer identity is the certificate's DNS subject alternative names, or its common name
  // when it has none.
  std::string names;
  for (const grpc::string_ref& name : auth->GetPeerIdentity()) {
    std::string n(name.data(), name.size());
    if (n == node) return grpc::Status::OK;
    names += (names.empty() ? "" : ", ") + n;
  }
  if (refusals_.Allow()) {
    spdlog::warn("refused a registration as node '{}' from a certificate naming {}",
                 node.substr(0, kMaxShortStringBytes), names.empty() ? "nothing" : names);
  }
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "this certificate names " + (names.empty() ? "no node" : names) +
                          ", not node '" + node.substr(0, kMaxShortStringBytes) + "'");
}

grpc::Status AgentService::CheckNodeProof(const v1::RegisterRequest& req) {
  const std::string& node = req.inventory().name();
  // Nothing from an unproven request is looked up, or logged, before it names a node we have.
  bool known;
  {
    std::lock_guard l(configured_mu_);
    known = configured_nodes_.count(node) > 0;
  }
  if (!known) {
    if (refusals_.Allow()) {
      spdlog::warn("refused a registration as an unknown node '{}'",
                   node.substr(0, kMaxShortStringBytes));
    }
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "no such node in this cluster");
  }
  const int64_t now = MonotonicMs();
  Status s = challenges_.Fresh(req.challenge(), now);
  if (s.ok()) {
    auto key = LoadNodeKey(runner_.config().node_auth, node);
    if (!key.ok()) {
      if (refusals_.Allow()) {
        spdlog::warn("refused a registration as node '{}': {}", node, key.status().message());
      }
      return grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          "this controller has no usable key for node '" + node + "' (its log says why)");
    }
    s = challenges_.Check(req.challenge(), req.proof(), *key, node, req.instance_id(), now);
  }
  if (!s.ok()) {
    if (refusals_.Allow())
      spdlog::warn("refused a registration as node '{}': {}", node, s.message());
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, s.message());
  }
  return grpc::Status::OK;
}

bool AgentService::TicketMatches(const v1::Hello& hello) const {
  auto it = tickets_.find(hello.node());
  return it != tickets_.end() && it->second.first == hello.instance_id() &&
         ConstantTimeEquals(it->second.second, hello.session_ticket());
}

grpc::ServerUnaryReactor* AgentService::Challenge(grpc::CallbackServerContext* ctx,
                                                  const v1::ChallengeRequest*,
                                                  v1::ChallengeResponse* resp) {
  resp->set_challenge(challenges_.Issue(MonotonicMs()));
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* AgentService::Register(grpc::CallbackServerContext* ctx,
                                                 const v1::RegisterRequest* req,
                                                 v1::RegisterResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (grpc::Status peer = verify_node_names_
                              ? CheckPeerIsNode(ctx->auth_context().get(), req->inventory().name())
                              : CheckNodeProof(*req);
      !peer.ok()) {
    reactor->Finish(peer);
    return reactor;
  }
  runner_.executor().Post([this, reactor, req, resp, arrived = StatsClock::now()] {
    if (runner_.stopped()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the controller is stopping"));
      return;
    }
    auto r = runner_.engine().RegisterNode(*req, runner_.Now());
    grpc::Status reply = grpc::Status::OK;
    if (r.ok()) {
      *resp = std::move(*r);
      resp->set_session_ticket(credentials::NewSecret());
      tickets_[req->inventory().name()] = {req->instance_id(), resp->session_ticket()};
    } else {
      reply = grpc::Status(static_cast<grpc::StatusCode>(r.status().code()), r.status().message());
    }
    runner_.AfterEvent();
    runner_.WhenDurable([reactor, reply] { reactor->Finish(reply); });
    runner_.stats().Record("agent/register", StatsClock::now() - arrived);
  });
  return reactor;
}

grpc::ServerBidiReactor<v1::AgentMessage, v1::ControllerMessage>* AgentService::Session(
    grpc::CallbackServerContext* ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  return new AgentSession(
      this, [this, auth](const std::string& node) { return CheckPeerIsNode(auth.get(), node); });
}

void AgentService::Heard(const std::string& node, StatsClock::time_point arrived) {
  std::lock_guard l(heard_mu_);
  auto [it, first] = heard_.try_emplace(node, arrived, 0);
  ++it->second.second;
  if (heard_armed_) return;
  heard_armed_ = true;
  runner_.executor().PostAfter(heartbeat_batch_ms_, [this] { DrainHeard(); });
}

void AgentService::DrainHeard() {
  std::map<std::string, std::pair<StatsClock::time_point, uint32_t>> heard;
  {
    std::lock_guard l(heard_mu_);
    heard.swap(heard_);
    heard_armed_ = false;
  }
  if (runner_.stopped()) return;
  static const v1::AgentMessage kHeartbeat = [] {
    v1::AgentMessage m;
    m.mutable_heartbeat();
    return m;
  }();
  const auto now = runner_.Now();
  for (const auto& [node, first_and_count] : heard) {
    // A node whose session ended meanwhile is not heard from (its replacement says so itself),
    // nor one whose session belongs to an engine a reconfiguration replaced.
    auto session = sessions_.find(node);
    if (session == sessions_.end() ||
        session->second->generation() != runner_.engine_generation()) {
      continue;
    }
    runner_.engine().OnAgentMessage(node, kHeartbeat, now);
  }
  runner_.AfterEvent();
  const auto done = StatsClock::now();
  for (const auto& [node, first_and_count] : heard) {
    for (uint32_t i = 0; i < first_and_count.second; ++i) {
      runner_.stats().Record(AgentKind(v1::AgentMessage::kHeartbeat), done - first_and_count.first);
    }
  }
}

void AgentService::Deliver(std::vector<controller::Outgoing> commands) {
  for (auto& out : commands) {
    auto it = sessions_.find(out.node);
    if (it == sessions_.end()) {
      spdlog::debug("node={} has no session; command dropped (reconciled when it reconnects)",
                    out.node);
      continue;
    }
    if (out.close_session) {
      it->second->End(grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          out.close_reason.empty() ? "node was declared down; register again" : out.close_reason));
    } else {
      it->second->Send(std::move(out.message));
    }
  }
}

void AgentService::EndAll(const std::string& why) {
  for (auto& [node, session] : sessions_) {
    session->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, why));
  }
}

}  // namespace muster::rpc
