#include "account_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "associations.h"
#include "limit_tracker.h"
#include "live_records.h"
#include "muster/common/strings.h"
#include "muster/controller/access.h"
#include "name_list.h"

namespace muster::controller {
namespace {

// An update's quotas replace the account's per GPU type (guaranteed kUnlimited removes one);
// the result must keep lending_limit <= guaranteed <= max.
Status PatchQuotas(const v1::UpdateAccountRequest& req, v1::AccountRecord* a) {
  if (req.quotas_size() > 64) return InvalidArgument("at most 64 GPU types per update");
  for (const auto& [type, q] : req.quotas()) {
    if (!IsValidAccountName(type)) {
      return InvalidArgument("bad GPU type '" + type.substr(0, 64) + "' in a quota");
    }
    if (q.guaranteed() == kUnlimited) {
      a->mutable_quotas()->erase(type);
      continue;
    }
    constexpr uint32_t kMost = 1'000'000'000;
    if (q.guaranteed() > kMost || (q.has_max() && q.max() > kMost) ||
        (q.has_lending_limit() && q.lending_limit() > kMost)) {
      return InvalidArgument("quota " + type + ": at most 1000000000 GPUs");
    }
    if (q.has_max() && q.max() < q.guaranteed()) {
      return InvalidArgument("quota " + type + ": max " + std::to_string(q.max()) +
                             " is below guaranteed " + std::to_string(q.guaranteed()));
    }
    if (q.has_lending_limit() && q.lending_limit() > q.guaranteed()) {
      return InvalidArgument("quota " + type + ": lending_limit " +
                             std::to_string(q.lending_limit()) + " is above guaranteed " +
                             std::to_string(q.guaranteed()));
    }
    (*a->mutable_quotas())[type] = q;
  }
  if (req.has_cohort()) a->set_cohort(req.cohort());
  return Status::Ok();
}

}  // namespace

void AccountManager::Restore(const std::vector<v1::AccountRecord>& accounts,
                             const std::vector<v1::UserRecord>& users, store::Mutation& m) {
  const Config& config = ctx_.config();
  std::set<std::string> configured;
  for (const AccountConfig& a : config.accounts) configured.insert(a.name);
  for (const v1::AccountRecord& a : accounts) {
    if (a.from_config() && !configured.count(a.name())) {
      spdlog::info("account {} is no longer in the config; removed", a.name());
      m.DeleteAccount(a.name());
      continue;
    }
    if (!a.from_config() && configured.count(a.name())) continue;  // the config's wins
    accounts_[a.name()] = a;
  }
  for (const AccountConfig& a : config.accounts) {
    v1::AccountRecord r;
    r.set_name(a.name);
    r.set_parent(a.parent);
    r.set_shares(a.shares);
    r.set_description(a.description);
    *r.mutable_limits() = ToLimitsRecord(a.limits);
    for (const std::string& q : a.qos) r.add_qos(q);
    r.set_default_qos(a.default_qos);
    for (const auto& [type, q] : a.quotas) {
      v1::GpuQuota& g = (*r.mutable_quotas())[type];
      g.set_guaranteed(q.guaranteed);
      if (q.max) g.set_max(*q.max);
      if (q.lending_limit) g.set_lending_limit(*q.lending_limit);
    }
    r.set_cohort(a.cohort);
    for (const std::string& c : a.coordinators) r.add_coordinators(c);
    r.set_from_config(true);
    if (!accounts_.count(a.name) ||
        accounts_[a.name].SerializeAsString() != r.SerializeAsString()) {
      m.PutAccount(r);
    }
    accounts_[a.name] = std::move(r);
  }
  // A live account whose parent went away with the config hangs under root instead.
  for (auto& [name, a] : accounts_) {
    if (!Exists(a.parent()) || IsUnder(a.parent(), name)) {
      spdlog::warn("account {}: parent {} is gone; it now hangs under root", name, a.parent());
      a.set_parent("root");
      m.PutAccount(a);
    }
  }
  // Associations: the config's are derived afresh; live ones stay while their account does.
  for (v1::UserRecord u : users) {
    for (const std::string& c : u.config_accounts()) Remove(u.mutable_accounts(), c);
    u.clear_config_accounts();
    for (int i = u.accounts_size() - 1; i >= 0; --i) {
      if (!accounts_.count(u.accounts(i))) u.mutable_accounts()->DeleteSubrange(i, 1);
    }
    users_[u.name()] = std::move(u);
  }
  for (const AccountConfig& a : config.accounts) {
    for (const std::string& name : a.users) {
      v1::UserRecord& u = users_[name];
      u.set_name(name);
      if (!Contains(u.config_accounts(), a.name)) u.add_config_accounts(a.name);
      if (!Contains(u.accounts(), a.name)) u.add_accounts(a.name);
    }
  }
  for (auto it = users_.begin(); it != users_.end();) {
    v1::UserRecord& u = it->second;
    if (!u.default_account().empty() && !Contains(u.accounts(), u.default_account())) {
      u.clear_default_account();
    }
    // An association lasts as long as the user is in its account.
    for (auto as = u.mutable_associations()->begin(); as != u.mutable_associations()->end();) {
      as = Contains(u.accounts(), as->first) ? std::next(as) : u.mutable_associations()->erase(as);
    }
    if (u.accounts().empty()) {
      m.DeleteUser(it->first);
      it = users_.erase(it);
      continue;
    }
    m.PutUser(u);
    ++it;
  }
  CountAssociationLimits();
}

void AccountManager::CountAssociationLimits() {
  association_limits_ = 0;
  for (const auto& [name, u] : users_) {
    for (const auto& [account, as] : u.associations()) {
      if (AnyLimit(as.limits())) ++association_limits_;
    }
  }
}

const v1::Association* AccountManager::AssociationOf(const std::string& user,
                                                     const std::string& account) const {
  auto u = users_.find(user);
  if (u == users_.end()) return nullptr;
  auto as = u->second.associations().find(account);
  return as == u->second.associations().end() ? nullptr : &as->second;
}

bool AccountManager::Coordinates(const std::string& user, const std::string& account) const {
  std::string at = account;
  for (size_t hops = 0; hops <= accounts_.size(); ++hops) {
    auto it = accounts_.find(at);
    if (it == accounts_.end()) return false;
    if (Contains(it->second.coordinators(), user)) return true;
    at = it->second.parent();
  }
  return false;
}

v1::UsageLimits AccountManager::MaxBound(const std::string& account) const {
  v1::UsageLimits bound;
  std::string at = account;
  for (size_t hops = 0; hops <= accounts_.size(); ++hops) {
    auto it = accounts_.find(at);
    if (it == accounts_.end()) break;
    TightenMax(it->second.limits(), &bound);
    at = it->second.parent();
  }
  return bound;
}

std::vector<std::string> AccountManager::AllowedQos(const std::string& account) const {
  std::string at = account;
  for (size_t hops = 0; hops <= accounts_.size(); ++hops) {
    auto it = accounts_.find(at);
    if (it == accounts_.end()) break;
    if (it->second.qos_size() > 0) return {it->second.qos().begin(), it->second.qos().end()};
    at = it->second.parent();
  }
  return {};
}

bool AccountManager::IsUnder(const std::string& account, const std::string& ancestor) const {
  std::string at = account;
  for (size_t hops = 0; hops <= accounts_.size() + 1; ++hops) {
    if (at == ancestor) return true;
    auto it = accounts_.find(at);
    if (it == accounts_.end()) return false;
    at = it->second.parent();
  }
  return true;  // a cycle: treat as under, so nothing builds on it
}

std::set<std::string> AccountManager::AccountsAbove(const std::string& user) const {
  std::set<std::string> out = {"root"};
  auto u = users_.find(user);
  if (u == users_.end()) return out;
  for (const std::string& account : u->second.accounts()) {
    std::string at = account;
    // Bounded by the tree's size: a cycle (refused when made) cannot loop here.
    for (size_t hops = 0; hops <= accounts_.size() && at != "root"; ++hops) {
      auto it = accounts_.find(at);
      if (it == accounts_.end()) break;
      out.insert(at);
      at = it->second.parent();
    }
  }
  return out;
}

std::set<std::string> AccountManager::AccountsVisibleTo(const std::string& user) const {
  std::set<std::string> out = AccountsAbove(user);
  for (const auto& [name, a] : accounts_) {
    if (Coordinates(user, name)) out.insert(name);
  }
  return out;
}

Result<std::string> AccountManager::ResolveForJob(const std::string& user,
                                                  const std::string& requested) const {
  if (!enforced()) return requested;
  auto it = users_.find(user);
  // root is always in the root account, as in Slurm's default associations.
  if (user == "root" && (requested.empty() || requested == "root") &&
      (it == users_.end() || requested == "root")) {
    return std::string("root");
  }
  if (it == users_.end()) {
    return InvalidArgument("user " + user +
                           " is in no account, so it cannot run jobs here; an admin adds it with "
                           "`muster user add " +
                           user + " --account NAME`");
  }
  const v1::UserRecord& u = it->second;
  if (requested.empty()) {
    return u.default_account().empty() ? u.accounts(0) : u.default_account();
  }
  if (Contains(u.accounts(), requested)) return requested;
  std::vector<std::string> mine(u.accounts().begin(), u.accounts().end());
  return InvalidArgument("invalid account: user " + user + " is not in account '" + requested +
                         "' (its accounts: " + Join(mine, ", ") + ")");
}

Result<std::string> AccountManager::ResolveQos(const std::string& user, const std::string& account,
                                               const std::string& requested) const {
  // The association's list, else the nearest account's (up the tree) that names one; the
  // default likewise, kept only where that list allows it.
  const v1::Association* as = AssociationOf(user, account);
  std::vector<std::string> allowed;
  if (as && as->qos_size() > 0) allowed.assign(as->qos().begin(), as->qos().end());
  const bool own_list = !allowed.empty();
  if (!own_list) allowed = AllowedQos(account);
  std::string fallback = as ? as->default_qos() : "";
  std::string at = account;
  for (size_t hops = 0; fallback.empty() && hops <= accounts_.size(); ++hops) {
    auto it = accounts_.find(at);
    if (it == accounts_.end()) break;
    fallback = it->second.default_qos();
    at = it->second.parent();
  }
  auto allows = [&](const std::string& q) {
    return allowed.empty() || std::find(allowed.begin(), allowed.end(), q) != allowed.end();
  };
  if (fallback.empty() || !allows(fallback)) fallback = allowed.empty() ? "normal" : allowed[0];
  const std::string& qos = requested.empty() ? fallback : requested;
  if (!allows(qos)) {
    return InvalidArgument(
        "invalid qos: " +
        (own_list ? "user " + user + " in account " + account : "account " + account) +
        " may not use qos '" + qos + "' (its QoS: " + Join(allowed, ", ") + ")");
  }
  return qos;
}

Status AccountManager::AuthorizeAccount(const Caller& caller,
                                        const v1::UpdateAccountRequest& req) const {
  if (!ActsAsCoordinator(caller, Action::kChangeAccounts)) return Status::Ok();
  // Coordinators manage what lies strictly under the accounts they coordinate, and never the
  // things that reach past them: coordinators, GPU quotas, cohorts.
  if (req.add_coordinators_size() > 0 || req.remove_coordinators_size() > 0 ||
      req.quotas_size() > 0 || req.has_cohort()) {
    return Authorize(caller, Action::kChangeAccounts);
  }
  auto it = accounts_.find(req.name());
  std::string above = req.op() == v1::ACCOUNT_OP_ADD
                          ? (req.has_parent() ? req.parent() : "root")
                          : (it == accounts_.end() ? "root" : it->second.parent());
  MUSTER_RETURN_IF_ERROR(AuthorizeCoordinated(caller, Action::kChangeAccounts,
                                              Coordinates(caller.user, above),
                                              "account " + above + " (or one above it)"));
  if (req.op() == v1::ACCOUNT_OP_MODIFY && req.has_parent()) {
    MUSTER_RETURN_IF_ERROR(AuthorizeCoordinated(caller, Action::kChangeAccounts,
                                                Coordinates(caller.user, req.parent()),
                                                "account " + req.parent() + " (or one above it)"));
  }
  return Status::Ok();
}

Status AccountManager::UpdateAccount(const Caller& caller, const v1::UpdateAccountRequest& req,
                                     const std::function<bool(const std::string&)>& in_use) {
  const std::string& name = req.name();
  if (!IsValidAccountName(name) || name == "root") {
    MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kChangeAccounts));
    return InvalidArgument("bad account name '" + name.substr(0, 64) +
                           "': letters, digits, '.', '_' and '-' (and not root)");
  }
  MUSTER_RETURN_IF_ERROR(AuthorizeAccount(caller, req));
  if (req.add_coordinators_size() + req.remove_coordinators_size() > 64) {
    return InvalidArgument("at most 64 coordinators per update");
  }
  for (const auto* list : {&req.add_coordinators(), &req.remove_coordinators()}) {
    for (const std::string& c : *list) {
      if (!IsValidAccountName(c)) {
        return InvalidArgument("bad coordinator name '" + c.substr(0, 64) + "'");
      }
    }
  }
  if (req.has_description() && req.description().size() > 1024) {
    return InvalidArgument("an account's description is at most 1024 bytes");
  }
  if (req.has_shares() && (req.shares() == 0 || req.shares() > 1'000'000)) {
    return InvalidArgument("shares must be between 1 and 1000000");
  }
  if (req.has_cohort() && !req.cohort().empty() && !IsValidAccountName(req.cohort())) {
    return InvalidArgument("bad cohort name '" + req.cohort().substr(0, 64) +
                           "': letters, digits, '.', '_' and '-'");
  }
  if (req.limits().max_gpus_per_user_size() > 0) {
    return InvalidArgument(
        "GPUs per user is a QoS limit (MaxTRESPerUser); an account limits its users' GPUs "
        "together with GrpTRES");
  }
  if (req.has_default_qos() && !req.default_qos().empty() &&
      (!qos_exists_ || !qos_exists_(req.default_qos()))) {
    return NotFound("qos " + req.default_qos().substr(0, 64) + " does not exist");
  }
  // The QoS list and default as they will be, checked together.
  auto apply_qos = [&](v1::AccountRecord& a) -> Status {
    const std::vector<std::string> parent_allows = AllowedQos(a.parent());
    if (req.has_qos()) {
      // "+q,-r" edits the list it has, or the one it inherits.
      std::vector<std::string> base(a.qos().begin(), a.qos().end());
      if (base.empty()) base = parent_allows;
      MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> list, EditQosList(req.qos(), base));
      if (req.qos().empty()) list.clear();
      for (const std::string& q : list) {
        if (!qos_exists_ || !qos_exists_(q)) return NotFound("qos " + q + " does not exist");
      }
      a.clear_qos();
      for (const std::string& q : list) a.add_qos(q);
    }
    if (req.has_default_qos()) a.set_default_qos(req.default_qos());
    // A coordinator's account keeps within the QoS its parent allows.
    if (ActsAsCoordinator(caller, Action::kChangeAccounts) && !parent_allows.empty() &&
        (req.has_qos() || req.has_default_qos())) {
      std::vector<std::string> named(a.qos().begin(), a.qos().end());
      if (!a.default_qos().empty()) named.push_back(a.default_qos());
      for (const std::string& q : named) {
        if (std::find(parent_allows.begin(), parent_allows.end(), q) == parent_allows.end()) {
          return PermissionDenied("a coordinator may give account " + name +
                                  " only the QoS of account " + a.parent() + " (" +
                                  Join(parent_allows, ", ") + "), not '" + q + "'");
        }
      }
    }
    if (!a.default_qos().empty() && a.qos_size() > 0 && !Contains(a.qos(), a.default_qos())) {
      return InvalidArgument("default qos " + a.default_qos() +
                             " is not in the account's qos list");
    }
    MUSTER_RETURN_IF_ERROR(PatchQuotas(req, &a));
    for (const std::string& c : req.add_coordinators()) {
      if (!Contains(a.coordinators(), c)) a.add_coordinators(c);
    }
    for (const std::string& c : req.remove_coordinators()) Remove(a.mutable_coordinators(), c);
    if (a.coordinators_size() > 64)
      return InvalidArgument("an account has at most 64 coordinators");
    return PatchLimits(req.limits(), a.mutable_limits());
  };
  auto it = accounts_.find(name);
  MUSTER_RETURN_IF_ERROR(CheckLiveChange(req.op(), "account", name, it != accounts_.end(),
                                         it != accounts_.end() && it->second.from_config(),
                                         ctx_.config().source));
  store::Mutation m;
  switch (req.op()) {
    case v1::ACCOUNT_OP_ADD: {
      v1::AccountRecord a;
      a.set_name(name);
      a.set_parent(req.has_parent() ? req.parent() : "root");
      a.set_shares(req.has_shares() ? req.shares() : 1);
      a.set_description(req.description());
      if (!Exists(a.parent())) return NotFound("parent account " + a.parent() + " does not exist");
      MUSTER_RETURN_IF_ERROR(apply_qos(a));
      m.PutAccount(a);
      MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
      accounts_[name] = std::move(a);
      return Status::Ok();
    }
    case v1::ACCOUNT_OP_MODIFY: {
      v1::AccountRecord a = it->second;
      if (req.has_parent()) {
        if (!Exists(req.parent())) {
          return NotFound("parent account " + req.parent() + " does not exist");
        }
        if (IsUnder(req.parent(), name)) {
          return InvalidArgument("account " + req.parent() + " lies under " + name +
                                 ": it cannot become its parent (a cycle)");
        }
        a.set_parent(req.parent());
      }
      if (req.has_shares()) a.set_shares(req.shares());
      if (req.has_description()) a.set_description(req.description());
      MUSTER_RETURN_IF_ERROR(apply_qos(a));
      m.PutAccount(a);
      MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
      it->second = std::move(a);
      return Status::Ok();
    }
    case v1::ACCOUNT_OP_REMOVE: {
      for (const auto& [other, a] : accounts_) {
        if (a.parent() == name) {
          return FailedPrecondition("account " + name + " has sub-account " + other +
                                    "; remove or move it first");
        }
      }
      for (const auto& [user, u] : users_) {
        if (Contains(u.accounts(), name)) {
          return FailedPrecondition("account " + name + " still has user " + user +
                                    "; remove the user from it first");
        }
      }
      if (in_use(name)) {
        return FailedPrecondition("jobs that have not finished charge account " + name);
      }
      m.DeleteAccount(name);
      MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
      accounts_.erase(it);
      return Status::Ok();
    }
    default:
      return InvalidArgument("unknown account operation");
  }
}

Status AccountManager::CommitUser(const v1::UserRecord& user) {
  store::Mutation m;
  if (user.accounts().empty()) {
    m.DeleteUser(user.name());
  } else {
    m.PutUser(user);
  }
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  if (user.accounts().empty()) {
    users_.erase(user.name());
  } else {
    users_[user.name()] = user;
  }
  return Status::Ok();
}

Status AccountManager::PatchAssociation(const v1::UpdateUserRequest& req,
                                        const std::string& account, bool coordinator,
                                        v1::Association* as) const {
  MUSTER_RETURN_IF_ERROR(CheckAssociationLimits(req.limits()));
  if (coordinator) {
    // Clearing a setting returns to what the accounts give; only what is set is bounded.
    v1::UsageLimits values;
    MUSTER_RETURN_IF_ERROR(PatchLimits(req.limits(), &values));
    const std::string loosened = LoosenedLimits(values, MaxBound(account));
    if (!loosened.empty()) {
      return PermissionDenied("a coordinator may not loosen the limits of account " + account +
                              " for a user: " + loosened);
    }
  }
  MUSTER_RETURN_IF_ERROR(PatchLimits(req.limits(), as->mutable_limits()));
  const std::vector<std::string> account_allows = AllowedQos(account);
  if (req.has_qos()) {
    std::vector<std::string> base(as->qos().begin(), as->qos().end());
    if (base.empty()) base = account_allows;  // "+q" adds to what it inherits
    MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> list, EditQosList(req.qos(), base));
    if (req.qos().empty()) list.clear();
    for (const std::string& q : list) {
      if (!qos_exists_ || !qos_exists_(q)) return NotFound("qos " + q + " does not exist");
      if (coordinator && !account_allows.empty() &&
          std::find(account_allows.begin(), account_allows.end(), q) == account_allows.end()) {
        return PermissionDenied("a coordinator may give a user of account " + account +
                                " only its QoS (" + Join(account_allows, ", ") + "), not '" + q +
                                "'");
      }
    }
    // The account's own list again is no setting of its own.
    if (list == account_allows) list.clear();
    as->clear_qos();
    for (const std::string& q : list) as->add_qos(q);
  }
  if (req.has_default_qos()) {
    if (!req.default_qos().empty() && (!qos_exists_ || !qos_exists_(req.default_qos()))) {
      return NotFound("qos " + req.default_qos().substr(0, 64) + " does not exist");
    }
    as->set_default_qos(req.default_qos());
  }
  if (!as->default_qos().empty()) {
    const std::vector<std::string> allowed =
        as->qos_size() > 0 ? std::vector<std::string>(as->qos().begin(), as->qos().end())
                           : account_allows;
    if (!allowed.empty() &&
        std::find(allowed.begin(), allowed.end(), as->default_qos()) == allowed.end()) {
      return InvalidArgument("default qos " + as->default_qos() + " is not among the QoS of user " +
                             req.user() + " in account " + account + " (" + Join(allowed, ", ") +
                             ")");
    }
  }
  if (req.has_shares()) {
    if (req.shares() == 0 || req.shares() > 1'000'000) {
      return InvalidArgument("shares must be between 1 and 1000000");
    }
    as->set_shares(req.shares());
  }
  return Status::Ok();
}

Status AccountManager::UpdateUser(const Caller& caller, const v1::UpdateUserRequest& req) {
  if (!IsValidAccountName(req.user())) {
    MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kChangeUsers));
    return InvalidArgument("bad user name '" + req.user().substr(0, 64) + "'");
  }
  auto found = users_.find(req.user());
  v1::UserRecord u;
  if (found != users_.end()) u = found->second;
  u.set_name(req.user());
  // The accounts it touches: the one named, or (MODIFY without one) every account of the user's.
  std::vector<std::string> touched;
  if (!req.account().empty()) {
    touched.push_back(req.account());
  } else if (req.op() == v1::ACCOUNT_OP_MODIFY && !req.make_default()) {
    touched.assign(u.accounts().begin(), u.accounts().end());
  }
  for (const std::string& account : touched) {
    MUSTER_RETURN_IF_ERROR(AuthorizeCoordinated(caller, Action::kChangeUsers,
                                                Coordinates(caller.user, account),
                                                "account " + account + " (or one above it)"));
  }
  if (touched.empty()) {
    MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kChangeUsers));
    return req.op() == v1::ACCOUNT_OP_MODIFY && !req.make_default()
               ? NotFound("user " + req.user() + " is in no account")
               : InvalidArgument("which account? (account=NAME)");
  }
  const bool coordinator = ActsAsCoordinator(caller, Action::kChangeUsers);
  // Moving a user's default account moves where all their unqualified jobs go: a coordinator
  // may only when the default it replaces is theirs too (or the user has none).
  if (coordinator && req.make_default() && !u.accounts().empty()) {
    const std::string& current = u.default_account().empty() ? u.accounts(0) : u.default_account();
    if (current != req.account() && !Coordinates(caller.user, current)) {
      return PermissionDenied("changing user " + req.user() + "'s default account from " + current +
                              " needs an admin or a coordinator of it (or of one above it)");
    }
  }
  const bool settings =
      AnyLimit(req.limits()) || req.has_qos() || req.has_default_qos() || req.has_shares();
  auto patch = [&](const std::string& account) -> Status {
    if (!settings) return Status::Ok();
    v1::Association as;
    if (auto it = u.associations().find(account); it != u.associations().end()) as = it->second;
    MUSTER_RETURN_IF_ERROR(PatchAssociation(req, account, coordinator, &as));
    if (!AnyLimit(as.limits())) as.clear_limits();
    if (as.ByteSizeLong() == 0) {
      u.mutable_associations()->erase(account);
    } else {
      (*u.mutable_associations())[account] = std::move(as);
    }
    return Status::Ok();
  };
  const std::string& account = touched.front();
  if (!accounts_.count(account)) {
    return NotFound("account " + account.substr(0, 64) + " does not exist");
  }
  const bool member = Contains(u.accounts(), account);
  Status st;
  switch (req.op()) {
    case v1::ACCOUNT_OP_ADD:
      if (member && !req.make_default() && !settings) {
        return AlreadyExists("user " + req.user() + " is in account " + account);
      }
      if (!member) u.add_accounts(account);
      if (req.make_default()) u.set_default_account(account);
      MUSTER_RETURN_IF_ERROR(patch(account));
      break;
    case v1::ACCOUNT_OP_MODIFY:
      if (!req.make_default() && !settings) {
        return InvalidArgument("nothing to change for user " + req.user());
      }
      for (const std::string& a : touched) {
        if (!Contains(u.accounts(), a)) {
          return FailedPrecondition("user " + req.user() + " is not in account " + a +
                                    "; add it first");
        }
        MUSTER_RETURN_IF_ERROR(patch(a));
      }
      if (req.make_default()) u.set_default_account(account);
      break;
    case v1::ACCOUNT_OP_REMOVE:
      if (!member) {
        return NotFound("user " + req.user() + " is not in account " + account);
      }
      if (Contains(u.config_accounts(), account)) {
        return FailedPrecondition("user " + req.user() + " is in account " + account + " by " +
                                  ctx_.config().source + "; change it there");
      }
      Remove(u.mutable_accounts(), account);
      u.mutable_associations()->erase(account);
      if (u.default_account() == account) u.clear_default_account();
      break;
    default:
      return InvalidArgument("unknown user operation");
  }
  MUSTER_RETURN_IF_ERROR(CommitUser(u));
  CountAssociationLimits();
  return Status::Ok();
}

v1::ListAccountsResponse AccountManager::List() const {
  v1::ListAccountsResponse resp;
  v1::AccountRecord* root = resp.add_accounts();
  root->set_name("root");
  root->set_shares(1);
  root->set_description("the root of the account tree");
  // Depth first from root, children by name: parents before children, as sacctmgr prints.
  std::map<std::string, std::vector<const v1::AccountRecord*>> children;
  for (const auto& [name, a] : accounts_) children[a.parent()].push_back(&a);
  std::vector<std::string> todo = {"root"};
  while (!todo.empty()) {
    const std::string at = todo.back();
    todo.pop_back();
    if (at != "root") *resp.add_accounts() = accounts_.at(at);
    auto kids = children.find(at);
    if (kids == children.end()) continue;
    for (auto k = kids->second.rbegin(); k != kids->second.rend(); ++k) {
      todo.push_back((*k)->name());
    }
  }
  for (const auto& [name, u] : users_) *resp.add_users() = u;
  return resp;
}

}  // namespace muster::controller
