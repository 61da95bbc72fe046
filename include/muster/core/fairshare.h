// Hierarchical fair-share in the manner of Slurm's Fair Tree: siblings are compared first, by
// their share of the siblings' shares over their share of the siblings' usage (the level
// fair-share); the tree is then walked depth first, higher level fair-share first, and each user
// association gets a rank in walking order. A job's fair-share factor is its association's rank
// over the number of associations: 1.0 for the most under-served, near 0 for the most
// over-served. Pure: accounts and decayed usage in, factors out.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace muster::core {

struct FairShareAccount {
  std::string name;
  std::string parent;  // "root" for a top-level account
  uint32_t shares = 1;
};

// A user's association with an account, with its usage (billing units, decayed) and its weight
// among the account's users (1 each unless an admin gives it Fairshare=, as Slurm's default).
struct FairShareAssociation {
  std::string account;
  std::string user;
  double usage = 0;
  uint32_t shares = 1;
};

// One line of the tree (an account, or a user under an account): what sshare shows.
struct FairShareRow {
  std::string account;
  std::string user;  // empty for an account's own line
  int depth = 0;     // 0 for root's children
  uint32_t raw_shares = 1;
  double norm_shares = 0;  // shares over the siblings' shares
  double raw_usage = 0;    // its own usage, or its subtree's for an account
  double norm_usage = 0;   // usage over the siblings' usage (0 when they have none)
  double level_fs = 0;     // norm_shares / norm_usage; infinity when it has used nothing
  double factor = 0;       // users only: the fair-share factor
};

struct FairShareResult {
  std::vector<FairShareRow> rows;  // walking order: higher level fair-share first
  std::map<std::pair<std::string, std::string>, double> factor;  // (account, user) -> factor
};

// Accounts whose parent is missing are treated as top-level; associations of unknown accounts
// are left out (factor 0).
FairShareResult ComputeFairTree(const std::vector<FairShareAccount>& accounts,
                                const std::vector<FairShareAssociation>& associations);

// Dominant resource fairness, the alternative ordering: an association's dominant share is the
// largest fraction of any one resource (each GPU type, CPUs, memory; `capacity` has the
// cluster's totals by name) that its running jobs hold, over its weight: its account's share of
// the tree (norm shares multiplied down from the top) split among the account's users by their
// shares.
// Associations are ranked by it, lowest first (ties by name), and the factor is the rank as for
// Fair Tree. Rows: one per association, norm_shares its weight, raw_usage its dominant share.
struct DrfAssociation {
  std::string account;
  std::string user;
  std::map<std::string, double> held;  // resource name -> amount held now
  uint32_t shares = 1;                 // among the account's users
};
FairShareResult ComputeDrf(const std::vector<FairShareAccount>& accounts,
                           const std::vector<DrfAssociation>& associations,
                           const std::map<std::string, double>& capacity);

}  // namespace muster::core
