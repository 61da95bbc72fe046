// Refusals are logged, but a flood of them must not flood the log: at most a few lines per
// window. Thread-safe. Leaves the logging to the caller (common never loads spdlog).
#pragma once

#include <chrono>
#include <mutex>

namespace muster {

class LogLimit {
 public:
  // Whether to log this one. When a window ends, `*dropped` gets how many were not logged in
  // it (0 otherwise), for the caller to say so once.
  bool Allow(long* dropped) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> l(mu_);
    *dropped = 0;
    if (now - window_start_ > std::chrono::seconds(10)) {
      *dropped = suppressed_;
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
  std::mutex mu_;
  std::chrono::steady_clock::time_point window_start_{};
  int logged_ = 0;
  long suppressed_ = 0;
};

}  // namespace muster
