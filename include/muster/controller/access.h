// Who may act on what: the one place the controller decides it. Every privileged action has a
// name (Action) and a rule (admins, or operators and admins); the permissions tables of
// docs/admin-guide.md are tested against PrivilegedActions(). Owner-or-admin (a job), partition
// admission and what private_data hides are decided here too; no other file reads
// Caller::is_admin or is_operator.
#pragma once

#include <string_view>
#include <vector>

#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

enum class Action {
  // Admins (root and those listed in `admins`).
  kActOnOthersJobs,     // cancel, hold, release, requeue, update, run steps in another's job
  kAnyPartition,        // submit where allowed_uids/denied_uids do not admit the caller
  kAnyReservation,      // use a reservation that does not list the caller or their account
  kSetPriority,         // scontrol update Priority=
  kNegativeNice,        // --nice < 0, Nice=<0: raise a priority
  kRaiseTimeLimit,      // TimeLimit= above the job's
  kHoldAsAdmin,         // a hold of another's job is an admin's hold (JobHeldAdmin)
  kReleaseAdminHold,    // release a job an admin held
  kTopWithoutUserTop,   // scontrol top while enable_user_top is off
  kChangeAccounts,      // sacctmgr add/modify/remove account
  kChangeUsers,         // sacctmgr add/modify/remove user
  kChangeQos,           // sacctmgr add/modify/remove qos
  kManageReservations,  // scontrol create/update/delete reservation
  kConfirmNodeDown,     // scontrol update State=DOWN of a node that may still run jobs
  kResetStatistics,     // sdiag -r
  kReconfigure,         // scontrol reconfigure: read the config file again
  kRebootNodes,         // scontrol reboot / cancel_reboot
  kManagePartitions,    // scontrol create|update|delete partition
  kConfigureNodes,      // scontrol update NodeName= Features=/Weight=/Gres=
  // Operators (listed in `operators`) and admins.
  kDrainResumeNodes,      // scontrol update State=DRAIN/RESUME
  kSuspendJobs,           // scontrol suspend/resume
  kReadAudit,             // muster audit
  kSeeHiddenData,         // what private_data hides: other users' jobs, usage, accounts, users
  kSeeOthersStoredBytes,  // muster diag's biggest users of the store
};

struct PrivilegedAction {
  Action action;
  bool operators;    // operators may too (else admins only)
  const char* what;  // "setting a job's priority": the refusal says it needs whom
};
// Every privileged action and who may take it, in Action's order.
const std::vector<PrivilegedAction>& PrivilegedActions();

// Whether the caller may; and the refusal (PERMISSION_DENIED saying what needs whom) if not.
bool May(const Caller& caller, Action action);
Status Authorize(const Caller& caller, Action action);
// kChangeAccounts and kChangeUsers, which an account's coordinators may take too for what lies
// under it: `coordinates` says whether the caller coordinates what the change touches (the
// account tree answers that); `where` names whom it would need ("account physics or one above").
Status AuthorizeCoordinated(const Caller& caller, Action action, bool coordinates,
                            std::string_view where);
// Whether the caller acts as a coordinator, not an admin: then what it sets is bounded by what
// the accounts it coordinates allow (no limit loosened, no QoS added beyond theirs).
bool ActsAsCoordinator(const Caller& caller, Action action);
// "admin", "operator" or "user": the role the audit log records.
std::string_view RoleOf(const Caller& caller);

// A job's owner and the admins may act on it. PERMISSION_DENIED otherwise, saying what the caller
// tried ("cancel", "run steps in") and naming the owner, unless private_data hides others' jobs
// from this caller.
Status CheckJobAccess(const Caller& caller, const v1::JobRecord& job, std::string_view action,
                      const Config& config);

// Whether the caller may submit to every partition the (normalised) spec names: in the
// partition's allowed_uids when that list is set, never in its denied_uids. Admins always may.
// PERMISSION_DENIED naming the partition.
Status CheckPartitionAccess(const Caller& caller, const v1::JobSpec& spec, const Config& config);

// What private_data hides from this caller: nothing from admins and operators.
Config::PrivateData HiddenFrom(const Caller& caller, const Config& config);

// private_data = ["jobs"]: users other than admins and operators see only their own jobs.
bool SeesOnlyOwnJobs(const Caller& caller, const Config& config);

}  // namespace muster::controller
