// What the controller keeps for a number of days (accounting history, the audit log): dropped
// hourly, a bounded number at a time, so that one purge never holds the strand for long.
//
// Strand-confined.
#pragma once

#include <functional>
#include <string>

#include "engine_context.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"

namespace muster::controller {

class RetentionPurge {
 public:
  // At most this many records go in one purge; the rest wait for the next.
  static constexpr size_t kMaxAtOnce = 10'000;
  // Stages the deletions of records older than `cutoff` into `m` (in age order, stopping at the
  // first younger one or at kMaxAtOnce).
  using Stage = std::function<Status(TimeMs cutoff, store::Mutation& m)>;

  RetentionPurge(const EngineContext& ctx, std::string what, Stage stage)
      : ctx_(ctx), what_(std::move(what)), stage_(std::move(stage)) {}
  // Purges what is older than `days` (0: kept forever), when an hour has passed since the last.
  void Run(uint32_t days, TimeMs now);

 private:
  const EngineContext& ctx_;
  const std::string what_;  // "accounting", "audit": for the log
  const Stage stage_;
  TimeMs last_purge_ms_ = 0;
};

}  // namespace muster::controller
