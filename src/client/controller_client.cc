#include "muster/client/controller_client.h"

#include <unistd.h>

#include "muster/common/framing.h"

namespace muster::client {

Result<ControllerClient> ControllerClient::Connect(const std::string& socket_path) {
  MUSTER_ASSIGN_OR_RETURN(int fd, ConnectUnix(socket_path));
  return ControllerClient(fd);
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

Status ControllerClient::Call(v1::Method method, const google::protobuf::MessageLite& request,
                              google::protobuf::MessageLite* response, int timeout_ms) {
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
  if (!response->ParseFromString(reply->payload)) {
    return Internal("controller reply does not parse (version mismatch?)");
  }
  return Status::Ok();
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
Result<v1::GetJobResponse> ControllerClient::GetJob(uint64_t job_id) {
  v1::GetJobRequest r;
  r.set_job_id(job_id);
  return Do<v1::GetJobResponse>(*this, v1::METHOD_GET_JOB, r);
}
Result<v1::ListJobsResponse> ControllerClient::ListJobs(const v1::ListJobsRequest& r) {
  return Do<v1::ListJobsResponse>(*this, v1::METHOD_LIST_JOBS, r);
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
  return Do<v1::ListAccountingResponse>(*this, v1::METHOD_LIST_ACCOUNTING, r);
}

}  // namespace muster::client
