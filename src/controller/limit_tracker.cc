#include "limit_tracker.h"

#include <algorithm>
#include <cstdio>
#include <deque>

#include "account_manager.h"
#include "associations.h"
#include "job_manager.h"
#include "job_spec.h"
#include "job_views.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "qos_manager.h"

namespace muster::controller {
namespace {

using core::JobReason;

// The job's QoS ("normal" when none was recorded, as for jobs from before QoS existed).
const std::string& QosOf(const v1::JobSpec& spec) {
  static const std::string kNormal = "normal";
  return spec.qos().empty() ? kNormal : spec.qos();
}

std::string GpuWords(const std::string& type) { return type.empty() ? "GPUs" : type + " GPUs"; }

std::string Tres(const std::string& type) { return type.empty() ? "gres/gpu" : "gres/gpu:" + type; }

// The accounts whose limits a job of `account` counts against: it and its ancestors.
std::vector<const v1::AccountRecord*> Lineage(const AccountManager& accounts,
                                              const std::string& account) {
  std::vector<const v1::AccountRecord*> out;
  std::string at = account;
  for (size_t hops = 0; hops <= accounts.accounts().size(); ++hops) {
    auto it = accounts.accounts().find(at);
    if (it == accounts.accounts().end()) break;
    out.push_back(&it->second);
    at = it->second.parent();
  }
  return out;
}

// The user's association with the job's account, where it sets anything.
const v1::Association* AssociationOf(const AccountManager& accounts, const v1::JobSpec& spec) {
  return accounts.AssociationOf(spec.user(), spec.account());
}

// An account's limits as they bind a job whose user's association sets Max* limits of its own
// (those replace the account's): the account's own record, or `scratch` without them.
const v1::UsageLimits& Binding(const v1::UsageLimits& account, const v1::Association* as,
                               v1::UsageLimits* scratch) {
  if (!as || !OverridesAny(as->limits())) return account;
  *scratch = account;
  ClearOverridden(as->limits(), scratch);
  return *scratch;
}

std::string AssocWords(const v1::JobSpec& spec) {
  return "user " + spec.user() + " in account " + spec.account();
}

}  // namespace

v1::UsageLimits ToLimitsRecord(const LimitsConfig& c) {
  v1::UsageLimits l;
  if (c.grp_jobs) l.set_grp_jobs(*c.grp_jobs);
  if (c.grp_submit) l.set_grp_submit(*c.grp_submit);
  if (c.grp_nodes) l.set_grp_nodes(*c.grp_nodes);
  for (const auto& [t, n] : c.grp_gpus) (*l.mutable_grp_gpus())[t] = n;
  if (c.max_jobs_per_user) l.set_max_jobs_per_user(*c.max_jobs_per_user);
  if (c.max_submit_per_user) l.set_max_submit_per_user(*c.max_submit_per_user);
  for (const auto& [t, n] : c.max_gpus_per_user) (*l.mutable_max_gpus_per_user())[t] = n;
  if (c.max_gpus_per_job) l.set_max_gpus_per_job(*c.max_gpus_per_job);
  if (c.max_nodes_per_job) l.set_max_nodes_per_job(*c.max_nodes_per_job);
  if (c.max_wall_ms) l.set_max_wall_ms(static_cast<uint64_t>(*c.max_wall_ms));
  if (c.grp_stored_mb) l.set_grp_stored_mb(*c.grp_stored_mb);
  if (c.max_stored_mb_per_user) l.set_max_stored_mb_per_user(*c.max_stored_mb_per_user);
  return l;
}

Status PatchLimits(const v1::UsageLimits& p, v1::UsageLimits* l) {
  auto scalar = [](bool has, uint32_t v, auto set, auto clear) {
    if (!has) return;
    if (v == kUnlimited) {
      clear();
    } else {
      set(v);
    }
  };
  scalar(
      p.has_grp_jobs(), p.grp_jobs(), [&](uint32_t v) { l->set_grp_jobs(v); },
      [&] { l->clear_grp_jobs(); });
  scalar(
      p.has_grp_submit(), p.grp_submit(), [&](uint32_t v) { l->set_grp_submit(v); },
      [&] { l->clear_grp_submit(); });
  scalar(
      p.has_grp_nodes(), p.grp_nodes(), [&](uint32_t v) { l->set_grp_nodes(v); },
      [&] { l->clear_grp_nodes(); });
  scalar(
      p.has_max_jobs_per_user(), p.max_jobs_per_user(),
      [&](uint32_t v) { l->set_max_jobs_per_user(v); }, [&] { l->clear_max_jobs_per_user(); });
  scalar(
      p.has_max_submit_per_user(), p.max_submit_per_user(),
      [&](uint32_t v) { l->set_max_submit_per_user(v); }, [&] { l->clear_max_submit_per_user(); });
  scalar(
      p.has_max_gpus_per_job(), p.max_gpus_per_job(),
      [&](uint32_t v) { l->set_max_gpus_per_job(v); }, [&] { l->clear_max_gpus_per_job(); });
  scalar(
      p.has_max_nodes_per_job(), p.max_nodes_per_job(),
      [&](uint32_t v) { l->set_max_nodes_per_job(v); }, [&] { l->clear_max_nodes_per_job(); });
  scalar(
      p.has_grp_stored_mb(), p.grp_stored_mb(), [&](uint32_t v) { l->set_grp_stored_mb(v); },
      [&] { l->clear_grp_stored_mb(); });
  scalar(
      p.has_max_stored_mb_per_user(), p.max_stored_mb_per_user(),
      [&](uint32_t v) { l->set_max_stored_mb_per_user(v); },
      [&] { l->clear_max_stored_mb_per_user(); });
  if (p.has_max_wall_ms()) {
    if (p.max_wall_ms() == kUnlimited) {
      l->clear_max_wall_ms();
    } else {
      l->set_max_wall_ms(p.max_wall_ms());
    }
  }
  for (auto [from, to] : {std::pair{&p.grp_gpus(), l->mutable_grp_gpus()},
                          std::pair{&p.max_gpus_per_user(), l->mutable_max_gpus_per_user()}}) {
    for (const auto& [type, n] : *from) {
      if (!type.empty() && !IsValidAccountName(type)) {
        return InvalidArgument("bad GPU type '" + type.substr(0, 64) + "' in a limit");
      }
      if (n == kUnlimited) {
        to->erase(type);
      } else {
        (*to)[type] = n;
      }
    }
  }
  return Status::Ok();
}

bool AnyLimit(const v1::UsageLimits& l) { return l.ByteSizeLong() > 0; }

std::string FormatLimits(const v1::UsageLimits& l) {
  std::vector<std::string> parts;
  auto gpus = [&](const char* name, const google::protobuf::Map<std::string, uint32_t>& m,
                  const char* node_key, bool has_nodes, uint32_t nodes) {
    std::vector<std::string> tres;
    if (has_nodes) tres.push_back(std::string(node_key) + "=" + std::to_string(nodes));
    std::map<std::string, uint32_t> sorted(m.begin(), m.end());
    for (const auto& [t, n] : sorted) tres.push_back(Tres(t) + "=" + std::to_string(n));
    if (!tres.empty()) parts.push_back(std::string(name) + "=" + Join(tres, ","));
  };
  if (l.has_grp_jobs()) parts.push_back("GrpJobs=" + std::to_string(l.grp_jobs()));
  if (l.has_grp_submit()) parts.push_back("GrpSubmitJobs=" + std::to_string(l.grp_submit()));
  gpus("GrpTRES", l.grp_gpus(), "node", l.has_grp_nodes(), l.grp_nodes());
  if (l.has_max_jobs_per_user())
    parts.push_back("MaxJobs=" + std::to_string(l.max_jobs_per_user()));
  if (l.has_max_submit_per_user()) {
    parts.push_back("MaxSubmitJobs=" + std::to_string(l.max_submit_per_user()));
  }
  gpus("MaxTRESPerUser", l.max_gpus_per_user(), "node", false, 0);
  {
    std::vector<std::string> tres;
    if (l.has_max_nodes_per_job()) tres.push_back("node=" + std::to_string(l.max_nodes_per_job()));
    if (l.has_max_gpus_per_job())
      tres.push_back("gres/gpu=" + std::to_string(l.max_gpus_per_job()));
    if (!tres.empty()) parts.push_back("MaxTRES=" + Join(tres, ","));
  }
  if (l.has_max_wall_ms()) {
    parts.push_back("MaxWall=" + FormatDuration(static_cast<int64_t>(l.max_wall_ms())));
  }
  if (l.has_grp_stored_mb()) parts.push_back("GrpStoredMB=" + std::to_string(l.grp_stored_mb()));
  if (l.has_max_stored_mb_per_user()) {
    parts.push_back("MaxStoredMBPerUser=" + std::to_string(l.max_stored_mb_per_user()));
  }
  return Join(parts, " ");
}

// ---------------------------------------------------------------------------------------------
// Submission

namespace {

// Whether a job moving from `from` (nullptr: a new one) already counts in QoS `qos` / under
// account `account`.
bool AlreadyInQos(const v1::JobSpec* from, const std::string& qos) {
  return from && QosOf(*from) == qos;
}
bool AlreadyUnder(const AccountManager& accounts, const v1::JobSpec* from,
                  const std::string& account) {
  if (!from) return false;
  for (const v1::AccountRecord* a : Lineage(accounts, from->account())) {
    if (a->name() == account) return true;
  }
  return false;
}

}  // namespace

Status LimitTracker::CheckSubmit(const v1::JobSpec& spec, int64_t time_limit_ms, const JobUse& use,
                                 uint64_t count, const v1::JobSpec* moving_from) const {
  const std::string& qos_name = QosOf(spec);
  const v1::QosRecord* qos = qos_.Find(qos_name);
  if (qos && qos->deny_on_limit() && !AlreadyInQos(moving_from, qos_name)) {
    std::string detail;
    if (PerJobLimit(spec, time_limit_ms, use, &detail) != JobReason::kNone) {
      return InvalidArgument("job violates a limit of qos " + qos_name +
                             " (DenyOnLimit): " + detail);
    }
    for (const auto& [type, n] : qos->limits().max_gpus_per_user()) {
      if ((type.empty() || type == use.gpu_type) && use.gpus > n) {
        return InvalidArgument("job violates a limit of qos " + qos_name +
                               " (DenyOnLimit): it asks for " + std::to_string(use.gpus) + " " +
                               GpuWords(type) + "; a user may hold at most " + std::to_string(n) +
                               " (MaxTRESPerUser " + Tres(type) + ")");
      }
    }
  }
  const auto lineage = Lineage(accounts_, spec.account());
  const v1::Association* as = AssociationOf(accounts_, spec);
  auto submit_limits = [](const v1::UsageLimits& l) {
    return l.has_grp_submit() || l.has_max_submit_per_user();
  };
  bool any = (qos && submit_limits(qos->limits())) || (as && submit_limits(as->limits()));
  for (const v1::AccountRecord* a : lineage) any = any || submit_limits(a->limits());
  if (!any) return Status::Ok();
  // From the job table's counts of pending and running tasks: an account's own, added up to
  // each ancestor in this lineage (the tree may have changed since they were counted).
  const ActiveTasks& active = jobs_.active_tasks();
  std::map<std::string, uint64_t> account_jobs, account_user_jobs;
  active.ForEachAccount([&](const std::string& name, const ActiveTasks::Tally& tally) {
    const uint64_t mine = tally.Of(spec.uid());
    for (const v1::AccountRecord* a : Lineage(accounts_, name)) {
      account_jobs[a->name()] += tally.total;
      account_user_jobs[a->name()] += mine;
    }
  });
  const uint64_t qos_jobs = active.OfQos(qos_name);
  const uint64_t qos_user_jobs = active.OfQos(qos_name, spec.uid());
  auto over = [&](uint64_t have, uint32_t max, const std::string& words) -> Status {
    if (have + count <= max) return Status::Ok();
    return ResourceExhausted(words + ": " + std::to_string(have) +
                             " jobs pending or running, at most " + std::to_string(max) +
                             "; this submission adds " + std::to_string(count));
  };
  // The association's limits count the user's jobs in its account alone.
  if (as && !(moving_from && moving_from->account() == spec.account())) {
    const v1::UsageLimits& l = as->limits();
    uint64_t mine = 0;
    active.ForEachAccount([&](const std::string& name, const ActiveTasks::Tally& tally) {
      if (name == spec.account()) mine = tally.Of(spec.uid());
    });
    if (l.has_grp_submit()) {
      MUSTER_RETURN_IF_ERROR(
          over(mine, l.grp_submit(),
               AssocWords(spec) + " is at its limit (AssocGrpSubmitJobsLimit, GrpSubmitJobs)"));
    }
    if (l.has_max_submit_per_user()) {
      MUSTER_RETURN_IF_ERROR(
          over(mine, l.max_submit_per_user(),
               AssocWords(spec) + " is at its limit (AssocMaxSubmitJobLimit, MaxSubmitJobs)"));
    }
  }
  v1::UsageLimits scratch;
  for (const v1::AccountRecord* a : lineage) {
    if (AlreadyUnder(accounts_, moving_from, a->name())) continue;
    const v1::UsageLimits& l = Binding(a->limits(), as, &scratch);
    if (l.has_grp_submit()) {
      MUSTER_RETURN_IF_ERROR(over(
          account_jobs[a->name()], l.grp_submit(),
          "account " + a->name() + " is at its limit (AssocGrpSubmitJobsLimit, GrpSubmitJobs)"));
    }
    if (l.has_max_submit_per_user()) {
      MUSTER_RETURN_IF_ERROR(over(account_user_jobs[a->name()], l.max_submit_per_user(),
                                  "user " + spec.user() + " is at account " + a->name() +
                                      "'s limit (AssocMaxSubmitJobLimit, MaxSubmitJobs)"));
    }
  }
  if (AlreadyInQos(moving_from, qos_name)) return Status::Ok();
  if (qos && qos->limits().has_grp_submit()) {
    MUSTER_RETURN_IF_ERROR(over(qos_jobs, qos->limits().grp_submit(),
                                "qos " + qos_name + " is at its limit (QOSGrpSubmitJobsLimit)"));
  }
  if (qos && qos->limits().has_max_submit_per_user()) {
    MUSTER_RETURN_IF_ERROR(over(qos_user_jobs, qos->limits().max_submit_per_user(),
                                "user " + spec.user() + " is at qos " + qos_name +
                                    "'s limit (QOSMaxSubmitJobPerUserLimit)"));
  }
  return Status::Ok();
}

namespace {

std::string MiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

Status LimitTracker::CheckStored(const v1::JobSpec& spec, uint64_t bytes,
                                 const v1::JobSpec* moving_from) const {
  const StoredBytes& stored = jobs_.stored();
  const auto lineage = Lineage(accounts_, spec.account());
  // Bytes under account `a` and its sub-accounts: of everyone, or of `uid` alone.
  auto under = [&](const std::string& a, const uint32_t* uid) {
    uint64_t sum = 0;
    for (const auto& [account, n] : stored.accounts()) {
      for (const v1::AccountRecord* up : Lineage(accounts_, account)) {
        if (up->name() != a) continue;
        sum += uid ? stored.OfAccountUser(account, *uid) : n;
        break;
      }
    }
    return sum;
  };
  // `adds` 0: a scope the job already counts under, which a move does not refuse.
  auto over = [&](uint64_t have, uint64_t max_mb, const std::string& words,
                  uint64_t adds) -> Status {
    if (adds == 0 || have + adds <= (max_mb << 20)) return Status::Ok();
    return ResourceExhausted(words + ": " + MiB(have) +
                             " of job scripts and environments stored (jobs not yet archived), "
                             "at most " +
                             std::to_string(max_mb) + " MiB; this job adds " + MiB(adds) +
                             ". Wait for finished jobs to be archived, or share one script "
                             "among many jobs with --array");
  };
  const uint32_t uid = spec.uid();
  const uint64_t user_cap_mb = PerUserCapMb(spec);
  const std::string& qos_name = QosOf(spec);
  // Moving: a QoS or account the job already counts under gains nothing.
  const uint64_t to_qos = AlreadyInQos(moving_from, qos_name) ? 0 : bytes;
  if (const v1::QosRecord* q = qos_.Find(qos_name)) {
    const v1::UsageLimits& l = q->limits();
    if (l.has_grp_stored_mb()) {
      MUSTER_RETURN_IF_ERROR(over(stored.OfQos(qos_name), l.grp_stored_mb(),
                                  "qos " + qos_name + " is at its limit (GrpStoredMB)", to_qos));
    }
    if (l.has_max_stored_mb_per_user()) {
      MUSTER_RETURN_IF_ERROR(
          over(stored.OfQosUser(qos_name, uid), l.max_stored_mb_per_user(),
               "user " + spec.user() + " is at qos " + qos_name + "'s limit (MaxStoredMBPerUser)",
               to_qos));
    }
  }
  for (const v1::AccountRecord* a : lineage) {
    const v1::UsageLimits& l = a->limits();
    const uint64_t to_account = AlreadyUnder(accounts_, moving_from, a->name()) ? 0 : bytes;
    if (l.has_grp_stored_mb()) {
      MUSTER_RETURN_IF_ERROR(over(under(a->name(), nullptr), l.grp_stored_mb(),
                                  "account " + a->name() + " is at its limit (GrpStoredMB)",
                                  to_account));
    }
    if (l.has_max_stored_mb_per_user()) {
      MUSTER_RETURN_IF_ERROR(over(
          under(a->name(), &uid), l.max_stored_mb_per_user(),
          "user " + spec.user() + " is at account " + a->name() + "'s limit (MaxStoredMBPerUser)",
          to_account));
    }
  }
  // All the user's bytes, whatever account or QoS they are in: within the site's limit, or the
  // job's account's or QoS's per-user limit where that is larger (each of those alone counts
  // only its own jobs: a user in several would otherwise have each one's allowance).
  const uint32_t site = ctx_.scheduling().max_stored_mb_per_user;
  if (site == 0 || uid == 0) return Status::Ok();
  const uint64_t cap_mb = std::max<uint64_t>(site, user_cap_mb);
  const bool raised = user_cap_mb > site;
  const std::string words =
      "user " + spec.user() +
      (raised ? " is at the MaxStoredMBPerUser of the job's account or QoS, which bounds all "
                "the user's jobs together"
              : " is at the site's limit (scheduling.max_stored_mb_per_user)");
  if (!moving_from) return over(stored.OfUser(uid), cap_mb, words, bytes);
  // A move adds nothing to the total, but it may leave a larger allowance behind: then the
  // total must fit the smaller one.
  if (cap_mb >= std::max<uint64_t>(site, PerUserCapMb(*moving_from))) return Status::Ok();
  if (stored.OfUser(uid) <= (cap_mb << 20)) return Status::Ok();
  return ResourceExhausted(words + ": " + MiB(stored.OfUser(uid)) +
                           " of job scripts and environments stored (jobs not yet archived), "
                           "at most " +
                           std::to_string(cap_mb) + " MiB where the job would go");
}

uint64_t LimitTracker::PerUserCapMb(const v1::JobSpec& spec) const {
  uint64_t cap = 0;
  if (const v1::QosRecord* q = qos_.Find(QosOf(spec))) {
    cap = q->limits().max_stored_mb_per_user();
  }
  for (const v1::AccountRecord* a : Lineage(accounts_, spec.account())) {
    cap = std::max<uint64_t>(cap, a->limits().max_stored_mb_per_user());
  }
  return cap;
}

int64_t LimitTracker::WallLimit(const v1::JobSpec& spec) const {
  uint64_t wall = 0;
  auto take = [&](const v1::UsageLimits& l) {
    if (l.has_max_wall_ms() && (wall == 0 || l.max_wall_ms() < wall)) wall = l.max_wall_ms();
  };
  if (const v1::QosRecord* q = qos_.Find(QosOf(spec))) take(q->limits());
  const v1::Association* as = AssociationOf(accounts_, spec);
  if (as) take(as->limits());
  v1::UsageLimits scratch;
  for (const v1::AccountRecord* a : Lineage(accounts_, spec.account())) {
    take(Binding(a->limits(), as, &scratch));
  }
  return static_cast<int64_t>(wall);
}

JobReason LimitTracker::PerJobLimit(const v1::JobSpec& spec, int64_t time_limit_ms,
                                    const JobUse& use, std::string* detail) const {
  struct Scope {
    std::string words;
    const v1::UsageLimits* l;
    bool assoc;
  };
  std::vector<Scope> scopes;
  if (const v1::QosRecord* q = qos_.Find(QosOf(spec))) {
    scopes.push_back({"qos " + q->name(), &q->limits(), false});
  }
  const v1::Association* as = AssociationOf(accounts_, spec);
  if (as) scopes.push_back({AssocWords(spec), &as->limits(), true});
  std::deque<v1::UsageLimits> scratch;  // the accounts' limits less what the association sets
  for (const v1::AccountRecord* a : Lineage(accounts_, spec.account())) {
    scopes.push_back(
        {"account " + a->name(), &Binding(a->limits(), as, &scratch.emplace_back()), true});
  }
  for (const Scope& s : scopes) {
    const v1::UsageLimits& l = *s.l;
    if (l.has_max_wall_ms() &&
        (time_limit_ms <= 0 || static_cast<uint64_t>(time_limit_ms) > l.max_wall_ms())) {
      *detail = s.words + " allows at most " +
                FormatDuration(static_cast<int64_t>(l.max_wall_ms())) + " per job (MaxWall); " +
                (time_limit_ms <= 0 ? std::string("this job has no time limit")
                                    : "this job asks for " + FormatDuration(time_limit_ms)) +
                ": give it a shorter --time";
      return s.assoc ? JobReason::kAssocMaxWallDurationPerJobLimit
                     : JobReason::kQOSMaxWallDurationPerJobLimit;
    }
    if (l.has_max_gpus_per_job() && use.gpus > l.max_gpus_per_job()) {
      *detail = s.words + " allows at most " + std::to_string(l.max_gpus_per_job()) +
                " GPUs per job (MaxTRES gres/gpu); this job asks for " + std::to_string(use.gpus);
      return s.assoc ? JobReason::kAssocMaxGRESPerJob : JobReason::kQOSMaxGRESPerJob;
    }
    if (l.has_max_nodes_per_job() && use.nodes > l.max_nodes_per_job()) {
      *detail = s.words + " allows at most " + std::to_string(l.max_nodes_per_job()) +
                " nodes per job (MaxTRES node); this job asks for " + std::to_string(use.nodes);
      return s.assoc ? JobReason::kAssocMaxNodePerJobLimit : JobReason::kQOSMaxNodePerJobLimit;
    }
  }
  return JobReason::kNone;
}

// ---------------------------------------------------------------------------------------------
// Counters of a pass

uint32_t LimitTracker::Counter(const std::string& key, JobReason reason, std::string what,
                               uint64_t max) {
  auto [it, inserted] = index_.try_emplace(key, static_cast<uint32_t>(counters_->size()));
  if (inserted) {
    keys_.push_back(key);
    core::LimitCounter c;
    c.reason = reason;
    c.what = std::move(what);
    c.max = max;
    auto used = used_.find(key);
    c.used = used == used_.end() ? 0 : used->second;
    counters_->push_back(std::move(c));
  }
  return it->second;
}

void LimitTracker::AddCharges(const std::string& scope, const std::string& words,
                              const v1::UsageLimits& l, bool per_user, const v1::JobSpec& spec,
                              const JobUse& use, bool assoc, std::vector<core::LimitCharge>* out) {
  // `per_user` adds the user-level limits (MaxJobs, MaxTRESPerUser) under the user's key.
  const std::string user_scope = scope + "/u:" + spec.user();
  if (l.has_grp_jobs()) {
    out->push_back({Counter(scope + "/jobs",
                            assoc ? JobReason::kAssocGrpJobsLimit : JobReason::kQOSGrpJobsLimit,
                            words + ": running jobs (GrpJobs)", l.grp_jobs()),
                    1});
  }
  if (l.has_grp_nodes() && use.nodes > 0) {
    out->push_back({Counter(scope + "/nodes",
                            assoc ? JobReason::kAssocGrpNodeLimit : JobReason::kQOSGrpNodeLimit,
                            words + ": nodes (GrpTRES node)", l.grp_nodes()),
                    use.nodes});
  }
  for (const auto& [type, max] : l.grp_gpus()) {
    if (use.gpus == 0 || (!type.empty() && type != use.gpu_type)) continue;
    out->push_back(
        {Counter(scope + "/gpus:" + type, assoc ? JobReason::kAssocGrpGRES : JobReason::kQOSGrpGRES,
                 words + ": " + GpuWords(type) + " (GrpTRES " + Tres(type) + ")", max),
         use.gpus});
  }
  if (!per_user) return;
  if (l.has_max_jobs_per_user()) {
    out->push_back(
        {Counter(user_scope + "/jobs",
                 assoc ? JobReason::kAssocMaxJobsLimit : JobReason::kQOSMaxJobsPerUserLimit,
                 words + ", user " + spec.user() + ": running jobs (" +
                     (assoc ? "MaxJobs" : "MaxJobsPerUser") + ")",
                 l.max_jobs_per_user()),
         1});
  }
  for (const auto& [type, max] : l.max_gpus_per_user()) {
    if (use.gpus == 0 || (!type.empty() && type != use.gpu_type)) continue;
    out->push_back({Counter(user_scope + "/gpus:" + type, JobReason::kQOSMaxGRESPerUser,
                            words + ", user " + spec.user() + ": " + GpuWords(type) +
                                " (MaxTRESPerUser " + Tres(type) + ")",
                            max),
                    use.gpus});
  }
}

std::vector<core::LimitCharge> LimitTracker::ChargesOf(const v1::JobSpec& spec, const JobUse& use) {
  std::vector<core::LimitCharge> out;
  if (!counters_) return out;
  if (const v1::QosRecord* q = qos_.Find(QosOf(spec)); q && AnyLimit(q->limits())) {
    AddCharges("q:" + q->name(), "qos " + q->name(), q->limits(), true, spec, use, false, &out);
  }
  const v1::Association* as = AssociationOf(accounts_, spec);
  if (as && AnyLimit(as->limits())) {
    AddCharges("s:" + spec.account() + "/" + spec.user(), AssocWords(spec), as->limits(), true,
               spec, use, true, &out);
  }
  v1::UsageLimits scratch;
  for (const v1::AccountRecord* a : Lineage(accounts_, spec.account())) {
    if (!AnyLimit(a->limits())) continue;
    AddCharges("a:" + a->name(), "account " + a->name(), Binding(a->limits(), as, &scratch), true,
               spec, use, true, &out);
  }
  return out;
}

void LimitTracker::BeginPass(std::vector<core::LimitCounter>* counters) {
  counters_ = counters;
  index_.clear();
  keys_.clear();
  used_.clear();
  bool any = false;
  for (const auto& [name, q] : qos_.all()) any = any || AnyLimit(q.limits());
  for (const auto& [name, a] : accounts_.accounts()) any = any || AnyLimit(a.limits());
  any = any || accounts_.AnyAssociationLimit();
  if (!any) {
    counters_ = nullptr;  // nothing to charge: a pass pays nothing for limits
    return;
  }
  // What running jobs hold now, under every key they would be charged.
  std::vector<core::LimitCounter> scratch;
  std::vector<core::LimitCounter>* live = counters_;
  counters_ = &scratch;
  for (const auto& [id, job] : jobs_.jobs()) {
    const v1::JobRecord& r = job.rec();
    if (r.state() != v1::RUNNING) continue;
    for (const core::LimitCharge& c : ChargesOf(r.spec(), RunningUse(r))) {
      scratch[c.counter].used += c.amount;
    }
  }
  for (size_t i = 0; i < scratch.size(); ++i) used_[keys_[i]] = scratch[i].used;
  index_.clear();
  keys_.clear();
  counters_ = live;
}

std::vector<LimitTracker::Holding> LimitTracker::HoldingLimits(const v1::JobSpec& spec,
                                                               const JobUse& use) {
  // Counters of its own, for this question only; the pass's state is left as it was.
  std::vector<core::LimitCounter> scratch;
  auto* saved_counters = std::exchange(counters_, &scratch);
  auto saved_index = std::exchange(index_, {});
  auto saved_keys = std::exchange(keys_, {});
  auto saved_used = std::exchange(used_, {});
  const std::vector<core::LimitCharge> charges = ChargesOf(spec, use);
  const size_t own = scratch.size();
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> jobs(own);
  for (const auto& [id, job] : jobs_.jobs()) {
    if (job.rec().state() != v1::RUNNING) continue;
    for (const core::LimitCharge& c : ChargesOf(job.rec().spec(), RunningUse(job.rec()))) {
      if (c.counter >= own) continue;
      scratch[c.counter].used += c.amount;
      jobs[c.counter].push_back({id, c.amount});
    }
  }
  counters_ = saved_counters;
  index_ = std::move(saved_index);
  keys_ = std::move(saved_keys);
  used_ = std::move(saved_used);
  std::vector<Holding> out;
  for (const core::LimitCharge& c : charges) {
    const core::LimitCounter& counter = scratch[c.counter];
    if (counter.used + c.amount <= counter.max) continue;
    out.push_back({counter, c.amount, std::move(jobs[c.counter])});
  }
  return out;
}

JobUse LimitTracker::RunningUse(const v1::JobRecord& r) const {
  const JobTotals t = TotalsOf(r);
  JobUse use{t.nodes, t.gpus, r.spec().gpu_type()};
  if (use.gpu_type.empty() && use.gpus > 0 && r.allocation().nodes_size() > 0) {
    // An untyped request runs on some type: typed limits count what it got.
    if (auto i = ctx_.NodeIndex(r.allocation().nodes(0).node())) {
      use.gpu_type = ctx_.config().nodes[*i].gpu_type;
    }
  }
  return use;
}

}  // namespace muster::controller
