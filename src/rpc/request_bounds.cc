#include "request_bounds.h"

#include <string>
#include <string_view>

#include "muster/common/job_limits.h"
#include "muster/common/text_bounds.h"

namespace muster::rpc {
namespace {

// Names in a filter or list (users, partitions, nodes): more than this is not a query anyone
// types, and each is short.
constexpr int kMaxNames = 100'000;

Status CheckNames(std::string_view what, const google::protobuf::RepeatedPtrField<std::string>& l) {
  return CheckTextList(what, l, kMaxNames, kMaxShortStringBytes);
}

Status CheckIds(std::string_view what, int n) {
  if (static_cast<size_t>(n) > kMaxJobIdsPerRequest) {
    return InvalidArgument(std::string(what) + ": " + std::to_string(n) + " job ids; at most " +
                           std::to_string(kMaxJobIdsPerRequest));
  }
  return Status::Ok();
}

template <typename States>
Status CheckStates(const States& states) {
  if (states.size() > 64) return InvalidArgument("too many job states in one filter");
  for (int s : states) {
    if (!v1::JobState_IsValid(s)) return InvalidArgument("unknown job state " + std::to_string(s));
  }
  return Status::Ok();
}

}  // namespace

Status CheckRequestBounds(const v1::ListJobsRequest& r) {
  MUSTER_RETURN_IF_ERROR(CheckNames("users", r.users()));
  MUSTER_RETURN_IF_ERROR(CheckNames("partitions", r.partitions()));
  MUSTER_RETURN_IF_ERROR(CheckIds("job ids", r.job_ids_size()));
  return CheckStates(r.states());
}

Status CheckRequestBounds(const v1::ListNodesRequest& r) { return CheckNames("nodes", r.names()); }

Status CheckRequestBounds(const v1::UpdateNodeRequest& r) {
  if (!v1::UpdateNodeRequest::Action_IsValid(r.action())) {
    return InvalidArgument("unknown node action " + std::to_string(r.action()));
  }
  MUSTER_RETURN_IF_ERROR(CheckText("node list", r.nodes(), kMaxExpressionBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("reason", r.reason(), kMaxNameBytes));
  // Live settings: a feature list and a GRES text of a node (node_overlay.cc checks each).
  if (r.settings().features().names_size() > 64 || r.reset_size() > 8) {
    return InvalidArgument("at most 64 features and 8 settings to reset");
  }
  for (const std::string& f : r.settings().features().names()) {
    MUSTER_RETURN_IF_ERROR(CheckText("feature", f, kMaxNameBytes));
  }
  for (const std::string& f : r.reset()) MUSTER_RETURN_IF_ERROR(CheckText("reset", f, 64));
  return CheckText("GRES", r.settings().gres(), kMaxExpressionBytes);
}

// (The engine bounds the ids of a cancel or update itself: controller/spec_bounds.h.)
Status CheckRequestBounds(const v1::UpdateJobRequest& r) {
  if (!v1::UpdateJobRequest::Action_IsValid(r.action())) {
    return InvalidArgument("unknown job action " + std::to_string(r.action()));
  }
  const v1::JobModification& m = r.modify();
  if (m.partitions_size() > 64) return InvalidArgument("at most 64 partitions");
  for (const std::string& p : m.partitions()) {
    if (p.size() > 256) return InvalidArgument("a partition name is too long");
  }
  if (m.qos().size() > 256 || m.account().size() > 256 || m.dependency().size() > 4096) {
    return InvalidArgument("a QoS, account or dependency is too long");
  }
  return Status::Ok();
}

Status CheckRequestBounds(const v1::CancelJobRequest& r) {
  if (r.signal() < 0 || r.signal() > 64) {
    return InvalidArgument("signal " + std::to_string(r.signal()) + " is not one (1-64)");
  }
  return Status::Ok();
}

Status CheckRequestBounds(const v1::CreateStepRequest& r) {
  MUSTER_RETURN_IF_ERROR(CheckText("step name", r.name(), kMaxNameBytes));
  MUSTER_RETURN_IF_ERROR(CheckNames("--nodelist", r.nodelist()));
  return CheckNames("--exclude", r.exclude());
}

Status CheckRequestBounds(const v1::ListAccountingRequest& r) {
  MUSTER_RETURN_IF_ERROR(CheckNames("users", r.users()));
  MUSTER_RETURN_IF_ERROR(CheckNames("partitions", r.partitions()));
  MUSTER_RETURN_IF_ERROR(CheckIds("job ids", r.job_ids_size()));
  return CheckStates(r.states());
}

Status CheckRequestBounds(const v1::ListAuditRequest& r) {
  if (r.since_ms() < 0 || r.until_ms() < 0) return InvalidArgument("audit times must be >= 0");
  if (r.resume_key().size() > 64) return InvalidArgument("resume_key is not an audit key");
  return CheckText("user", r.user(), kMaxShortStringBytes);
}

Status CheckRequestBounds(const v1::UpdateAccountRequest& r) {
  if (!v1::AccountOp_IsValid(r.op()) || r.op() == v1::ACCOUNT_OP_UNSPECIFIED) {
    return InvalidArgument("unknown account operation " + std::to_string(r.op()));
  }
  MUSTER_RETURN_IF_ERROR(CheckText("account", r.name(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("parent", r.parent(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("qos", r.qos(), kMaxExpressionBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("default qos", r.default_qos(), kMaxShortStringBytes));
  if (r.limits().grp_gpus_size() > 64 || r.limits().max_gpus_per_user_size() > 64) {
    return InvalidArgument("at most 64 GPU types per limit");
  }
  MUSTER_RETURN_IF_ERROR(
      CheckTextList("coordinators", r.add_coordinators(), kMaxListEntries, kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckTextList("coordinators", r.remove_coordinators(), kMaxListEntries,
                                       kMaxShortStringBytes));
  return CheckText("description", r.description(), kMaxExpressionBytes);
}

Status CheckRequestBounds(const v1::UpdateQosRequest& r) {
  if (!v1::AccountOp_IsValid(r.op()) || r.op() == v1::ACCOUNT_OP_UNSPECIFIED) {
    return InvalidArgument("unknown qos operation " + std::to_string(r.op()));
  }
  if (r.has_preempt_mode() && !v1::PreemptMode_IsValid(r.preempt_mode())) {
    return InvalidArgument("unknown preempt mode " + std::to_string(r.preempt_mode()));
  }
  if (r.limits().grp_gpus_size() > 64 || r.limits().max_gpus_per_user_size() > 64) {
    return InvalidArgument("at most 64 GPU types per limit");
  }
  MUSTER_RETURN_IF_ERROR(CheckText("qos", r.name(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("preempt", r.preempt(), kMaxExpressionBytes));
  return CheckText("description", r.description(), kMaxExpressionBytes);
}

Status CheckRequestBounds(const v1::UpdateUserRequest& r) {
  if (!v1::AccountOp_IsValid(r.op()) || r.op() == v1::ACCOUNT_OP_UNSPECIFIED) {
    return InvalidArgument("unknown user operation " + std::to_string(r.op()));
  }
  MUSTER_RETURN_IF_ERROR(CheckText("user", r.user(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("qos", r.qos(), kMaxExpressionBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("default qos", r.default_qos(), kMaxShortStringBytes));
  if (r.limits().grp_gpus_size() > 64 || r.limits().max_gpus_per_user_size() > 64) {
    return InvalidArgument("at most 64 GPU types per limit");
  }
  return CheckText("account", r.account(), kMaxShortStringBytes);
}

Status CheckRequestBounds(const v1::ListSharesRequest& r) {
  MUSTER_RETURN_IF_ERROR(
      CheckTextList("accounts", r.accounts(), kMaxListEntries, kMaxShortStringBytes));
  return CheckTextList("users", r.users(), kMaxListEntries, kMaxShortStringBytes);
}

Status CheckRequestBounds(const v1::UpdateReservationRequest& r) {
  if (!v1::AccountOp_IsValid(r.op()) || r.op() == v1::ACCOUNT_OP_UNSPECIFIED) {
    return InvalidArgument("unknown reservation operation " + std::to_string(r.op()));
  }
  MUSTER_RETURN_IF_ERROR(CheckText("reservation", r.name(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("nodes", r.nodes(), kMaxExpressionBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("gpu type", r.gpu_type(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("partition", r.partition(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("users", r.users(), kMaxExpressionBytes * 16));
  MUSTER_RETURN_IF_ERROR(CheckText("accounts", r.accounts(), kMaxExpressionBytes * 16));
  return CheckText("flags", r.flags(), kMaxShortStringBytes);
}

Status CheckRequestBounds(const v1::ListReservationsRequest& r) {
  return CheckText("reservation", r.name(), kMaxShortStringBytes);
}

Status CheckRequestBounds(const v1::UpdatePartitionRequest& r) {
  if (!v1::UpdatePartitionRequest::Action_IsValid(r.action()) ||
      r.action() == v1::UpdatePartitionRequest::ACTION_UNSPECIFIED) {
    return InvalidArgument("unknown partition action " + std::to_string(r.action()));
  }
  MUSTER_RETURN_IF_ERROR(CheckText("partition", r.name(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("nodes", r.nodes(), kMaxExpressionBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("preempt mode", r.preempt_mode(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("allowed users", r.allowed_uids(), kMaxExpressionBytes * 16));
  return CheckText("denied users", r.denied_uids(), kMaxExpressionBytes * 16);
}

}  // namespace muster::rpc
