#include "request_rate.h"

namespace muster::rpc {

std::optional<RequestRateLimiter::Clock::duration> RequestRateLimiter::Reserve(
    uint32_t uid, Clock::time_point now, Clock::duration max_wait) {
  if (rate_ <= 0 || uid == 0) return Clock::duration::zero();
  std::lock_guard<std::mutex> l(mu_);
  if (buckets_.size() > 100'000) {
    // Forget the buckets that have refilled: they hold nothing a new one would not.
    std::erase_if(buckets_, [&](const auto& e) {
      const double seconds = std::chrono::duration<double>(now - e.second.last).count();
      return e.second.tokens + seconds * rate_ >= burst_;
    });
  }
  auto [it, fresh] = buckets_.try_emplace(uid, Bucket{burst_, now});
  Bucket& b = it->second;
  if (!fresh && now > b.last) {
    const double seconds = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(burst_, b.tokens + seconds * rate_);
    b.last = now;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return Clock::duration::zero();
  }
  const auto wait = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>((1 - b.tokens) / rate_));
  if (wait > max_wait) return std::nullopt;
  b.tokens -= 1;
  return wait;
}

}  // namespace muster::rpc
