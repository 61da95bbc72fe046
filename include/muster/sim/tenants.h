// Tenants for a replay: the trace's own accounts (SWF groups, a CSV's or sacct's account column,
// openb's QoS classes) made into the config's [[accounts]] with equal shares, so that fair share
// orders the queue as it would on a site whose teams share the cluster equally; and, on a GPU
// cluster, equal GPU quotas that either hold each team to its guarantee (strict) or lend idle
// guaranteed GPUs within one cohort and take them back by preemption (lend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/sim/trace.h"

namespace muster::sim {

enum class QuotaMode { kNone, kStrict, kLend };

struct TenantOptions {
  // Keep the heaviest max_accounts - 1 accounts (by processors or GPUs x run time over the jobs
  // given) under their own names and put the rest together in "others"; 0: every account.
  uint32_t max_accounts = 0;
  QuotaMode quotas = QuotaMode::kNone;
};

// The name of the account that holds jobs with no account, and the accounts folded together (a
// trace's own account of that name joins them).
inline constexpr const char* kOthersAccount = "others";

// Rewrites the jobs' accounts (folded as above; a job with none goes to "others") and returns the
// config with one top-level account per remaining name, equal shares, each naming the users whose
// jobs charge it. With quotas, every GPU type of the cluster is split evenly: each account is
// guaranteed its part (each type's remainder one GPU each to the next accounts by name, taking
// turns across types); kLend puts them all in one cohort, kStrict in none. On a cluster without
// GPUs whose [billing] prices no CPU, usage is billed per CPU (fair share would see none
// otherwise). INVALID_ARGUMENT when the config names accounts already, when a name in the trace
// is not a valid account or user name (or is "root"), for quotas on a cluster without GPUs, and
// for quotas of a type with fewer GPUs than there are accounts.
Result<Config> AddTenants(Config config, std::vector<SimJob>& jobs, const TenantOptions& options);

// "strict" / "lend" as the CLI takes them.
Result<QuotaMode> ParseQuotaMode(const std::string& text);

}  // namespace muster::sim
