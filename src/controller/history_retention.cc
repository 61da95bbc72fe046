#include "history_retention.h"

#include <spdlog/spdlog.h>

namespace muster::controller {

void HistoryRetention::Purge(TimeMs now) {
  const uint32_t days = ctx_.scheduling().accounting_retention_days;
  constexpr TimeMs kEvery = 3'600'000;  // hourly is plenty for a retention counted in days
  if (days == 0 || (last_purge_ms_ != 0 && now - last_purge_ms_ < kEvery)) return;
  last_purge_ms_ = now;
  const TimeMs cutoff = now - static_cast<TimeMs>(days) * 86'400'000;
  store::Mutation m;
  // Ids grow with time, so the old records come first; a late-ending job with a small id waits
  // for a later purge. Bounded so that one purge never holds the strand for long.
  Status s = ctx_.store().ScanHistory(0, [&](const v1::JobRecord& r) {
    const TimeMs ended = r.end_time_ms() > 0 ? r.end_time_ms() : r.submit_time_ms();
    if (ended >= cutoff) return false;
    m.DeleteHistory(r.id());
    return m.size() < 10'000;
  });
  if (s.ok()) s = ctx_.Commit(m, store::Durability::kBuffered);
  if (!s.ok()) spdlog::error("accounting retention purge failed (will retry): {}", s.ToString());
  if (!m.empty() && s.ok()) {
    spdlog::info("accounting: dropped {} job record(s) older than {} days", m.size(), days);
  }
}

}  // namespace muster::controller
