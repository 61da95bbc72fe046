// The one handler layer for the user API: a method id and a serialized request in, a status and a
// serialized response out. Every transport (the framed Unix socket today, gRPC later) calls it.
#pragma once

#include <string>

#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"

namespace muster::rpc {

struct ApiReply {
  Status status;
  std::string payload;  // serialized response when status is OK
};

// Strand-confined (it calls the engine). INVALID_ARGUMENT for a payload that does not parse,
// UNIMPLEMENTED for an unknown method.
ApiReply DispatchApi(controller::Engine& engine, const controller::Caller& caller, uint32_t method,
                     const std::string& payload, TimeMs now);

// squeue's reply, a ListJobsResponse, built straight into bytes from the engine's rows (squeue
// asks for 10,000 jobs at a time, and a brief row is mostly bytes cached per job).
std::string EncodeJobList(const controller::Engine& engine, const v1::ListJobsRequest& req);

// Builds the caller from peer credentials: the user name from the passwd database, admin when
// root or listed (by name or uid) in config.admins. Thread-safe.
controller::Caller ResolveCaller(uint32_t uid, uint32_t gid, const Config& config);

}  // namespace muster::rpc
