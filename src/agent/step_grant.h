// What a step request may ask of this node: no more than the controller granted the job here.
// The request comes from whoever holds the job's credential, so its task count, CPUs and GPUs
// are checked against the job's allocation on this node, not believed.
#pragma once

#include <string>

#include "muster/common/status.h"
#include "muster/v1/agent.pb.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

// PERMISSION_DENIED naming what goes beyond the grant; INVALID_ARGUMENT for counts that do not
// add up (a task id past the step's total).
Status CheckStepWithinGrant(const v1::StepLaunchRequest& req, const v1::LaunchJob& job,
                            const std::string& node);

}  // namespace muster::agent
