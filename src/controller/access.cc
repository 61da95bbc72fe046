#include "access.h"

#include <string>

namespace muster::controller {

Status CheckJobAccess(const Caller& caller, const v1::JobRecord& job, std::string_view action) {
  if (caller.is_admin || caller.uid == job.spec().uid()) return Status::Ok();
  return PermissionDenied("job " + std::to_string(job.id()) + " belongs to " + job.spec().user() +
                          "; you may " + std::string(action) + " only your own jobs");
}

Status CheckAdmin(const Caller& caller, std::string_view action) {
  if (caller.is_admin) return Status::Ok();
  return PermissionDenied(std::string(action) + " needs an admin (root or listed in admins)");
}

Status CheckOperator(const Caller& caller, std::string_view action) {
  if (caller.is_admin || caller.is_operator) return Status::Ok();
  return PermissionDenied(std::string(action) +
                          " needs an operator or an admin (listed in operators or admins)");
}

}  // namespace muster::controller
