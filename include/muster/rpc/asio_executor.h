// The controller's executor on Asio: an io_context run by a few threads, one strand that owns the
// engine (and its timers), and one worker thread per off-strand lane (the scheduling pass's core,
// sacct's archive scan).
//
// Thread-safe.
#pragma once

// clang-format off
#include <utility>  // Asio 1.74 uses std::exchange without including <utility> itself
#include <boost/asio.hpp>
// clang-format on
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "muster/common/executor.h"

namespace muster::rpc {

class AsioExecutor final : public Executor {
 public:
  AsioExecutor();
  ~AsioExecutor() override;

  void Post(std::function<void()> fn) override;
  void PostAfter(int64_t delay_ms, std::function<void()> fn) override;
  void Offload(Lane lane, std::function<void()> fn) override;

  boost::asio::io_context& io() { return io_; }
  // Runs the io_context on `threads` threads.
  void Start(int threads);
  // Runs `fn` on the strand and waits until it has run.
  void RunOnStrandAndWait(const std::function<void()>& fn);
  // Cancels the timers, stops the io threads (queued work is dropped with the io_context), and
  // lets the workers finish what they run. Idempotent.
  void Stop();

 private:
  using Timer = boost::asio::steady_timer;
  void StartTimer(int64_t delay_ms, std::function<void()> fn);

  boost::asio::io_context io_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::thread_pool sched_pool_{1};
  boost::asio::thread_pool query_pool_{1};
  boost::asio::thread_pool sync_pool_{1};
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::set<std::shared_ptr<Timer>> timers_;  // strand-confined: cancelled at Stop
  bool stopped_ = false;
};

}  // namespace muster::rpc
