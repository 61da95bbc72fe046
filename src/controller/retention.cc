#include "retention.h"

#include <spdlog/spdlog.h>

namespace muster::controller {

void RetentionPurge::Run(uint32_t days, TimeMs now) {
  constexpr TimeMs kEvery = 3'600'000;  // hourly is plenty for a retention counted in days
  if (days == 0 || (last_purge_ms_ != 0 && now - last_purge_ms_ < kEvery)) return;
  last_purge_ms_ = now;
  const TimeMs cutoff = now - static_cast<TimeMs>(days) * 86'400'000;
  store::Mutation m;
  Status s = stage_(cutoff, m);
  if (s.ok()) s = ctx_.Commit(m, store::Durability::kBuffered);
  if (!s.ok()) {
    spdlog::error("{} retention purge failed (will retry): {}", what_, s.ToString());
  } else if (!m.empty()) {
    spdlog::info("{}: dropped {} record(s) older than {} days", what_, m.size(), days);
  }
}

}  // namespace muster::controller
