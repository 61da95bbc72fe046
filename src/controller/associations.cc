#include "associations.h"

#include <algorithm>

#include "muster/common/config.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"

namespace muster::controller {

Result<std::vector<std::string>> EditQosList(const std::string& edit,
                                             std::vector<std::string> base) {
  const std::vector<std::string> items = Split(edit, ',', true);
  if (items.size() > 64) return InvalidArgument("at most 64 QoS in a list");
  const bool all_signed =
      !items.empty() && std::all_of(items.begin(), items.end(), [](const std::string& s) {
        return s.size() > 1 && (s[0] == '+' || s[0] == '-');
      });
  if (all_signed && base.empty()) {
    // No list is "any QoS": adding one would narrow it to that one, removing would change nothing.
    return InvalidArgument(
        "qos+= and qos-= edit a list of QoS, and none is set here or above (any QoS may be "
        "used): give the whole list with qos=");
  }
  if (!all_signed) base.clear();
  for (const std::string& item : items) {
    const bool remove = all_signed && item[0] == '-';
    const std::string name = all_signed ? item.substr(1) : item;
    if (!IsValidAccountName(name)) {
      return InvalidArgument("bad QoS name '" + name.substr(0, 64) + "'");
    }
    auto at = std::find(base.begin(), base.end(), name);
    if (remove) {
      if (at != base.end()) base.erase(at);
    } else if (at == base.end()) {
      base.push_back(name);
    }
  }
  if (base.size() > 64) return InvalidArgument("at most 64 QoS in a list");
  return base;
}

void ClearOverridden(const v1::UsageLimits& own, v1::UsageLimits* inherited) {
  if (own.has_max_jobs_per_user()) inherited->clear_max_jobs_per_user();
  if (own.has_max_submit_per_user()) inherited->clear_max_submit_per_user();
  if (own.has_max_gpus_per_job()) inherited->clear_max_gpus_per_job();
  if (own.has_max_nodes_per_job()) inherited->clear_max_nodes_per_job();
  if (own.has_max_wall_ms()) inherited->clear_max_wall_ms();
}

bool OverridesAny(const v1::UsageLimits& own) {
  return own.has_max_jobs_per_user() || own.has_max_submit_per_user() ||
         own.has_max_gpus_per_job() || own.has_max_nodes_per_job() || own.has_max_wall_ms();
}

void TightenMax(const v1::UsageLimits& l, v1::UsageLimits* bound) {
  auto take = [](bool has, auto v, bool bound_has, auto bound_v, auto set) {
    if (has && (!bound_has || v < bound_v)) set(v);
  };
  take(l.has_max_jobs_per_user(), l.max_jobs_per_user(), bound->has_max_jobs_per_user(),
       bound->max_jobs_per_user(), [&](uint32_t v) { bound->set_max_jobs_per_user(v); });
  take(l.has_max_submit_per_user(), l.max_submit_per_user(), bound->has_max_submit_per_user(),
       bound->max_submit_per_user(), [&](uint32_t v) { bound->set_max_submit_per_user(v); });
  take(l.has_max_gpus_per_job(), l.max_gpus_per_job(), bound->has_max_gpus_per_job(),
       bound->max_gpus_per_job(), [&](uint32_t v) { bound->set_max_gpus_per_job(v); });
  take(l.has_max_nodes_per_job(), l.max_nodes_per_job(), bound->has_max_nodes_per_job(),
       bound->max_nodes_per_job(), [&](uint32_t v) { bound->set_max_nodes_per_job(v); });
  take(l.has_max_wall_ms(), l.max_wall_ms(), bound->has_max_wall_ms(), bound->max_wall_ms(),
       [&](uint64_t v) { bound->set_max_wall_ms(v); });
}

std::string LoosenedLimits(const v1::UsageLimits& own, const v1::UsageLimits& bound) {
  std::vector<std::string> out;
  auto check = [&](const char* name, bool has, uint64_t v, bool bound_has, uint64_t bound_v,
                   bool wall) {
    if (!has || !bound_has || v <= bound_v) return;
    auto words = [&](uint64_t x) {
      return wall ? FormatDuration(static_cast<int64_t>(x)) : std::to_string(x);
    };
    out.push_back(std::string(name) + "=" + words(v) + " (the accounts allow " + words(bound_v) +
                  ")");
  };
  check("MaxJobs", own.has_max_jobs_per_user(), own.max_jobs_per_user(),
        bound.has_max_jobs_per_user(), bound.max_jobs_per_user(), false);
  check("MaxSubmitJobs", own.has_max_submit_per_user(), own.max_submit_per_user(),
        bound.has_max_submit_per_user(), bound.max_submit_per_user(), false);
  check("MaxTRES=gres/gpu", own.has_max_gpus_per_job(), own.max_gpus_per_job(),
        bound.has_max_gpus_per_job(), bound.max_gpus_per_job(), false);
  check("MaxTRES=node", own.has_max_nodes_per_job(), own.max_nodes_per_job(),
        bound.has_max_nodes_per_job(), bound.max_nodes_per_job(), false);
  check("MaxWall", own.has_max_wall_ms(), own.max_wall_ms(), bound.has_max_wall_ms(),
        bound.max_wall_ms(), true);
  return Join(out, ", ");
}

Status CheckAssociationLimits(const v1::UsageLimits& patch) {
  if (patch.max_gpus_per_user_size() > 0) {
    return InvalidArgument(
        "GPUs per user is a QoS limit (MaxTRESPerUser); limit a user's GPUs in an account with "
        "GrpTRES on the user");
  }
  if (patch.has_grp_stored_mb() || patch.has_max_stored_mb_per_user()) {
    return InvalidArgument(
        "stored-bytes limits are an account's or a QoS's (GrpStoredMB, MaxStoredMBPerUser), "
        "not a user's");
  }
  return Status::Ok();
}

}  // namespace muster::controller
