// Who may act on what: the one place the controller decides it.
#pragma once

#include <string_view>

#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

// A job's owner and the admins may act on it. PERMISSION_DENIED otherwise, naming the owner and
// what the caller tried ("cancel", "run steps in").
Status CheckJobAccess(const Caller& caller, const v1::JobRecord& job, std::string_view action);

// Only admins may. PERMISSION_DENIED saying what needs an admin.
Status CheckAdmin(const Caller& caller, std::string_view action);

// Whether the caller may submit to every partition the (normalised) spec names: in the
// partition's allowed_uids when that list is set, never in its denied_uids. Admins always may.
// PERMISSION_DENIED naming the partition.
Status CheckPartitionAccess(const Caller& caller, const v1::JobSpec& spec, const Config& config);

// What private_data hides from this caller: nothing from admins and operators.
Config::PrivateData HiddenFrom(const Caller& caller, const Config& config);

// private_data = ["jobs"]: users other than admins and operators see only their own jobs.
bool SeesOnlyOwnJobs(const Caller& caller, const Config& config);

// Operators and admins may (nodes: drain, resume). PERMISSION_DENIED otherwise.
Status CheckOperator(const Caller& caller, std::string_view action);

}  // namespace muster::controller
