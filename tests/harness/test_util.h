// Test helpers: polling for a condition instead of sleeping for a guessed time.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace muster::testing {

// Polls `pred` every few milliseconds until it holds or `timeout_ms` passes.
inline bool WaitFor(const std::function<bool()>& pred, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace muster::testing

// Asserts that `cond` becomes true within timeout_ms (Kudu's ASSERT_EVENTUALLY, simplified).
#define ASSERT_EVENTUALLY(cond, timeout_ms) \
  ASSERT_TRUE(::muster::testing::WaitFor([&]() -> bool { return (cond); }, (timeout_ms))) << #cond
