#include "muster/rpc/api_dispatch.h"

#include <google/protobuf/io/coded_stream.h>
#include <pwd.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

#include "muster/common/hostlist.h"
#include "muster/controller/access.h"
#include "muster/store/replication_log.h"
#include "muster/v1/controller.pb.h"
#include "request_bounds.h"

namespace muster::rpc {
namespace {

// Appends `m` to `out` as one element of the repeated message field `field`, whose bytes are
// `prefix` followed by m's own (protobuf reads a message's fields in any order, and for a field
// given twice the last value wins).
void AppendRepeatedMessage(std::string& out, int field, std::string_view prefix,
                           const google::protobuf::MessageLite& m) {
  using google::protobuf::io::CodedOutputStream;
  const size_t size = prefix.size() + m.ByteSizeLong();
  uint8_t head[16];
  uint8_t* p = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(field) << 3 | 2, head);
  p = CodedOutputStream::WriteVarint64ToArray(size, p);
  out.append(reinterpret_cast<const char*>(head), static_cast<size_t>(p - head));
  out.append(prefix);
  const size_t at = out.size();
  out.resize(at + size - prefix.size());
  m.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + at));
}

template <typename Req, typename Fn>
ApiReply Handle(const std::string& payload, Fn&& fn) {
  Req req;
  if (!req.ParseFromString(payload)) {
    return {InvalidArgument("request does not parse as " + Req().GetTypeName()), ""};
  }
  if (Status st = CheckRequestBounds(req); !st.ok()) return {st, ""};
  auto result = fn(req);
  if (!result.ok()) return {result.status(), ""};
  return {Status::Ok(), result->SerializeAsString()};
}

std::string ApiKind(uint32_t method) {
  if (method > 1000 || !v1::Method_IsValid(static_cast<int>(method))) return "api/unknown";
  const std::string& name = v1::Method_Name(static_cast<v1::Method>(method));
  return "api/" + name.substr(name.rfind("METHOD_", 0) == 0 ? 7 : 0);
}

Result<v1::DiagnosticsResponse> Diagnostics(controller::ControllerRunner& runner,
                                            const controller::Caller& caller,
                                            const std::string& payload) {
  v1::DiagnosticsRequest req;
  if (!req.ParseFromString(payload)) {
    return InvalidArgument("request does not parse as " + req.GetTypeName());
  }
  if (req.reset()) MUSTER_RETURN_IF_ERROR(Authorize(caller, controller::Action::kResetStatistics));
  v1::DiagnosticsResponse resp;
  runner.engine().FillDiagnostics(caller, &resp);
  resp.set_now_ms(runner.Now());
  resp.set_since_ms(std::max(runner.stats().reset_ms(), resp.start_time_ms()));
  if (const store::ReplicationLog* log = runner.replication_log()) {
    resp.set_replicating(true);
    for (const std::string& name : log->in_sync()) resp.add_standbys_in_sync(name);
    resp.set_last_change(log->last_seq());
    for (const auto& s : log->standbys()) {
      v1::StandbyStatus* out = resp.add_standbys();
      out->set_name(s.name);
      out->set_in_sync(s.in_sync);
      out->set_acked_change(s.acked);
      out->set_last_ack_ms(s.acked_at_ms);
    }
  }
  for (const auto& t : runner.stats().Snapshot()) {
    v1::ServiceTiming* out = resp.add_timings();
    out->set_kind(t.kind);
    out->set_count(t.count);
    out->set_mean_us(t.mean_us);
    out->set_p50_us(t.p50_us);
    out->set_p99_us(t.p99_us);
    out->set_max_us(t.max_us);
  }
  // The reply covers what the reset ends.
  if (req.reset()) runner.stats().Reset(runner.Now());
  return resp;
}

}  // namespace

void ApiDispatcher::Dispatch(std::shared_ptr<ClientSession> session, uint32_t method,
                             std::string payload, std::function<void(ApiReply)> reply) {
  // Every request is timed from here (its arrival) to its reply, for sdiag.
  auto done = [this, method, arrived = controller::ServiceStats::Clock::now(),
               reply = std::move(reply)](ApiReply r) {
    const std::string kind = ApiKind(method);
    runner_.stats().Record(kind, controller::ServiceStats::Clock::now() - arrived);
    runner_.stats().CountResult(kind, StatusCodeName(r.status.code()));
    reply(std::move(r));
  };
  runner_.Post([this, session = std::move(session), method, payload = std::move(payload),
                done = std::move(done)]() mutable {
    controller::Engine& engine = runner_.engine();
    ApplyRoles(session->caller, engine.config());
    if (method == v1::METHOD_RECONFIGURE) {
      v1::ReconfigureRequest req;
      if (!req.ParseFromString(payload)) {
        return done({InvalidArgument("request does not parse as " + req.GetTypeName()), ""});
      }
      return Reconfigure(session->caller, [done](Result<v1::ReconfigureResponse> resp) {
        done(resp.ok() ? ApiReply{Status::Ok(), resp->SerializeAsString()}
                       : ApiReply{resp.status(), ""});
      });
    }
    if (method == v1::METHOD_UPDATE_PARTITION) {
      // Replaces the engine, as a reconfiguration does: not the engine's to answer alone.
      v1::UpdatePartitionRequest req;
      if (!req.ParseFromString(payload)) {
        return done({InvalidArgument("request does not parse as " + req.GetTypeName()), ""});
      }
      if (Status bounds = CheckRequestBounds(req); !bounds.ok()) return done({bounds, ""});
      Result<v1::UpdatePartitionResponse> resp = ChangePartitionOnStrand(session->caller, req);
      runner_.AfterEvent();
      ApiReply r = resp.ok() ? ApiReply{Status::Ok(), resp->SerializeAsString()}
                             : ApiReply{resp.status(), ""};
      return runner_.WhenDurable([done, r = std::move(r)]() mutable { done(std::move(r)); });
    }
    if (method == v1::METHOD_WEB_LOGIN) {
      Result<v1::WebLoginResponse> resp =
          web_login_ ? web_login_(session->caller)
                     : Result<v1::WebLoginResponse>(
                           Unavailable("this controller serves no web view ([controller] "
                                       "web_address)"));
      ApiReply r = resp.ok() ? ApiReply{Status::Ok(), resp->SerializeAsString()}
                             : ApiReply{resp.status(), ""};
      return runner_.WhenDurable([done, r = std::move(r)]() mutable { done(std::move(r)); });
    }
    if (method == v1::METHOD_UPDATE_NODE) {
      // A node's features, weight or GRES set live replace the engine too.
      v1::UpdateNodeRequest req;
      if (req.ParseFromString(payload) && (req.action() == v1::UpdateNodeRequest::SET ||
                                           req.action() == v1::UpdateNodeRequest::RESET)) {
        if (Status bounds = CheckRequestBounds(req); !bounds.ok()) return done({bounds, ""});
        Result<v1::UpdateNodeResponse> resp = ChangeNodesOnStrand(session->caller, req);
        runner_.AfterEvent();
        ApiReply r = resp.ok() ? ApiReply{Status::Ok(), resp->SerializeAsString()}
                               : ApiReply{resp.status(), ""};
        return runner_.WhenDurable([done, r = std::move(r)]() mutable { done(std::move(r)); });
      }
    }
    if (method == v1::METHOD_DIAGNOSTICS) {
      auto resp = Diagnostics(runner_, session->caller, payload);
      ApiReply r = resp.ok() ? ApiReply{Status::Ok(), resp->SerializeAsString()}
                             : ApiReply{resp.status(), ""};
      // Behind the replies still waiting for a sync: never ahead of an earlier answer.
      return runner_.WhenDurable([done, r = std::move(r)]() mutable { done(std::move(r)); });
    }
    if (method == v1::METHOD_LIST_ACCOUNTING) {
      // sacct: the live jobs are read on the strand, the archive is scanned on the query worker
      // (a 100,000-job history would hold the strand, and with it scheduling and every request,
      // for half a second).
      v1::ListAccountingRequest req;
      if (!req.ParseFromString(payload)) {
        return done({InvalidArgument("request does not parse as " + req.GetTypeName()), ""});
      }
      if (Status st = CheckRequestBounds(req); !st.ok()) return done({st, ""});
      auto query = std::make_shared<controller::Engine::AccountingQuery>(
          engine.PrepareAccounting(session->caller, req, runner_.Now()));
      runner_.executor().Offload(Executor::Lane::kQuery, [query, done] {
        auto resp = controller::Engine::ScanAccounting(*query);
        done(resp.ok() ? ApiReply{Status::Ok(), resp->SerializeAsString()}
                       : ApiReply{resp.status(), ""});
      });
      return;
    }
    ApiReply r;
    try {
      r = DispatchApi(engine, session->caller, method, payload, runner_.Now());
    } catch (const std::exception& e) {  // last resort: never take the controller down
      r = {Internal(std::string("unexpected error: ") + e.what()), ""};
    }
    if (r.status.ok() && method == v1::METHOD_ATTACH_ALLOCATION) {
      // An srun/salloc holds its allocation through this connection.
      v1::AttachAllocationRequest req;
      if (req.ParseFromString(payload)) {
        if (session->allocations.empty()) holders_.push_back(session);
        session->allocations.push_back(req.job_id());
      }
    }
    runner_.AfterEvent();
    // Acknowledged only once what it changed is on disk.
    runner_.WhenDurable([done, r = std::move(r)]() mutable { done(std::move(r)); });
  });
}

void ApiDispatcher::SessionClosed(std::shared_ptr<ClientSession> session) {
  runner_.Post([this, session = std::move(session)] {
    if (session->allocations.empty()) return;
    std::erase_if(holders_, [&](const std::weak_ptr<ClientSession>& w) {
      std::shared_ptr<ClientSession> s = w.lock();
      return !s || s == session;
    });
    for (uint64_t id : session->allocations) {
      runner_.engine().AllocationClientGone(id, runner_.Now());
    }
    session->allocations.clear();
    runner_.AfterEvent();
  });
}

void ApiDispatcher::Reconfigure(const controller::Caller& caller,
                                std::function<void(Result<v1::ReconfigureResponse>)> done) {
  runner_.Post([this, caller, done = std::move(done)]() mutable {
    Result<v1::ReconfigureResponse> resp = ReconfigureOnStrand(caller);
    runner_.AfterEvent();
    // Answered once the new epoch (and the audit entry) is on disk.
    runner_.WhenDurable(
        [done = std::move(done), resp = std::move(resp)]() mutable { done(std::move(resp)); });
  });
}

Result<v1::ReconfigureResponse> ApiDispatcher::ReconfigureOnStrand(
    const controller::Caller& asked_by) {
  const TimeMs now = runner_.Now();
  // Its rights as the config says now (an earlier reconfiguration queued ahead may have removed
  // them since the request arrived).
  controller::Caller caller = asked_by;
  ApplyRoles(caller, runner_.engine().config());
  const std::string source = runner_.engine().config().source;
  Result<controller::ControllerRunner::Reconfigured> outcome = [&] {
    if (Status allowed = Authorize(caller, controller::Action::kReconfigure); !allowed.ok()) {
      return Result<controller::ControllerRunner::Reconfigured>(allowed);
    }
    if (!load_config_) {
      return Result<controller::ControllerRunner::Reconfigured>(
          Unimplemented("this controller was not told where to read its configuration again"));
    }
    Result<Config> file = load_config_();
    if (!file.ok()) {
      return Result<controller::ControllerRunner::Reconfigured>(Status(
          file.status().code(), "the running configuration is kept: " + file.status().message()));
    }
    return runner_.Reconfigure(std::move(*file));
  }();
  std::string detail;
  if (outcome.ok()) {
    for (const std::string& c : outcome->changes) detail += (detail.empty() ? "" : "; ") + c;
    if (detail.empty()) detail = "no changes";
  }
  // In the engine that now runs: the new one when it took over.
  runner_.engine().AuditReconfiguration(caller, source, detail, outcome.status(), now);
  if (!outcome.ok()) return outcome.status();
  ReattachAllocations(now);
  v1::ReconfigureResponse resp;
  resp.set_epoch(outcome->epoch);
  resp.set_source(runner_.engine().config().source);
  for (const std::string& c : outcome->changes) resp.add_changes(c);
  for (const std::string& k : outcome->restart_only) resp.add_restart_only(k);
  if (reconfigured_) reconfigured_(resp);
  return resp;
}

Result<v1::UpdatePartitionResponse> ApiDispatcher::ChangePartitionOnStrand(
    const controller::Caller& asked_by, const v1::UpdatePartitionRequest& req) {
  const TimeMs now = runner_.Now();
  controller::Caller caller = asked_by;
  ApplyRoles(caller, runner_.engine().config());
  MUSTER_ASSIGN_OR_RETURN(controller::ControllerRunner::Reconfigured outcome,
                          runner_.ChangePartition(caller, req));
  AfterEngineReplaced(now, outcome.epoch);
  v1::UpdatePartitionResponse resp;
  resp.set_epoch(outcome.epoch);
  return resp;
}

Result<v1::UpdateNodeResponse> ApiDispatcher::ChangeNodesOnStrand(
    const controller::Caller& asked_by, const v1::UpdateNodeRequest& req) {
  const TimeMs now = runner_.Now();
  controller::Caller caller = asked_by;
  ApplyRoles(caller, runner_.engine().config());
  MUSTER_ASSIGN_OR_RETURN(controller::ControllerRunner::Reconfigured outcome,
                          runner_.ChangeNodes(caller, req));
  AfterEngineReplaced(now, outcome.epoch);
  v1::UpdateNodeResponse resp;
  if (req.nodes() == "ALL") {
    for (const NodeConfig& n : runner_.engine().config().nodes) resp.add_updated(n.name);
    return resp;
  }
  MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandHostlist(req.nodes()));
  for (const std::string& n : names) resp.add_updated(n);
  return resp;
}

void ApiDispatcher::AfterEngineReplaced(TimeMs asked_at, uint64_t epoch) {
  ReattachAllocations(asked_at);
  if (reconfigured_) {  // the server's view of the epoch, as after a reconfiguration
    v1::ReconfigureResponse told;
    told.set_epoch(epoch);
    told.set_source(runner_.engine().config().source);
    reconfigured_(told);
  }
}

void ApiDispatcher::ReattachAllocations(TimeMs now) {
  std::vector<std::weak_ptr<ClientSession>> still;
  for (const std::weak_ptr<ClientSession>& weak : holders_) {
    std::shared_ptr<ClientSession> session = weak.lock();
    if (!session || session->allocations.empty()) continue;
    still.push_back(session);
    ApplyRoles(session->caller, runner_.engine().config());
    for (uint64_t id : session->allocations) {
      v1::AttachAllocationRequest req;
      req.set_job_id(id);
      auto attached = runner_.engine().AttachAllocation(session->caller, req, now);
      if (!attached.ok() && attached.status().code() != StatusCode::kNotFound) {
        spdlog::warn("reconfigure: allocation {} of {} not attached again: {}", id,
                     session->caller.user, attached.status().ToString());
      }
    }
  }
  holders_.swap(still);
}

ApiReply DispatchApi(controller::Engine& engine, const controller::Caller& caller, uint32_t method,
                     const std::string& payload, TimeMs now) {
  switch (static_cast<v1::Method>(method)) {
    case v1::METHOD_SUBMIT_JOB:
      return Handle<v1::SubmitJobRequest>(
          payload, [&](const auto& r) { return engine.SubmitJob(caller, r, now); });
    case v1::METHOD_CANCEL_JOB:
      return Handle<v1::CancelJobRequest>(
          payload, [&](const auto& r) { return engine.CancelJob(caller, r, now); });
    case v1::METHOD_GET_JOB:
      return Handle<v1::GetJobRequest>(payload,
                                       [&](const auto& r) { return engine.GetJob(caller, r); });
    case v1::METHOD_LIST_JOBS: {
      // squeue's hot path: the engine builds the reply's bytes itself.
      v1::ListJobsRequest req;
      if (!req.ParseFromString(payload)) {
        return {InvalidArgument("request does not parse as " + req.GetTypeName()), ""};
      }
      if (Status st = CheckRequestBounds(req); !st.ok()) return {st, ""};
      return {Status::Ok(), EncodeJobList(engine, caller, req)};
    }
    case v1::METHOD_LIST_NODES:
      return Handle<v1::ListNodesRequest>(
          payload, [&](const auto& r) { return engine.ListNodes(caller, r, now); });
    case v1::METHOD_UPDATE_NODE:
      return Handle<v1::UpdateNodeRequest>(
          payload, [&](const auto& r) { return engine.UpdateNode(caller, r, now); });
    case v1::METHOD_CONTROLLER_INFO:
      return Handle<v1::ControllerInfoRequest>(
          payload, [&](const auto&) { return engine.ControllerInfo(); });
    case v1::METHOD_CREATE_STEP:
      return Handle<v1::CreateStepRequest>(
          payload, [&](const auto& r) { return engine.CreateStep(caller, r, now); });
    case v1::METHOD_RELEASE_ALLOCATION:
      return Handle<v1::ReleaseAllocationRequest>(
          payload, [&](const auto& r) { return engine.ReleaseAllocation(caller, r, now); });
    case v1::METHOD_ATTACH_ALLOCATION:
      return Handle<v1::AttachAllocationRequest>(
          payload, [&](const auto& r) { return engine.AttachAllocation(caller, r, now); });
    case v1::METHOD_UPDATE_JOB:
      return Handle<v1::UpdateJobRequest>(
          payload, [&](const auto& r) { return engine.UpdateJob(caller, r, now); });
    case v1::METHOD_EXPLAIN_JOB:
      return Handle<v1::ExplainJobRequest>(
          payload, [&](const auto& r) { return engine.ExplainJob(caller, r, now); });
    case v1::METHOD_LIST_AUDIT:
      return Handle<v1::ListAuditRequest>(
          payload, [&](const auto& r) { return engine.ListAudit(caller, r, now); });
    case v1::METHOD_UPDATE_ACCOUNT:
      return Handle<v1::UpdateAccountRequest>(
          payload, [&](const auto& r) { return engine.UpdateAccount(caller, r, now); });
    case v1::METHOD_UPDATE_QOS:
      return Handle<v1::UpdateQosRequest>(
          payload, [&](const auto& r) { return engine.UpdateQos(caller, r, now); });
    case v1::METHOD_UPDATE_RESERVATION:
      return Handle<v1::UpdateReservationRequest>(
          payload, [&](const auto& r) { return engine.UpdateReservation(caller, r, now); });
    case v1::METHOD_LIST_RESERVATIONS:
      return Handle<v1::ListReservationsRequest>(
          payload, [&](const auto& r) { return engine.ListReservations(caller, r, now); });
    case v1::METHOD_UPDATE_USER:
      return Handle<v1::UpdateUserRequest>(
          payload, [&](const auto& r) { return engine.UpdateUser(caller, r, now); });
    case v1::METHOD_LIST_ACCOUNTS:
      return Handle<v1::ListAccountsRequest>(
          payload, [&](const auto&) { return engine.ListAccounts(caller); });
    case v1::METHOD_LIST_SHARES:
      return Handle<v1::ListSharesRequest>(
          payload, [&](const auto& r) { return engine.ListShares(caller, r, now); });
    case v1::METHOD_LIST_ACCOUNTING:
      return Handle<v1::ListAccountingRequest>(
          payload, [&](const auto& r) { return engine.ListAccounting(caller, r, now); });
    case v1::METHOD_LIST_PARTITIONS:
      return Handle<v1::ListPartitionsRequest>(
          payload, [&](const auto&) { return engine.ListPartitions(caller); });
    case v1::METHOD_UPDATE_PARTITION:  // replaces the engine: ApiDispatcher::Dispatch
    case v1::METHOD_RECONFIGURE:       // replaces the engine: ApiDispatcher::Reconfigure
      return {FailedPrecondition("reconfiguring goes through the controller's dispatcher"), ""};
    default:
      return {Unimplemented("unknown method " + std::to_string(method) +
                            " (client newer than the controller?)"),
              ""};
  }
}

std::string EncodeJobList(const controller::Engine& engine, const controller::Caller& caller,
                          const v1::ListJobsRequest& req, size_t page_bytes) {
  using google::protobuf::io::CodedOutputStream;
  constexpr int kJobs = v1::ListJobsResponse::kJobsFieldNumber;
  std::string out;
  out.reserve(
      std::min<size_t>(page_bytes, req.job_ids().empty() ? 1 << 20 : req.job_ids_size() * 200) +
      64 * 1024);
  const uint64_t next =
      engine.VisitJobs(caller, req, [&](const v1::JobInfo& row, std::string_view spec_fields) {
        AppendRepeatedMessage(out, kJobs, spec_fields, row);
        return out.size() < page_bytes;
      });
  if (next != 0) {
    uint8_t tail[16];
    uint8_t* p = CodedOutputStream::WriteVarint32ToArray(
        static_cast<uint32_t>(v1::ListJobsResponse::kNextAfterIdFieldNumber) << 3, tail);
    p = CodedOutputStream::WriteVarint64ToArray(next, p);
    out.append(reinterpret_cast<const char*>(tail), static_cast<size_t>(p - tail));
  }
  return out;
}

controller::Caller ResolveCaller(uint32_t uid, uint32_t gid, const Config& config) {
  controller::Caller c;
  c.uid = uid;
  c.gid = gid;
  struct passwd pw;
  struct passwd* out = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &out) == 0 && out) {
    c.user = out->pw_name;
  } else {
    c.user = std::to_string(uid);
  }
  ApplyRoles(c, config);
  return c;
}

void ApplyRoles(controller::Caller& c, const Config& config) {
  const std::string uid = std::to_string(c.uid);
  const auto& a = config.admins;
  c.is_admin = c.uid == 0 || std::find(a.begin(), a.end(), c.user) != a.end() ||
               std::find(a.begin(), a.end(), uid) != a.end();
  const auto& o = config.operators;
  c.is_operator = std::find(o.begin(), o.end(), c.user) != o.end() ||
                  std::find(o.begin(), o.end(), uid) != o.end();
}

}  // namespace muster::rpc
