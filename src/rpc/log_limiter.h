// Refusals are logged, but a flood of them must not flood the log: at most a few per window,
// then one line saying how many more there were. Thread-safe.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>
#include <string>

namespace muster::rpc {

class LogLimiter {
 public:
  // summary: the line for what was not logged, with {} for how many.
  explicit LogLimiter(std::string summary) : summary_(std::move(summary)) {}

  bool Allow() {
    auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> l(mu_);
    if (now - window_start_ > std::chrono::seconds(10)) {
      if (suppressed_ > 0) spdlog::warn(fmt::runtime(summary_), suppressed_);
      window_start_ = now;
      logged_ = 0;
      suppressed_ = 0;
    }
    if (logged_ < 10) {
      ++logged_;
      return true;
    }
    ++suppressed_;
    return false;
  }

 private:
  const std::string summary_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point window_start_{};
  int logged_ = 0;
  long suppressed_ = 0;
};

}  // namespace muster::rpc
