// The sharing tree: accounts under "root" and the accounts each user may charge (associations),
// from the config file and from admins' commands (persisted in the store). The config's accounts
// and associations are applied at every start and changed only there; live ones are added,
// changed and removed with `muster account` / `muster user` (sacctmgr).
//
// With no account defined anywhere, accounts are not enforced: a job records whatever -A names.
// Once one exists, every job charges an account its user is associated with (-A, or the user's
// default), as Slurm's AccountingStorageEnforce=associations.
//
// Strand-confined.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine_context.h"
#include "muster/controller/engine.h"
#include "muster/store/state_store.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {

class AccountManager {
 public:
  explicit AccountManager(EngineContext& ctx) : ctx_(ctx) {}

  // At recovery: the stored records with the config applied over them. What that changes in the
  // store (the config's accounts, associations it no longer names, orphans moved under root) is
  // added to `m`; problems are logged.
  void Restore(const std::vector<v1::AccountRecord>& accounts,
               const std::vector<v1::UserRecord>& users, store::Mutation& m);

  bool enforced() const { return !accounts_.empty(); }
  bool Exists(const std::string& account) const {
    return account == "root" || accounts_.count(account);
  }

  // The account a job of `user` charges: `requested` when the user is associated with it, else
  // the user's default. INVALID_ARGUMENT (naming the user's accounts) otherwise.
  Result<std::string> ResolveForJob(const std::string& user, const std::string& requested) const;

  // Admins only. `in_use` says whether unfinished jobs charge an account (one is not removed
  // while they do).
  // The QoS a job charging `account` runs under: `requested` when the account (or, when it names
  // none, its nearest ancestor that does) allows it, else the default up the tree ("normal" at
  // the top). INVALID_ARGUMENT naming the allowed QoS otherwise.
  // A user's association with the account may name QoS and a default of its own, which then
  // come first.
  Result<std::string> ResolveQos(const std::string& user, const std::string& account,
                                 const std::string& requested) const;
  // The QoS an account's jobs may use: its own list or its nearest ancestor's (empty: any).
  std::vector<std::string> AllowedQos(const std::string& account) const;
  // The user's own settings in `account` (nullptr: none).
  const v1::Association* AssociationOf(const std::string& user, const std::string& account) const;
  // Whether any association sets a limit (a pass pays for limits only when something does).
  bool AnyAssociationLimit() const { return association_limits_ > 0; }
  // Whether `user` coordinates `account` or an account above it.
  bool Coordinates(const std::string& user, const std::string& account) const;
  // The tightest of each Max* limit of `account` and the accounts above it: what a
  // coordinator's change of a user there may not loosen.
  v1::UsageLimits MaxBound(const std::string& account) const;
  // Whether a QoS name exists (for account changes that name QoS).
  void SetQosExists(std::function<bool(const std::string&)> fn) { qos_exists_ = std::move(fn); }

  Status UpdateAccount(const Caller& caller, const v1::UpdateAccountRequest& req,
                       const std::function<bool(const std::string&)>& in_use);
  Status UpdateUser(const Caller& caller, const v1::UpdateUserRequest& req);
  v1::ListAccountsResponse List() const;
  // The accounts `user` is associated with and every account above them, "root" included: what
  // private_data = ["accounts"] or ["usage"] leaves a user to see.
  std::set<std::string> AccountsAbove(const std::string& user) const;
  // AccountsAbove and the accounts `user` coordinates with everything under them: what
  // private_data = ["accounts"] leaves a coordinator to see (Slurm's rule).
  std::set<std::string> AccountsVisibleTo(const std::string& user) const;
  const std::map<std::string, v1::AccountRecord>& accounts() const { return accounts_; }
  const std::map<std::string, v1::UserRecord>& users() const { return users_; }

 private:
  // Whether `account` lies under `ancestor` (or is it).
  bool IsUnder(const std::string& account, const std::string& ancestor) const;
  Status CommitUser(const v1::UserRecord& user);
  // Applies an update's association settings to `as` (of `user` in `account`), bounded as a
  // coordinator's when `coordinator`.
  Status PatchAssociation(const v1::UpdateUserRequest& req, const std::string& account,
                          bool coordinator, v1::Association* as) const;
  // Who may change the account `req` names (and its new parent): admins, or coordinators above.
  Status AuthorizeAccount(const Caller& caller, const v1::UpdateAccountRequest& req) const;
  void CountAssociationLimits();

  EngineContext& ctx_;
  std::map<std::string, v1::AccountRecord> accounts_;  // "root" is implicit
  std::map<std::string, v1::UserRecord> users_;
  std::function<bool(const std::string&)> qos_exists_;
  size_t association_limits_ = 0;  // associations that set a limit
};

}  // namespace muster::controller
