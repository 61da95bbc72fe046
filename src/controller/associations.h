// A user's associations (Slurm's user associations): the user's own settings in one account,
// and how what the association leaves unset comes down the account tree. The rules:
//   - QoS: the association's list, else the nearest account's up the tree that names one (none:
//     any QoS); its default likewise, then the list's first, then "normal".
//   - Max* limits (MaxJobs, MaxSubmitJobs, MaxTRES per job, MaxWall) set on the association
//     replace the ones of its accounts for that user's jobs there: each account's is otherwise
//     inherited and enforced.
//   - Grp* limits of the association bound the user's jobs in that account together; the
//     accounts' Grp* limits bound everyone's, as before.
//
// Pure functions of the records; the account tree is AccountManager's.
#pragma once

#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/v1/common.pb.h"

namespace muster::controller {

// An edit of a QoS list: "a,b" replaces `base`; "+a,-b" (every item signed) adds to and removes
// from it, keeping its order (refused on an empty `base`, which means any QoS); "" empties it.
// At most 64 names.
Result<std::vector<std::string>> EditQosList(const std::string& edit,
                                             std::vector<std::string> base);

// The Max* limits `own` sets, cleared from `inherited`: what of an account's limits still
// applies to a user whose association sets its own.
void ClearOverridden(const v1::UsageLimits& own, v1::UsageLimits* inherited);
// Whether `own` sets any Max* limit that ClearOverridden would clear.
bool OverridesAny(const v1::UsageLimits& own);

// The tightest of each Max* limit of `l` and `bound`, into `bound` (a lineage's, account by
// account).
void TightenMax(const v1::UsageLimits& l, v1::UsageLimits* bound);
// For a coordinator's change: the Max* limits `own` sets that are looser than `bound` (the
// tightest of the accounts above), in Slurm's words ("MaxJobs=20 (the accounts allow 10)").
// Empty: none.
std::string LoosenedLimits(const v1::UsageLimits& own, const v1::UsageLimits& bound);

// The limits an association may set: no per-user GPU limits (MaxTRESPerUser is a QoS's) and no
// stored-bytes limits (an account's MaxStoredMBPerUser bounds each user). INVALID_ARGUMENT.
Status CheckAssociationLimits(const v1::UsageLimits& patch);

}  // namespace muster::controller
