#include "audit_log.h"

#include <spdlog/spdlog.h>

#include "muster/controller/access.h"

namespace muster::controller {

std::string JobsTarget(const std::vector<uint64_t>& ids) {
  if (ids.size() == 1) return "job " + std::to_string(ids[0]);
  std::string out = "jobs ";
  for (size_t i = 0; i < ids.size() && i < 20; ++i) {
    out += (i ? "," : "") + std::to_string(ids[i]);
  }
  if (ids.size() > 20) out += ",...";
  return out + " (" + std::to_string(ids.size()) + ")";
}

AuditLog::AuditLog(const EngineContext& ctx)
    : ctx_(ctx), purge_(ctx, "audit", [this](TimeMs cutoff, store::Mutation& m) {
        return ctx_.store().ScanAudit(store::Mutation::AuditKey(0, 0, 0),
                                      [&](const std::string& key, const v1::AuditEntry& e) {
                                        if (e.time_ms() >= cutoff) return false;
                                        m.DeleteAudit(key);
                                        return m.size() < RetentionPurge::kMaxAtOnce;
                                      });
      }) {}

void AuditLog::Record(const Caller& caller, std::string action, std::string target,
                      std::string detail, bool allowed, const Status& result, TimeMs now) {
  v1::AuditEntry e;
  e.set_time_ms(now);
  e.set_uid(caller.uid);
  e.set_user(caller.user);
  e.set_origin(caller.origin);
  e.set_role(std::string(RoleOf(caller)));
  e.set_action(std::move(action));
  e.set_target(std::move(target));
  e.set_detail(std::move(detail));
  e.set_allowed(allowed);
  e.set_result(result.ok() ? "OK" : result.message());
  spdlog::info("audit: user={} ({}, {}) {} {}{}: {}", e.user(), e.role(), e.origin(), e.action(),
               e.target(), allowed ? "" : " REFUSED", e.result());
  store::Mutation m;
  m.PutAudit(store::Mutation::AuditKey(now, static_cast<uint32_t>(ctx_.epoch()), seq_++), e);
  Status s = ctx_.Commit(m, allowed ? store::Durability::kSync : store::Durability::kBuffered);
  if (!s.ok()) spdlog::error("audit: cannot record the entry above: {}", s.ToString());
}

Result<v1::ListAuditResponse> AuditLog::List(const Caller& caller, const v1::ListAuditRequest& req,
                                             TimeMs now) const {
  MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kReadAudit));
  const TimeMs since = req.since_ms() > 0 ? req.since_ms() : now - 86'400'000;
  const TimeMs until = req.until_ms() > 0 ? req.until_ms() : now;
  const uint32_t limit = req.limit() == 0 ? 1000 : std::min<uint32_t>(req.limit(), 10'000);
  v1::ListAuditResponse resp;
  std::string last_key;
  auto visit = [&](const std::string& key, const v1::AuditEntry& e) {
    if (e.time_ms() > until || e.time_ms() < since) return false;
    if (!req.user().empty() && e.user() != req.user()) return true;
    if (static_cast<uint32_t>(resp.entries_size()) >= limit) {
      resp.set_truncated(true);
      resp.set_next_key(last_key);
      return false;
    }
    *resp.add_entries() = e;
    last_key = key;
    return true;
  };
  Status s;
  if (req.oldest_first()) {
    std::string from = store::Mutation::AuditKey(since, 0, 0);
    // Past the resume key: its successor is the key with a zero byte appended.
    if (!req.resume_key().empty() && req.resume_key() >= from) from = req.resume_key() + '\0';
    s = ctx_.store().ScanAudit(from, visit);
  } else {
    std::string below = store::Mutation::AuditKey(until + 1, 0, 0);
    if (!req.resume_key().empty() && req.resume_key() < below) below = req.resume_key();
    s = ctx_.store().ScanAuditNewestFirst(below, visit);
  }
  MUSTER_RETURN_IF_ERROR(s);
  return resp;
}

void AuditLog::Purge(TimeMs now) { purge_.Run(ctx_.scheduling().audit_retention_days, now); }

}  // namespace muster::controller
