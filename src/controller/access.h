// Who may act on what: the one place the controller decides it.
#pragma once

#include <string_view>

#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

// A job's owner and the admins may act on it. PERMISSION_DENIED otherwise, naming the owner and
// what the caller tried ("cancel", "run steps in").
Status CheckJobAccess(const Caller& caller, const v1::JobRecord& job, std::string_view action);

// Only admins may. PERMISSION_DENIED saying what needs an admin.
Status CheckAdmin(const Caller& caller, std::string_view action);

// Operators and admins may (nodes: drain, resume). PERMISSION_DENIED otherwise.
Status CheckOperator(const Caller& caller, std::string_view action);

}  // namespace muster::controller
