#include "muster/controller/access.h"

#include <string>

#include "muster/common/check.h"

namespace muster::controller {

const std::vector<PrivilegedAction>& PrivilegedActions() {
  static const std::vector<PrivilegedAction> kRules = {
      {Action::kActOnOthersJobs, false, "acting on another user's job"},
      {Action::kAnyPartition, false, "submitting to a partition that does not admit you"},
      {Action::kAnyReservation, false, "using a reservation that does not list you"},
      {Action::kSetPriority, false, "setting a job's priority (users: Nice=)"},
      {Action::kNegativeNice, false, "a negative nice (raising a priority)"},
      {Action::kRaiseTimeLimit, false, "raising a job's time limit"},
      {Action::kHoldAsAdmin, false, "an admin's hold (JobHeldAdmin)"},
      {Action::kReleaseAdminHold, false, "releasing a job an admin held"},
      {Action::kTopWithoutUserTop, false, "scontrol top (enable_user_top is off)"},
      {Action::kChangeAccounts, false, "changing accounts"},
      {Action::kChangeUsers, false, "changing users' accounts"},
      {Action::kChangeQos, false, "changing QoS"},
      {Action::kManageReservations, false, "managing reservations"},
      {Action::kConfirmNodeDown, false, "confirming nodes down"},
      {Action::kResetStatistics, false, "resetting the statistics (sdiag -r)"},
      {Action::kReconfigure, false, "reconfiguring the controller (scontrol reconfigure)"},
      {Action::kRebootNodes, false, "rebooting nodes"},
      {Action::kManagePartitions, false, "creating, changing and deleting partitions"},
      {Action::kConfigureNodes, false, "setting nodes' features, weights and GRES"},
      {Action::kDrainResumeNodes, true, "draining and resuming nodes"},
      {Action::kSuspendJobs, true, "suspending and resuming jobs"},
      {Action::kReadAudit, true, "reading the audit log"},
      {Action::kSeeHiddenData, true, "seeing what private_data hides"},
      {Action::kSeeOthersStoredBytes, true, "seeing other users' stored scripts"},
  };
  return kRules;
}

namespace {

const PrivilegedAction& RuleOf(Action action) {
  const size_t i = static_cast<size_t>(action);
  MUSTER_CHECK_MSG(i < PrivilegedActions().size() && PrivilegedActions()[i].action == action,
                   "every Action has its rule, in Action's order");
  return PrivilegedActions()[i];
}

// A list of user names or numeric uids names the caller.
bool Names(const std::vector<std::string>& list, const Caller& caller) {
  const std::string uid = std::to_string(caller.uid);
  for (const auto& e : list) {
    if (e == caller.user || e == uid) return true;
  }
  return false;
}

}  // namespace

bool May(const Caller& caller, Action action) {
  return caller.is_admin || (RuleOf(action).operators && caller.is_operator);
}

Status Authorize(const Caller& caller, Action action) {
  if (May(caller, action)) return Status::Ok();
  const PrivilegedAction& rule = RuleOf(action);
  return PermissionDenied(std::string(rule.what) +
                          (rule.operators
                               ? " needs an operator or an admin (listed in operators or admins)"
                               : " needs an admin (root or listed in admins)"));
}

Status AuthorizeCoordinated(const Caller& caller, Action action, bool coordinates,
                            std::string_view where) {
  if (May(caller, action) || coordinates) return Status::Ok();
  return PermissionDenied(std::string(RuleOf(action).what) +
                          " needs an admin (root or listed in admins) or a coordinator of " +
                          std::string(where));
}

bool ActsAsCoordinator(const Caller& caller, Action action) { return !May(caller, action); }

std::string_view RoleOf(const Caller& caller) {
  if (caller.is_admin) return "admin";
  if (caller.is_operator) return "operator";
  return "user";
}

Status CheckJobAccess(const Caller& caller, const v1::JobRecord& job, std::string_view action,
                      const Config& config) {
  if (caller.uid == job.spec().uid() || May(caller, Action::kActOnOthersJobs)) {
    return Status::Ok();
  }
  const std::string whose = SeesOnlyOwnJobs(caller, config)
                                ? " is not yours"  // whose it is is private here
                                : " belongs to " + job.spec().user();
  return PermissionDenied("job " + std::to_string(job.id()) + whose + "; you may " +
                          std::string(action) + " only your own jobs");
}

Status CheckPartitionAccess(const Caller& caller, const v1::JobSpec& spec, const Config& config) {
  if (May(caller, Action::kAnyPartition)) return Status::Ok();
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
  if (May(caller, Action::kSeeHiddenData)) return {};
  return config.private_data;
}

bool SeesOnlyOwnJobs(const Caller& caller, const Config& config) {
  return HiddenFrom(caller, config).jobs;
}

}  // namespace muster::controller
