// Every API request is checked before it reaches the engine: lists no longer than they can
// usefully be, strings bounded and free of NUL bytes, enum values the engine knows. A request
// that fails gets INVALID_ARGUMENT with a message and changes nothing. (A job spec's own bounds
// need the cluster's size: the engine checks them first thing, controller/spec_bounds.h.)
#pragma once

#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"

namespace muster::rpc {

Status CheckRequestBounds(const v1::ListJobsRequest& r);
Status CheckRequestBounds(const v1::ListNodesRequest& r);
Status CheckRequestBounds(const v1::UpdateNodeRequest& r);
Status CheckRequestBounds(const v1::UpdateJobRequest& r);
Status CheckRequestBounds(const v1::CancelJobRequest& r);
Status CheckRequestBounds(const v1::CreateStepRequest& r);
Status CheckRequestBounds(const v1::ListAccountingRequest& r);
Status CheckRequestBounds(const v1::ListAuditRequest& r);
Status CheckRequestBounds(const v1::UpdateAccountRequest& r);
Status CheckRequestBounds(const v1::UpdateQosRequest& r);
Status CheckRequestBounds(const v1::UpdateUserRequest& r);
Status CheckRequestBounds(const v1::ListSharesRequest& r);
Status CheckRequestBounds(const v1::UpdateReservationRequest& r);
Status CheckRequestBounds(const v1::ListReservationsRequest& r);
Status CheckRequestBounds(const v1::UpdatePartitionRequest& r);
// Requests with nothing of variable size.
template <typename Request>
Status CheckRequestBounds(const Request&) {
  return Status::Ok();
}

}  // namespace muster::rpc
