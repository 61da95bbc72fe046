// The config's sharing policy: [[accounts]] (the tree, associations, limits, allowed QoS),
// [[qos]] (priority, limits, preemption) and [licenses] (counted cluster-wide resources).
#include <map>
#include <set>

#include "config_reader.h"
#include "muster/common/strings.h"

namespace muster::config_internal {
namespace {

// A count of GPUs: a whole number from 0 to 1000000000.
Status GpuCount(const TableReader& t, const toml::node& v, const std::string& key, uint32_t* c) {
  if (!v.is_integer() || *v.value<int64_t>() < 0 || *v.value<int64_t>() > 1'000'000'000) {
    return t.Error(&v, key, "expected a whole number of GPUs (0 to 1000000000)");
  }
  *c = static_cast<uint32_t>(*v.value<int64_t>());
  return Status::Ok();
}

// A GPU limit: a number (any type) or a table of type = number ({ h100 = 16, a100 = 8 }).
Status GpuLimit(TableReader& t, const std::string& key, std::map<std::string, uint32_t>* out) {
  const toml::node* n = t.Get(key);
  if (!n) return Status::Ok();
  if (n->is_integer()) return GpuCount(t, *n, key, &(*out)[""]);
  const toml::table* tbl = n->as_table();
  if (!tbl) return t.Error(n, key, "expected a number of GPUs or a table such as { h100 = 16 }");
  for (auto&& [k, v] : *tbl) {
    const std::string type(k.str());
    if (!IsValidAccountName(type)) return t.Error(&v, key, "bad GPU type '" + type + "'");
    MUSTER_RETURN_IF_ERROR(GpuCount(t, v, key, &(*out)[type]));
  }
  return Status::Ok();
}

template <typename T>
Status OptionalUint(TableReader& t, const std::string& key, std::optional<T>* out) {
  if (!t.Has(key)) return Status::Ok();
  T v{};
  MUSTER_RETURN_IF_ERROR(t.Uint(key, &v, 0, 1'000'000'000));
  *out = v;
  return Status::Ok();
}

Status ReadLimits(TableReader& t, LimitsConfig* l) {
  MUSTER_RETURN_IF_ERROR(OptionalUint(t, "grp_jobs", &l->grp_jobs));
  MUSTER_RETURN_IF_ERROR(OptionalUint(t, "grp_submit_jobs", &l->grp_submit));
  MUSTER_RETURN_IF_ERROR(OptionalUint(t, "grp_nodes", &l->grp_nodes));
  MUSTER_RETURN_IF_ERROR(GpuLimit(t, "grp_gpus", &l->grp_gpus));
  MUSTER_RETURN_IF_ERROR(OptionalUint(t, "max_jobs_per_user", &l->max_jobs_per_user));
  MUSTER_RETURN_IF_ERROR(OptionalUint(t, "max_submit_jobs_per_user", &l->max_submit_per_user));
  MUSTER_RETURN_IF_ERROR(GpuLimit(t, "max_gpus_per_user", &l->max_gpus_per_user));
  MUSTER_RETURN_IF_ERROR(OptionalUint(t, "max_gpus_per_job", &l->max_gpus_per_job));
  MUSTER_RETURN_IF_ERROR(OptionalUint(t, "max_nodes_per_job", &l->max_nodes_per_job));
  MUSTER_RETURN_IF_ERROR(OptionalUint(t, "grp_stored_mb", &l->grp_stored_mb));
  MUSTER_RETURN_IF_ERROR(OptionalUint(t, "max_stored_mb_per_user", &l->max_stored_mb_per_user));
  if (t.Has("max_wall")) {
    int64_t wall = 0;
    MUSTER_RETURN_IF_ERROR(t.TimeLimit("max_wall", &wall));
    l->max_wall_ms = wall;
  }
  return Status::Ok();
}

// quota = { h100 = 16 } or { h100 = { guaranteed = 16, max = 32, lending_limit = 8 } }.
Status ReadQuotas(TableReader& t, const std::string& source,
                  std::map<std::string, QuotaConfig>* out) {
  const toml::node* n = t.Get("quota");
  if (!n) return Status::Ok();
  const toml::table* tbl = n->as_table();
  if (!tbl) return t.Error(n, "quota", "expected a table such as { h100 = { guaranteed = 16 } }");
  for (auto&& [k, v] : *tbl) {
    const std::string type(k.str());
    if (!IsValidAccountName(type)) return t.Error(&v, "quota", "bad GPU type '" + type + "'");
    QuotaConfig q;
    if (v.is_integer()) {
      MUSTER_RETURN_IF_ERROR(GpuCount(t, v, "quota." + type, &q.guaranteed));
    } else if (const toml::table* qt = v.as_table()) {
      TableReader r(*qt, t.Qualified("quota." + type), source);
      MUSTER_RETURN_IF_ERROR(r.Uint("guaranteed", &q.guaranteed, 0, 1'000'000'000));
      MUSTER_RETURN_IF_ERROR(OptionalUint(r, "max", &q.max));
      MUSTER_RETURN_IF_ERROR(OptionalUint(r, "lending_limit", &q.lending_limit));
      MUSTER_RETURN_IF_ERROR(r.CheckNoUnknownKeys());
    } else {
      return t.Error(&v, "quota." + type,
                     "expected a number of GPUs or { guaranteed = N, max = N, lending_limit = N }");
    }
    if (q.max && *q.max < q.guaranteed) {
      return t.Error(&v, "quota." + type, "max is below guaranteed");
    }
    if (q.lending_limit && *q.lending_limit > q.guaranteed) {
      return t.Error(&v, "quota." + type, "lending_limit is above guaranteed");
    }
    (*out)[type] = q;
  }
  return Status::Ok();
}

Status ReadName(TableReader& t, const toml::table& tbl, const char* what, std::string* out) {
  MUSTER_RETURN_IF_ERROR(t.String("name", out));
  if (!IsValidAccountName(*out) || *out == "root") {
    return t.Error(&tbl, "name",
                   std::string("every [[") + what +
                       "]] needs a name of letters, digits, '.', '_' and '-' (not \"root\")");
  }
  return Status::Ok();
}

}  // namespace

Status ParseSharing(TableReader& r, Config& c, const std::string& source) {
  // [licenses]: name = count, the cluster's licenses (Slurm's Licenses=).
  if (const toml::node* n = r.Get("licenses")) {
    const toml::table* tbl = n->as_table();
    if (!tbl) return r.Error(n, "licenses", "expected a table such as { matlab = 10 }");
    if (tbl->size() > 1024) return r.Error(n, "licenses", "at most 1024 licenses");
    for (auto&& [k, v] : *tbl) {
      const std::string name(k.str());
      if (!IsValidAccountName(name))
        return r.Error(&v, "licenses", "bad license name '" + name + "'");
      if (!v.is_integer() || *v.value<int64_t>() < 0 || *v.value<int64_t>() > 1'000'000'000) {
        return r.Error(&v, "licenses." + name, "expected a count (0 to 1000000000)");
      }
      c.licenses[name] = static_cast<uint32_t>(*v.value<int64_t>());
    }
  }
  MUSTER_RETURN_IF_ERROR(TableArray(
      r, "accounts",
      [&](TableReader& t, const toml::table& tbl) {
        AccountConfig a;
        MUSTER_RETURN_IF_ERROR(ReadName(t, tbl, "accounts", &a.name));
        MUSTER_RETURN_IF_ERROR(t.String("parent", &a.parent));
        MUSTER_RETURN_IF_ERROR(t.Uint("shares", &a.shares, 1, 1'000'000));
        MUSTER_RETURN_IF_ERROR(t.String("description", &a.description));
        MUSTER_RETURN_IF_ERROR(t.StringList("users", &a.users));
        for (const auto& u : a.users) {
          if (!IsValidAccountName(u))
            return t.Error(t.Get("users"), "users", "bad user name '" + u + "'");
        }
        MUSTER_RETURN_IF_ERROR(t.StringList("coordinators", &a.coordinators));
        for (const auto& u : a.coordinators) {
          if (!IsValidAccountName(u))
            return t.Error(t.Get("coordinators"), "coordinators", "bad user name '" + u + "'");
        }
        MUSTER_RETURN_IF_ERROR(ReadLimits(t, &a.limits));
        if (t.Has("max_gpus_per_user")) {
          // As sacctmgr refuses it live: it would be enforced under a QoS's reason.
          return t.Error(t.Get("max_gpus_per_user"), "max_gpus_per_user",
                         "GPUs per user is a QoS limit (MaxTRESPerUser); an account limits its "
                         "users' GPUs together with grp_gpus");
        }
        MUSTER_RETURN_IF_ERROR(t.StringList("qos", &a.qos));
        MUSTER_RETURN_IF_ERROR(t.String("default_qos", &a.default_qos));
        MUSTER_RETURN_IF_ERROR(ReadQuotas(t, source, &a.quotas));
        MUSTER_RETURN_IF_ERROR(t.String("cohort", &a.cohort));
        if (!a.cohort.empty() && !IsValidAccountName(a.cohort)) {
          return t.Error(t.Get("cohort"), "cohort", "bad cohort name '" + a.cohort + "'");
        }
        c.accounts.push_back(std::move(a));
        return Status::Ok();
      },
      source));

  return TableArray(
      r, "qos",
      [&](TableReader& t, const toml::table& tbl) {
        QosConfig q;
        MUSTER_RETURN_IF_ERROR(ReadName(t, tbl, "qos", &q.name));
        MUSTER_RETURN_IF_ERROR(t.String("description", &q.description));
        MUSTER_RETURN_IF_ERROR(t.Uint("priority", &q.priority, 0, 1'000'000));
        MUSTER_RETURN_IF_ERROR(t.StringList("preempt", &q.preempt));
        MUSTER_RETURN_IF_ERROR(t.String("preempt_mode", &q.preempt_mode));
        q.preempt_mode = ToLower(q.preempt_mode);
        if (q.preempt_mode != "requeue" && q.preempt_mode != "cancel" &&
            q.preempt_mode != "suspend") {
          return t.Error(t.Get("preempt_mode"), "preempt_mode",
                         "expected requeue, cancel or suspend");
        }
        MUSTER_RETURN_IF_ERROR(t.Double("usage_factor", &q.usage_factor, 0, 1000));
        int64_t grace = 0;
        MUSTER_RETURN_IF_ERROR(t.Duration("grace_time", &grace));
        q.grace_time_ms = static_cast<uint64_t>(grace);
        std::vector<std::string> flags;
        MUSTER_RETURN_IF_ERROR(t.StringList("flags", &flags));
        for (const std::string& f : flags) {
          if (ToLower(f) != "denyonlimit") {
            return t.Error(t.Get("flags"), "flags",
                           "unknown flag '" + f + "' (supported: DenyOnLimit)");
          }
          q.deny_on_limit = true;
        }
        MUSTER_RETURN_IF_ERROR(ReadLimits(t, &q.limits));
        c.qos.push_back(std::move(q));
        return Status::Ok();
      },
      source);
}

namespace {

// The accounts form one tree under "root": unique names, known parents, no cycles. Sorted so
// that parents come before their children.
Status ValidateAccounts(std::vector<AccountConfig>& accounts, const std::string& source) {
  std::map<std::string, const AccountConfig*> by_name;
  for (const auto& a : accounts) {
    if (!by_name.emplace(a.name, &a).second) {
      return InvalidArgument(source + ": account '" + a.name + "' is defined twice");
    }
  }
  std::vector<AccountConfig> ordered;
  std::set<std::string> placed = {"root"};
  while (ordered.size() < accounts.size()) {
    const size_t before = ordered.size();
    for (const auto& a : accounts) {
      if (placed.count(a.name) || !placed.count(a.parent)) continue;
      placed.insert(a.name);
      ordered.push_back(a);
    }
    if (ordered.size() == before) {
      for (const auto& a : accounts) {
        if (placed.count(a.name)) continue;
        return InvalidArgument(
            source + ": account '" + a.name + "' has parent '" + a.parent + "', which " +
            (by_name.count(a.parent) ? "is its own descendant (a cycle)" : "is not defined"));
      }
    }
  }
  accounts = std::move(ordered);
  return Status::Ok();
}

}  // namespace

Status ValidateSharing(Config& c, const std::string& source) {
  MUSTER_RETURN_IF_ERROR(ValidateAccounts(c.accounts, source));
  std::map<std::string, const QosConfig*> qos = {{"normal", nullptr}};
  for (const QosConfig& q : c.qos) {
    if (qos.count(q.name) && qos[q.name]) {
      return InvalidArgument(source + ": qos '" + q.name + "' is defined twice");
    }
    qos[q.name] = &q;
  }
  for (const QosConfig& q : c.qos) {
    for (const std::string& p : q.preempt) {
      if (!qos.count(p)) {
        return InvalidArgument(source + ": qos '" + q.name + "' preempts '" + p +
                               "', which is not defined");
      }
      if (p == q.name) {
        return InvalidArgument(source + ": qos '" + q.name + "' cannot preempt itself");
      }
    }
  }
  // Preemption must be one-way: were A to preempt B and B (through others) A, their jobs could
  // push each other off the cluster forever.
  for (const QosConfig& q : c.qos) {
    std::set<std::string> seen;
    std::vector<std::string> todo(q.preempt.begin(), q.preempt.end());
    while (!todo.empty()) {
      const std::string at = todo.back();
      todo.pop_back();
      if (at == q.name) {
        return InvalidArgument(source + ": qos '" + q.name +
                               "' preempts a QoS that (through its own preempt list) preempts '" +
                               q.name + "' back: preemption must not go in a circle");
      }
      if (!seen.insert(at).second || !qos[at]) continue;
      todo.insert(todo.end(), qos[at]->preempt.begin(), qos[at]->preempt.end());
    }
  }
  for (const AccountConfig& a : c.accounts) {
    for (const std::string& q : a.qos) {
      if (!qos.count(q)) {
        return InvalidArgument(source + ": account '" + a.name + "' allows qos '" + q +
                               "', which is not defined");
      }
    }
    if (!a.default_qos.empty()) {
      if (!qos.count(a.default_qos)) {
        return InvalidArgument(source + ": account '" + a.name + "' has default_qos '" +
                               a.default_qos + "', which is not defined");
      }
      if (!a.qos.empty() && std::find(a.qos.begin(), a.qos.end(), a.default_qos) == a.qos.end()) {
        return InvalidArgument(source + ": account '" + a.name + "' has default_qos '" +
                               a.default_qos + "', which is not in its qos list");
      }
    }
  }
  return Status::Ok();
}

}  // namespace muster::config_internal
