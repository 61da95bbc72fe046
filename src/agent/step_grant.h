// Whether a step request may start here: its credential must be a grant the controller sealed
// for this node, this job, its user and run, and this step, not yet expired; the request must ask
// for what the grant says; and that must lie within the job's allocation here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "muster/common/status.h"
#include "muster/v1/agent.pb.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

// Opens the request's credential with this node's `step_key` and checks it against the request,
// the job and `now_ms` (wall clock): PERMISSION_DENIED naming what does not fit; UNAVAILABLE
// before the node has registered (no key yet).
// `instance` is this agent process's: a grant made for an earlier one is refused (after a
// restart the agent no longer knows which steps its grants started).
Result<v1::StepGrant> CheckStepCredential(const v1::StepLaunchRequest& req,
                                          const v1::LaunchJob& job, const std::string& node,
                                          std::string_view step_key, int64_t now_ms,
                                          std::string_view instance);

// The request's task count, CPUs and GPUs against the job's allocation on this node (the
// controller's grant should never exceed it; this holds even if it did).

// PERMISSION_DENIED naming what goes beyond the grant; INVALID_ARGUMENT for counts that do not
// add up (a task id past the step's total).
Status CheckStepWithinGrant(const v1::StepLaunchRequest& req, const v1::LaunchJob& job,
                            const std::string& node);

}  // namespace muster::agent
