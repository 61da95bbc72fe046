#include "request_rate.h"

#include <gtest/gtest.h>

namespace muster::rpc {
namespace {

using Clock = RequestRateLimiter::Clock;
using std::chrono::milliseconds;

TEST(RequestRateLimiterTest, ABurstPassesThenRequestsWaitTheirTurn) {
  RequestRateLimiter limiter(10, 5);  // 10 per second, 5 at once
  const Clock::time_point t0 = Clock::now();
  const milliseconds max_wait(250);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(limiter.Reserve(1000, t0, max_wait), Clock::duration::zero());
  // Then one every 100 ms, each promised a later slot than the last.
  auto w6 = limiter.Reserve(1000, t0, max_wait);
  auto w7 = limiter.Reserve(1000, t0, max_wait);
  ASSERT_TRUE(w6 && w7);
  EXPECT_NEAR(std::chrono::duration<double>(*w6).count(), 0.1, 0.001);
  EXPECT_NEAR(std::chrono::duration<double>(*w7).count(), 0.2, 0.001);
  EXPECT_FALSE(limiter.Reserve(1000, t0, max_wait)) << "a 300 ms wait is refused";
  // Another user has a bucket of its own; root has none.
  EXPECT_EQ(limiter.Reserve(1001, t0, max_wait), Clock::duration::zero());
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(limiter.Reserve(0, t0, max_wait), Clock::duration::zero());
  // Idle for a while, the bucket is full again (and no fuller).
  const Clock::time_point later = t0 + std::chrono::seconds(10);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(limiter.Reserve(1000, later, max_wait), Clock::duration::zero());
  }
  EXPECT_GT(*limiter.Reserve(1000, later, max_wait), Clock::duration::zero());
}

TEST(RequestRateLimiterTest, ZeroRateMeansNoLimit) {
  RequestRateLimiter limiter(0, 1);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(limiter.Reserve(1000, Clock::now(), milliseconds(0)), Clock::duration::zero());
  }
}

}  // namespace
}  // namespace muster::rpc
