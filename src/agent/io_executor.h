// The agent's Executor: its io thread. Timers are Asio timers on it; the agent offloads nothing,
// so Offload runs in turn like Post. Tests put a ManualExecutor in its place to drive the job
// lifecycles on a virtual clock.
//
// Thread-safe (as Asio's post is).
#pragma once

// clang-format off
#include <utility>  // Asio 1.74 uses std::exchange without including <utility> itself
#include <boost/asio.hpp>
// clang-format on
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "muster/common/executor.h"

namespace muster::agent {

class IoExecutor final : public Executor {
 public:
  explicit IoExecutor(boost::asio::io_context& io) : io_(io) {}

  void Post(std::function<void()> fn) override { boost::asio::post(io_, std::move(fn)); }
  void PostAfter(int64_t delay_ms, std::function<void()> fn) override {
    auto timer = std::make_shared<boost::asio::steady_timer>(
        io_, std::chrono::milliseconds(std::max<int64_t>(0, delay_ms)));
    timer->async_wait([timer, fn = std::move(fn)](boost::system::error_code ec) {
      if (!ec) fn();
    });
  }
  void Offload(Lane, std::function<void()> fn) override { Post(std::move(fn)); }

 private:
  boost::asio::io_context& io_;
};

}  // namespace muster::agent
