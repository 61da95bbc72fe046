// The audit log: every privileged action (an admin's or an operator's), and every attempt on what
// was not the caller's, with who, from where, when and what came of it. Kept in the store (its
// own family, in time order) for scheduling.audit_retention_days, read by `muster audit`.
//
// Strand-confined.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine_context.h"
#include "muster/common/clock.h"
#include "muster/controller/access.h"
#include "muster/controller/engine.h"
#include "muster/v1/controller.pb.h"
#include "retention.h"

namespace muster::controller {

// "job 12", "jobs 12,13,14 (3)"; at most 20 ids named, then "...".
std::string JobsTarget(const std::vector<uint64_t>& ids);

class AuditLog {
 public:
  explicit AuditLog(const EngineContext& ctx);

  // Writes one entry before the reply leaves: synced when the action was allowed (it changed
  // something), buffered when it was refused (a flood of refusals must not cost an fsync each).
  // A failed write is logged, never fatal: the action itself is already durable.
  void Record(const Caller& caller, std::string action, std::string target, std::string detail,
              bool allowed, const Status& result, TimeMs now);

  // Admins and operators only.
  Result<v1::ListAuditResponse> List(const Caller& caller, const v1::ListAuditRequest& req,
                                     TimeMs now) const;

  // Drops entries older than the retention, hourly, a bounded number at a time.
  void Purge(TimeMs now);

 private:
  const EngineContext& ctx_;
  uint32_t seq_ = 0;
  RetentionPurge purge_;
};

}  // namespace muster::controller
