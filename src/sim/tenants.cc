#include "muster/sim/tenants.h"

#include <algorithm>
#include <map>
#include <set>

namespace muster::sim {

Result<QuotaMode> ParseQuotaMode(const std::string& text) {
  if (text == "strict") return QuotaMode::kStrict;
  if (text == "lend") return QuotaMode::kLend;
  return InvalidArgument(
      "quotas are 'strict' (each account held to its guarantee) or 'lend' "
      "(idle guaranteed GPUs lent within one cohort, taken back by "
      "preemption), not '" +
      text + "'");
}

Result<Config> AddTenants(Config config, std::vector<SimJob>& jobs, const TenantOptions& options) {
  if (!config.accounts.empty()) {
    return InvalidArgument(
        "the config names accounts already: give tenants there, or drop them "
        "to have the trace's accounts made with equal shares");
  }
  std::map<std::string, uint64_t> gpus_by_type;
  for (const NodeConfig& n : config.nodes) {
    if (n.gpus > 0) gpus_by_type[n.gpu_type] += n.gpus;
  }
  if (options.quotas != QuotaMode::kNone && gpus_by_type.empty()) {
    return InvalidArgument("quotas are GPU quotas: the cluster has no GPUs");
  }
  // Fair share charges what [billing] prices, GPUs only by default: on a cluster without any,
  // charge CPUs (as Slurm bills by default) or every account's usage would stay 0.
  if (gpus_by_type.empty() && config.billing.cpu == 0) config.billing.cpu = 1;
  // Weight by what each account used in the trace, the heaviest first (ties by name).
  std::map<std::string, double> weight;
  for (const SimJob& j : jobs) {
    const std::string& a = j.account.empty() ? std::string(kOthersAccount) : j.account;
    weight[a] += static_cast<double>(std::max<uint32_t>(j.gpus > 0 ? j.gpus : j.procs, 1)) *
                 static_cast<double>(std::max<int64_t>(j.run_s, 0));
  }
  std::vector<std::pair<std::string, double>> ranked(weight.begin(), weight.end());
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  // All of them when they fit in max_accounts; else the heaviest max_accounts - 1 and "others".
  const size_t limit = options.max_accounts == 0 || weight.size() <= options.max_accounts
                           ? weight.size()
                           : options.max_accounts - 1;
  std::set<std::string> kept;
  for (const auto& [name, w] : ranked) {
    if (name == kOthersAccount) continue;
    if (kept.size() >= limit) break;
    if (name == "root") {
      return InvalidArgument(
          "the trace's account 'root' is the name of the account tree's root: rename it in the "
          "trace");
    }
    if (!IsValidAccountName(name)) {
      return InvalidArgument("the trace's account '" + name +
                             "' is not a valid account name (letters, digits, '.', '_', '-')");
    }
    kept.insert(name);
  }
  // The users of each account, in the order their first jobs came.
  std::map<std::string, std::vector<std::string>> users;
  std::set<std::pair<std::string, std::string>> seen;
  for (SimJob& j : jobs) {
    if (!kept.count(j.account)) j.account = kOthersAccount;
    const std::string user = j.user.empty() ? "sim" : j.user;
    if (!IsValidAccountName(user)) {
      return InvalidArgument("the trace's user '" + user + "' is not a valid user name");
    }
    if (seen.emplace(j.account, user).second) users[j.account].push_back(user);
  }
  // Every type's GPUs split evenly; each type's remainder one each to the next accounts by name,
  // the first type's from the first account, the next type's from where that one stopped.
  const size_t n = users.size();
  if (options.quotas != QuotaMode::kNone) {
    for (const auto& [type, total] : gpus_by_type) {
      if (total < n) {
        return InvalidArgument("the cluster's " + std::to_string(total) + " " + type +
                               " GPUs cannot give each of " + std::to_string(n) +
                               " accounts a quota of one: fold them with --tenants equal:K");
      }
    }
  }
  size_t index = 0;
  for (auto& [name, members] : users) {
    AccountConfig a;
    a.name = name;
    a.shares = 1;
    a.description = "from the trace (muster-sim --tenants)";
    a.users = std::move(members);
    if (options.quotas != QuotaMode::kNone) {
      size_t first = 0;  // the account the current type's remainder starts at
      for (const auto& [type, total] : gpus_by_type) {
        const size_t extra = total % n;
        const bool gets_one = (index + n - first) % n < extra;
        QuotaConfig q;
        q.guaranteed = static_cast<uint32_t>(total / n + (gets_one ? 1 : 0));
        a.quotas[type] = q;
        first = (first + extra) % n;
      }
      if (options.quotas == QuotaMode::kLend) a.cohort = "tenants";
    }
    config.accounts.push_back(std::move(a));
    ++index;
  }
  return config;
}

}  // namespace muster::sim
