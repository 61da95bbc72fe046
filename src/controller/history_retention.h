// The accounting history's retention: archived job records older than accounting_retention_days
// are dropped, hourly, a bounded number at a time.
//
// Strand-confined.
#pragma once

#include "engine_context.h"
#include "muster/common/clock.h"
#include "retention.h"

namespace muster::controller {

class HistoryRetention {
 public:
  explicit HistoryRetention(const EngineContext& ctx);
  void Purge(TimeMs now);

 private:
  const EngineContext& ctx_;
  RetentionPurge purge_;
};

}  // namespace muster::controller
