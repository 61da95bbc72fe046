// Engine: the sharing policy's requests (accounts, users' associations, QoS, the fair-share
// tree, advance reservations), routed to the account, QoS, fair-share and reservation managers.
#include <algorithm>

#include "account_manager.h"
#include "audit_log.h"
#include "cluster_views.h"
#include "engine_context.h"
#include "fair_share.h"
#include "job_manager.h"
#include "limit_tracker.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "muster/controller/access.h"
#include "muster/controller/engine.h"
#include "qos_manager.h"
#include "quota_book.h"
#include "reservation_manager.h"

namespace muster::controller {
namespace {

// Keeps, in order, the elements `keep` says yes to.
template <class T, class Keep>
void KeepOnly(google::protobuf::RepeatedPtrField<T>* field, Keep keep) {
  int kept = 0;
  for (int i = 0; i < field->size(); ++i) {
    if (!keep(field->Get(i))) continue;
    if (kept != i) field->SwapElements(kept, i);
    ++kept;
  }
  field->DeleteSubrange(kept, field->size() - kept);
}

}  // namespace

Result<v1::UpdateAccountResponse> Engine::UpdateAccount(const Caller& caller,
                                                        const v1::UpdateAccountRequest& req,
                                                        TimeMs now) {
  auto in_use = [this](const std::string& account) {
    return !jobs_->JobsNaming(JobManager::Named::kAccount, account).empty();
  };
  Status st = accounts_->UpdateAccount(caller, req, in_use);
  std::string detail;
  if (req.has_parent()) detail += "parent=" + req.parent().substr(0, 64) + " ";
  if (req.has_shares()) detail += "shares=" + std::to_string(req.shares()) + " ";
  if (req.has_cohort()) detail += "cohort=" + req.cohort().substr(0, 64) + " ";
  for (int i = 0; i < std::min(req.add_coordinators_size(), 8); ++i) {
    detail += "coordinator+=" + req.add_coordinators(i).substr(0, 64) + " ";
  }
  for (int i = 0; i < std::min(req.remove_coordinators_size(), 8); ++i) {
    detail += "coordinator-=" + req.remove_coordinators(i).substr(0, 64) + " ";
  }
  // Sorted for a stable line; a request with too many is refused and named by its count.
  std::map<std::string, v1::GpuQuota> quotas;
  if (req.quotas_size() <= 64) quotas.insert(req.quotas().begin(), req.quotas().end());
  size_t shown = 0;
  for (const auto& [type, q] : quotas) {
    if (++shown > 8) break;  // the audit line stays short
    detail += "quota=" + type.substr(0, 64) + ":" +
              (q.guaranteed() == kUnlimited
                   ? std::string("none")
                   : std::to_string(q.guaranteed()) + ":" +
                         (q.has_max() ? std::to_string(q.max()) : "-") + ":" +
                         (q.has_lending_limit() ? std::to_string(q.lending_limit()) : "-")) +
              " ";
  }
  if (req.quotas_size() > 8) detail += std::to_string(req.quotas_size()) + " quotas ";
  if (AnyLimit(req.limits())) detail += FormatLimits(req.limits());
  audit_->Record(caller, "account " + ToLower(v1::AccountOp_Name(req.op()).substr(11)),
                 "account " + req.name().substr(0, 64), detail,
                 st.code() != StatusCode::kPermissionDenied, st, now);
  MUSTER_RETURN_IF_ERROR(st);
  ctx_->RequestPass();  // limits may have changed
  return v1::UpdateAccountResponse();
}

Result<v1::UpdateUserResponse> Engine::UpdateUser(const Caller& caller,
                                                  const v1::UpdateUserRequest& req, TimeMs now) {
  Status st = accounts_->UpdateUser(caller, req);
  std::string detail =
      "account=" + (req.account().empty() ? std::string("(all)") : req.account().substr(0, 64));
  if (req.make_default()) detail += " default";
  if (req.has_qos()) detail += " qos=" + req.qos().substr(0, 256);
  if (req.has_default_qos()) detail += " defaultqos=" + req.default_qos().substr(0, 64);
  if (req.has_shares()) detail += " fairshare=" + std::to_string(req.shares());
  if (AnyLimit(req.limits())) detail += " " + FormatLimits(req.limits());
  audit_->Record(caller, "user " + ToLower(v1::AccountOp_Name(req.op()).substr(11)),
                 "user " + req.user().substr(0, 64), detail,
                 st.code() != StatusCode::kPermissionDenied, st, now);
  MUSTER_RETURN_IF_ERROR(st);
  ctx_->RequestPass();  // limits may have changed
  return v1::UpdateUserResponse();
}

Result<v1::ListAccountsResponse> Engine::ListAccounts(const Caller& caller) const {
  const Config::PrivateData hidden = HiddenFrom(caller, ctx_->config());
  // A coordinator sees the accounts it coordinates and the users in them, as in Slurm.
  const std::set<std::string> mine = hidden.accounts || hidden.usage
                                         ? accounts_->AccountsVisibleTo(caller.user)
                                         : std::set<std::string>();
  v1::ListAccountsResponse resp = accounts_->List();
  if (hidden.accounts) {
    KeepOnly(resp.mutable_accounts(),
             [&](const v1::AccountRecord& a) { return mine.count(a.name()) > 0; });
  }
  if (hidden.users) {
    // Another user's record shows a coordinator only the associations in accounts it
    // coordinates: nothing of that user's elsewhere, the default account included.
    auto coordinated = [&](const std::string& a) { return accounts_->Coordinates(caller.user, a); };
    for (v1::UserRecord& u : *resp.mutable_users()) {
      if (u.name() == caller.user) continue;
      KeepOnly(u.mutable_accounts(), coordinated);
      KeepOnly(u.mutable_config_accounts(), coordinated);
      for (auto it = u.mutable_associations()->begin(); it != u.mutable_associations()->end();) {
        it = coordinated(it->first) ? std::next(it) : u.mutable_associations()->erase(it);
      }
      if (!coordinated(u.default_account())) u.clear_default_account();
    }
    KeepOnly(resp.mutable_users(), [&](const v1::UserRecord& u) {
      return u.name() == caller.user || u.accounts_size() > 0;
    });
  }
  for (const auto& [name, q] : qos_->all()) *resp.add_qos() = q;
  core::ClusterView view;
  quotas_->Fill(&view);
  for (const auto& [name, a] : accounts_->accounts()) {
    if ((hidden.accounts || hidden.usage) && !mine.count(name)) continue;
    std::map<std::string, v1::GpuQuota> sorted(a.quotas().begin(), a.quotas().end());
    for (const auto& [type, q] : sorted) {
      const int32_t i = quotas_->QuotaIndex(name, type);
      if (i < 0) continue;
      const core::QuotaView& v = view.quotas[static_cast<size_t>(i)];
      v1::QuotaUse* u = resp.add_quota_use();
      u->set_account(name);
      u->set_gpu_type(type);
      u->set_used(v.used);
      u->set_borrowed(v.Borrows());
      u->set_lent(v.Lends());
    }
  }
  return resp;
}

Result<v1::UpdateQosResponse> Engine::UpdateQos(const Caller& caller,
                                                const v1::UpdateQosRequest& req, TimeMs now) {
  auto in_use = [this](const std::string& qos) -> std::string {
    for (uint64_t id : jobs_->JobsNaming(JobManager::Named::kQos, qos)) {
      const v1::JobRecord& r = jobs_->Find(id)->rec();
      if (r.state() == v1::PENDING || r.state() == v1::RUNNING) return "job " + std::to_string(id);
    }
    for (const auto& [name, a] : accounts_->accounts()) {
      if (a.default_qos() == qos ||
          std::find(a.qos().begin(), a.qos().end(), qos) != a.qos().end()) {
        return "account " + name;
      }
    }
    return "";
  };
  Status st = qos_->Update(caller, req, in_use);
  std::string detail;
  if (req.has_priority()) detail += "priority=" + std::to_string(req.priority()) + " ";
  if (req.has_preempt()) detail += "preempt=" + req.preempt().substr(0, 256) + " ";
  if (AnyLimit(req.limits())) detail += FormatLimits(req.limits());
  audit_->Record(caller, "qos " + ToLower(v1::AccountOp_Name(req.op()).substr(11)),
                 "qos " + req.name().substr(0, 64), detail,
                 st.code() != StatusCode::kPermissionDenied, st, now);
  MUSTER_RETURN_IF_ERROR(st);
  ctx_->RequestPass();  // priorities and limits may have changed
  return v1::UpdateQosResponse();
}

Result<v1::ListSharesResponse> Engine::ListShares(const Caller& caller,
                                                  const v1::ListSharesRequest& req,
                                                  TimeMs now) const {
  const std::set<std::string> accounts(req.accounts().begin(), req.accounts().end());
  const std::set<std::string> users(req.users().begin(), req.users().end());
  // Private usage: the caller's own lines and the accounts above them, as if nobody else were
  // there (the factors are the tree's, so the caller's own numbers stay true).
  const Config::PrivateData hidden = HiddenFrom(caller, ctx_->config());
  const bool only_mine = hidden.usage || hidden.users || hidden.accounts;
  const std::set<std::string> mine =
      only_mine ? accounts_->AccountsAbove(caller.user) : std::set<std::string>();
  v1::ListSharesResponse resp;
  const core::FairShareResult tree = fair_share_->ComputeAt(now);
  for (const core::FairShareRow& row : tree.rows) {
    if (only_mine && !mine.count(row.account)) continue;
    if ((hidden.usage || hidden.users) && !row.user.empty() && row.user != caller.user) continue;
    if (!accounts.empty() && !accounts.count(row.account)) continue;
    if (!users.empty() && !row.user.empty() && !users.count(row.user)) continue;
    if (!users.empty() && row.user.empty() && !req.with_accounts()) continue;
    v1::ShareRow* r = resp.add_rows();
    r->set_account(row.account);
    r->set_user(row.user);
    r->set_depth(static_cast<uint32_t>(row.depth));
    r->set_raw_shares(row.raw_shares);
    r->set_norm_shares(row.norm_shares);
    r->set_raw_usage(row.raw_usage);
    r->set_effective_usage(row.norm_usage);
    r->set_level_fs(row.level_fs);
    r->set_fairshare(row.factor);
  }
  return resp;
}

Result<v1::UpdateReservationResponse> Engine::UpdateReservation(
    const Caller& caller, const v1::UpdateReservationRequest& req, TimeMs now) {
  auto in_use = [this](const std::string& name) -> std::string {
    for (uint64_t id : jobs_->JobsNaming(JobManager::Named::kReservation, name)) {
      const v1::JobRecord& r = jobs_->Find(id)->rec();
      if (r.state() == v1::PENDING || r.state() == v1::RUNNING) return "job " + std::to_string(id);
    }
    return "";
  };
  // The nodes as they are, less the reservation's own running jobs (they are meant to be there).
  // Built only for an admin's create or change: the view of a large cluster is not cheap.
  core::ClusterView live;
  if (May(caller, Action::kManageReservations) && req.op() != v1::ACCOUNT_OP_REMOVE) {
    live = views_->LiveView(now);
    std::erase_if(live.running, [&](const core::RunningUse& u) {
      const JobEntry* job = jobs_->Find(u.job);
      return job && job->rec().spec().reservation() == req.name();
    });
  }
  std::string name;
  Status st = reservations_->Update(caller, req, now, live, in_use, &name);
  std::string detail;
  if (req.has_start_ms()) detail += "start=" + FormatTimestamp(req.start_ms()) + " ";
  if (req.has_end_ms()) detail += "end=" + FormatTimestamp(req.end_ms()) + " ";
  if (req.has_duration_ms()) detail += "duration=" + FormatDuration(req.duration_ms()) + " ";
  if (req.has_nodes()) detail += "nodes=" + req.nodes().substr(0, 256) + " ";
  if (req.has_gpus()) detail += "gpus=" + std::to_string(req.gpus()) + " ";
  if (req.has_flags()) detail += "flags=" + req.flags().substr(0, 128) + " ";
  audit_->Record(caller, "reservation " + ToLower(v1::AccountOp_Name(req.op()).substr(11)),
                 "reservation " + (name.empty() ? req.name().substr(0, 64) : name), detail,
                 st.code() != StatusCode::kPermissionDenied, st, now);
  MUSTER_RETURN_IF_ERROR(st);
  ctx_->RequestPass();
  v1::UpdateReservationResponse resp;
  resp.set_name(name);
  return resp;
}

Result<v1::ListReservationsResponse> Engine::ListReservations(
    const Caller& caller, const v1::ListReservationsRequest& req, TimeMs now) const {
  v1::ListReservationsResponse resp;
  resp.set_now_ms(now);
  std::vector<const v1::ReservationRecord*> all;
  for (const auto& [name, r] : reservations_->all()) {
    if (req.name().empty() || req.name() == name) all.push_back(&r);
  }
  if (!req.name().empty() && all.empty()) {
    return NotFound("reservation " + req.name().substr(0, 64) + " not found");
  }
  std::sort(all.begin(), all.end(), [](const auto* a, const auto* b) {
    return a->start_ms() != b->start_ms() ? a->start_ms() < b->start_ms() : a->name() < b->name();
  });
  const Config::PrivateData hidden = HiddenFrom(caller, ctx_->config());
  const std::set<std::string> mine =
      hidden.accounts ? accounts_->AccountsAbove(caller.user) : std::set<std::string>();
  for (const v1::ReservationRecord* r : all) {
    v1::ReservationRecord& out = *resp.add_reservations() = *r;
    if (hidden.users) {
      KeepOnly(out.mutable_users(), [&](const std::string& u) { return u == caller.user; });
    }
    if (hidden.accounts) {
      KeepOnly(out.mutable_accounts(), [&](const std::string& a) { return mine.count(a) > 0; });
    }
  }
  return resp;
}

}  // namespace muster::controller
