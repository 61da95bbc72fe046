// Requests per second per user on the user API: a token bucket per uid. A user over its rate
// waits (the connection's next request is held back, not refused), so one user's flood cannot
// take the controller's strand from everyone else; a wait longer than a few seconds is refused
// instead, so that nothing piles up without end. Root is not limited.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace muster::rpc {

// Thread-safe.
class RequestRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // rate_per_s 0: no limit.
  RequestRateLimiter(uint32_t rate_per_s, uint32_t burst) : rate_(rate_per_s), burst_(burst) {}

  // Reserves a token for uid's next request: how long it must wait first (zero: none), or
  // nullopt when that would be longer than max_wait (refuse it; nothing is reserved).
  std::optional<Clock::duration> Reserve(uint32_t uid, Clock::time_point now,
                                         Clock::duration max_wait);

 private:
  struct Bucket {
    double tokens;  // may go below zero: requests already promised a later start
    Clock::time_point last;
  };
  const double rate_;
  const double burst_;
  std::mutex mu_;
  std::unordered_map<uint32_t, Bucket> buckets_;  // mu_
};

}  // namespace muster::rpc
