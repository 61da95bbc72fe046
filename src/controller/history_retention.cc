#include "history_retention.h"

namespace muster::controller {

HistoryRetention::HistoryRetention(const EngineContext& ctx)
    : ctx_(ctx), purge_(ctx, "accounting", [this](TimeMs cutoff, store::Mutation& m) {
        // Ids grow with time, so the old records come first; a late-ending job with a small id
        // waits for a later purge.
        return ctx_.store().ScanHistory(0, [&](const v1::JobRecord& r) {
          const TimeMs ended = r.end_time_ms() > 0 ? r.end_time_ms() : r.submit_time_ms();
          if (ended >= cutoff) return false;
          m.DeleteHistory(r.id());
          return m.size() < RetentionPurge::kMaxAtOnce;
        });
      }) {}

void HistoryRetention::Purge(TimeMs now) {
  purge_.Run(ctx_.scheduling().accounting_retention_days, now);
}

}  // namespace muster::controller
