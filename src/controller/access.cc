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

namespace {
// A list of user names or numeric uids names the caller.
bool Names(const std::vector<std::string>& list, const Caller& caller) {
  const std::string uid = std::to_string(caller.uid);
  for (const auto& e : list) {
    if (e == caller.user || e == uid) return true;
  }
  return false;
}
}  // namespace

Status CheckPartitionAccess(const Caller& caller, const v1::JobSpec& spec, const Config& config) {
  if (caller.is_admin) return Status::Ok();
  for (const std::string& name : spec.partitions()) {
    const PartitionConfig* p = config.FindPartition(name);
    if (!p) continue;  // the spec's own check reports an unknown partition
    if (Names(p->denied_uids, caller) ||
        (!p->allowed_uids.empty() && !Names(p->allowed_uids, caller))) {
      return PermissionDenied("user " + caller.user + " may not use partition '" + name + "'");
    }
  }
  return Status::Ok();
}

Config::PrivateData HiddenFrom(const Caller& caller, const Config& config) {
  if (caller.is_admin || caller.is_operator) return {};
  return config.private_data;
}

bool SeesOnlyOwnJobs(const Caller& caller, const Config& config) {
  return HiddenFrom(caller, config).jobs;
}

Status CheckOperator(const Caller& caller, std::string_view action) {
  if (caller.is_admin || caller.is_operator) return Status::Ok();
  return PermissionDenied(std::string(action) +
                          " needs an operator or an admin (listed in operators or admins)");
}

}  // namespace muster::controller
