#include "muster/client/controller_client.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>

#include "muster/common/framing.h"
#include "muster/common/job_limits.h"
#include "muster/common/munge.h"

namespace muster::client {

namespace {
// A credential is used at once; munged refuses it after this long anyway.
constexpr int kCredentialTtlS = 60;
}  // namespace

Result<ControllerClient> ControllerClient::Connect(const std::string& socket_path) {
  MUSTER_ASSIGN_OR_RETURN(int fd, ConnectUnix(socket_path));
  return ControllerClient(fd);
}

Result<ControllerClient> ControllerClient::ConnectTcp(const Config& config) {
  const std::vector<std::string> addresses = ControllerApiAddresses(config);
  if (addresses.empty()) {
    return FailedPrecondition("the controller's socket " + config.controller.socket_path +
                              " is not on this host, and " + config.source +
                              " sets no controller.api_address to reach it over the network");
  }
  MUSTER_ASSIGN_OR_RETURN(const Munge* munge, Munge::Get());
  Status last;
  for (const std::string& address : addresses) {
    // A standby does not listen: its refusal is quick, and the next address is tried.
    auto fd = muster::ConnectTcp(address, 10'000);
    if (!fd.ok()) {
      last = fd.status().Prepend("cannot reach the controller at " + address);
      continue;
    }
    ControllerClient client(*fd);
    MUSTER_ASSIGN_OR_RETURN(
        std::string credential,
        munge->Encode(config.munge.socket, "muster-api:" + config.cluster_name, kCredentialTtlS));
    v1::AuthenticateRequest req;
    req.set_munge_credential(std::move(credential));
    v1::AuthenticateResponse resp;
    if (Status st = client.Call(v1::METHOD_AUTHENTICATE, req, &resp, 30'000); !st.ok()) {
      return st.Prepend("the controller at " + address + " did not accept this host's credential");
    }
    return client;
  }
  return last;
}

namespace {
Result<ControllerClient> ConnectOnce(const Config& config, const std::string& forced) {
  if (forced == "tcp") return ControllerClient::ConnectTcp(config);
  Result<ControllerClient> local = Unavailable("no controller socket configured");
  for (const std::string& path : ControllerSocketPaths(config)) {
    local = ControllerClient::Connect(path);
    if (local.ok()) return local;
  }
  if (forced == "socket" || ControllerApiAddresses(config).empty()) return local;
  // Not the controller's host (or its socket is gone): the network way.
  return ControllerClient::ConnectTcp(config);
}
}  // namespace

Result<ControllerClient> ControllerClient::ConnectTo(const Config& config) {
  const char* env = std::getenv("MUSTER_API");
  const std::string forced = env ? env : "";
  auto client = ConnectOnce(config, forced);
  if (client.ok() || config.controllers.size() < 2 ||
      client.status().code() != StatusCode::kUnavailable) {
    return client;
  }
  // A hot standby: while one controller takes over from another, none answers for a few
  // seconds (the leader's lease, then the new leader's start). Wait that out, as commands did
  // not fail when a single controller restarted quickly.
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::seconds(config.controller.leader_lease_s + 10);
  while (!client.ok() && client.status().code() == StatusCode::kUnavailable &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    client = ConnectOnce(config, forced);
  }
  return client;
}

ControllerClient& ControllerClient::operator=(ControllerClient&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

ControllerClient::~ControllerClient() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::string> ControllerClient::CallRaw(v1::Method method,
                                              const google::protobuf::MessageLite& request,
                                              int timeout_ms) {
  if (fd_ < 0) return Unavailable("not connected");
  MUSTER_RETURN_IF_ERROR(
      WriteFrame(fd_, static_cast<uint32_t>(method), request.SerializeAsString()));
  auto reply = ReadFrame(fd_, timeout_ms);
  if (!reply.ok()) return reply.status().Prepend("controller did not answer");
  if (reply->type != 0) {
    int code = static_cast<int>(reply->type);
    if (code < 0 || code > 16) code = static_cast<int>(StatusCode::kUnknown);
    return Status(static_cast<StatusCode>(code), reply->payload);
  }
  return std::move(reply->payload);
}

Status ControllerClient::Call(v1::Method method, const google::protobuf::MessageLite& request,
                              google::protobuf::MessageLite* response, int timeout_ms) {
  MUSTER_ASSIGN_OR_RETURN(std::string payload, CallRaw(method, request, timeout_ms));
  if (!response->ParseFromString(payload)) {
    return Internal("controller reply does not parse (version mismatch?)");
  }
  return Status::Ok();
}

Status ForEachJobInPage(std::string_view page, uint64_t* next_after_id,
                        const std::function<void(const v1::JobInfo&)>& each) {
  using google::protobuf::internal::WireFormatLite;
  const uint32_t jobs_tag = WireFormatLite::MakeTag(v1::ListJobsResponse::kJobsFieldNumber,
                                                    WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  const uint32_t next_tag = WireFormatLite::MakeTag(v1::ListJobsResponse::kNextAfterIdFieldNumber,
                                                    WireFormatLite::WIRETYPE_VARINT);
  const Status bad = Internal("controller reply does not parse (version mismatch?)");
  if (page.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return bad;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(page.data()),
                                            static_cast<int>(page.size()));
  v1::JobInfo row;
  std::vector<v1::WaitingRun> runs;
  *next_after_id = 0;
  for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
    if (tag == next_tag) {
      if (!in.ReadVarint64(next_after_id)) return bad;
      continue;
    }
    if (tag != jobs_tag) {  // a field this client does not know
      if (!WireFormatLite::SkipField(&in, tag)) return bad;
      continue;
    }
    uint32_t len = 0;
    if (!in.ReadVarint32(&len) || len > page.size()) return bad;
    const auto limit = in.PushLimit(static_cast<int>(len));
    row.Clear();  // keeps the strings' buffers: no allocation per job
    const bool parsed = row.MergeFromCodedStream(&in) && in.ConsumedEntireMessage();
    in.PopLimit(limit);
    if (!parsed) return bad;
    // An array's waiting tasks come as runs of the carrier's row: one row each here. They are
    // one array's, so no more than an array can have, whatever a reply says.
    runs.assign(row.array_waiting().begin(), row.array_waiting().end());
    row.clear_array_waiting();
    uint64_t waiting = 0;
    for (const v1::WaitingRun& run : runs) waiting += run.count();
    if (waiting > kMaxArrayTasks) {
      return Internal("controller reply names an implausible run of array tasks");
    }
    each(row);
    for (const v1::WaitingRun& run : runs) {
      for (uint32_t k = 0; k < run.count(); ++k) {
        row.set_id(run.first_id() + k);
        row.mutable_array()->set_task_id(run.first_task() + k * run.task_step());
        each(row);
      }
    }
  }
  if (in.CurrentPosition() != static_cast<int>(page.size())) return bad;
  return Status::Ok();
}

Status ControllerClient::ListJobsEach(const v1::ListJobsRequest& r,
                                      const std::function<void(const v1::JobInfo&)>& each) {
  v1::ListJobsRequest page = r;
  // The controller sends a bounded page at a time: ask for the next until it says there is none.
  for (;;) {
    MUSTER_ASSIGN_OR_RETURN(std::string payload, CallRaw(v1::METHOD_LIST_JOBS, page));
    uint64_t next = 0;
    MUSTER_RETURN_IF_ERROR(ForEachJobInPage(payload, &next, each));
    if (next == 0) return Status::Ok();
    if (next <= page.after_id()) return Internal("controller reply pages backwards");
    page.set_after_id(next);
  }
}

Result<v1::ListJobsResponse> ControllerClient::ListJobs(const v1::ListJobsRequest& r) {
  v1::ListJobsResponse resp;
  MUSTER_RETURN_IF_ERROR(ListJobsEach(r, [&](const v1::JobInfo& j) { *resp.add_jobs() = j; }));
  return resp;
}

namespace {
template <typename Resp, typename Req>
Result<Resp> Do(ControllerClient& c, v1::Method m, const Req& req) {
  Resp resp;
  MUSTER_RETURN_IF_ERROR(c.Call(m, req, &resp));
  return resp;
}
}  // namespace

Result<v1::SubmitJobResponse> ControllerClient::SubmitJob(const v1::SubmitJobRequest& r) {
  return Do<v1::SubmitJobResponse>(*this, v1::METHOD_SUBMIT_JOB, r);
}
Result<v1::CancelJobResponse> ControllerClient::CancelJob(const v1::CancelJobRequest& r) {
  return Do<v1::CancelJobResponse>(*this, v1::METHOD_CANCEL_JOB, r);
}
Result<v1::ExplainJobResponse> ControllerClient::ExplainJob(uint64_t job_id) {
  v1::ExplainJobRequest r;
  r.set_job_id(job_id);
  return Do<v1::ExplainJobResponse>(*this, v1::METHOD_EXPLAIN_JOB, r);
}
Result<v1::GetJobResponse> ControllerClient::GetJob(uint64_t job_id) {
  v1::GetJobRequest r;
  r.set_job_id(job_id);
  return GetJob(r);
}
Result<v1::GetJobResponse> ControllerClient::GetJob(const v1::GetJobRequest& r) {
  return Do<v1::GetJobResponse>(*this, v1::METHOD_GET_JOB, r);
}
Result<v1::ListNodesResponse> ControllerClient::ListNodes(const v1::ListNodesRequest& r) {
  return Do<v1::ListNodesResponse>(*this, v1::METHOD_LIST_NODES, r);
}
Result<v1::UpdateNodeResponse> ControllerClient::UpdateNode(const v1::UpdateNodeRequest& r) {
  return Do<v1::UpdateNodeResponse>(*this, v1::METHOD_UPDATE_NODE, r);
}
Result<v1::ControllerInfoResponse> ControllerClient::ControllerInfo() {
  return Do<v1::ControllerInfoResponse>(*this, v1::METHOD_CONTROLLER_INFO,
                                        v1::ControllerInfoRequest());
}
Result<v1::DiagnosticsResponse> ControllerClient::Diagnostics(bool reset) {
  v1::DiagnosticsRequest r;
  r.set_reset(reset);
  return Do<v1::DiagnosticsResponse>(*this, v1::METHOD_DIAGNOSTICS, r);
}
Result<v1::ReconfigureResponse> ControllerClient::Reconfigure() {
  return Do<v1::ReconfigureResponse>(*this, v1::METHOD_RECONFIGURE, v1::ReconfigureRequest());
}
Result<v1::CreateStepResponse> ControllerClient::CreateStep(const v1::CreateStepRequest& r) {
  return Do<v1::CreateStepResponse>(*this, v1::METHOD_CREATE_STEP, r);
}
Result<v1::AttachAllocationResponse> ControllerClient::AttachAllocation(uint64_t job_id) {
  v1::AttachAllocationRequest r;
  r.set_job_id(job_id);
  return Do<v1::AttachAllocationResponse>(*this, v1::METHOD_ATTACH_ALLOCATION, r);
}
Status ControllerClient::ReleaseAllocation(uint64_t job_id, int exit_code, int signal) {
  v1::ReleaseAllocationRequest r;
  r.set_job_id(job_id);
  r.set_exit_code(exit_code);
  r.set_signal(signal);
  return Do<v1::ReleaseAllocationResponse>(*this, v1::METHOD_RELEASE_ALLOCATION, r).status();
}
Result<v1::UpdateJobResponse> ControllerClient::UpdateJob(const v1::UpdateJobRequest& r) {
  return Do<v1::UpdateJobResponse>(*this, v1::METHOD_UPDATE_JOB, r);
}
Result<v1::ListAccountingResponse> ControllerClient::ListAccounting(
    const v1::ListAccountingRequest& r) {
  // The controller answers a page at a time (1 MiB, 20,000 jobs): ask until it says it is done
  // or the caller's limit is reached.
  v1::ListAccountingResponse all;
  v1::ListAccountingRequest page = r;
  for (;;) {
    MUSTER_ASSIGN_OR_RETURN(
        v1::ListAccountingResponse resp,
        Do<v1::ListAccountingResponse>(*this, v1::METHOD_LIST_ACCOUNTING, page));
    for (v1::JobInfo& j : *resp.mutable_jobs()) *all.add_jobs() = std::move(j);
    const uint64_t next = resp.next_after_id();
    if (next == 0) return all;
    if (next <= page.after_id()) return Internal("controller reply pages backwards");
    if (r.limit() > 0) {
      if (static_cast<uint64_t>(all.jobs_size()) >= r.limit()) return all;
      page.set_limit(r.limit() - static_cast<uint32_t>(all.jobs_size()));
    }
    page.set_after_id(next);
  }
}

}  // namespace muster::client
