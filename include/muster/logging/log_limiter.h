// LogLimit with the line for what it left out: a daemon's refusals of hostile peers are logged,
// but never faster than a peer can make them cost. Thread-safe.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "muster/common/log_limit.h"

namespace muster {

class LogLimiter {
 public:
  // summary: the line for what was not logged, with {} for how many.
  explicit LogLimiter(std::string summary) : summary_(std::move(summary)) {}

  bool Allow() {
    long dropped = 0;
    const bool allow = limit_.Allow(&dropped);
    if (dropped > 0) spdlog::warn(fmt::runtime(summary_), dropped);
    return allow;
  }

 private:
  const std::string summary_;
  LogLimit limit_;
};

}  // namespace muster
