#include "muster/rpc/asio_executor.h"

#include <future>

namespace muster::rpc {

namespace asio = boost::asio;

AsioExecutor::AsioExecutor() : strand_(asio::make_strand(io_)) {}

AsioExecutor::~AsioExecutor() { Stop(); }

void AsioExecutor::Post(std::function<void()> fn) { asio::post(strand_, std::move(fn)); }

void AsioExecutor::PostAfter(int64_t delay_ms, std::function<void()> fn) {
  if (strand_.running_in_this_thread()) {
    StartTimer(delay_ms, std::move(fn));
  } else {
    asio::post(strand_, [this, delay_ms, fn = std::move(fn)]() mutable {
      StartTimer(delay_ms, std::move(fn));
    });
  }
}

void AsioExecutor::StartTimer(int64_t delay_ms, std::function<void()> fn) {
  if (stopped_) return;
  auto timer = std::make_shared<Timer>(strand_, std::chrono::milliseconds(delay_ms));
  timers_.insert(timer);
  timer->async_wait([this, timer, fn = std::move(fn)](boost::system::error_code ec) {
    timers_.erase(timer);
    if (!ec) fn();
  });
}

void AsioExecutor::Offload(Lane lane, std::function<void()> fn) {
  switch (lane) {
    case Lane::kScheduling:
      return asio::post(sched_pool_, std::move(fn));
    case Lane::kQuery:
      return asio::post(query_pool_, std::move(fn));
    case Lane::kSync:
      return asio::post(sync_pool_, std::move(fn));
  }
}

void AsioExecutor::Start(int threads) {
  work_ = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(
      io_.get_executor());
  for (int i = 0; i < std::max(1, threads); ++i) {
    threads_.emplace_back([this] { io_.run(); });
  }
}

void AsioExecutor::RunOnStrandAndWait(const std::function<void()>& fn) {
  std::promise<void> done;
  asio::post(strand_, [&] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

void AsioExecutor::Stop() {
  if (!threads_.empty()) {
    RunOnStrandAndWait([this] {
      stopped_ = true;
      for (const auto& t : timers_) t->cancel();
    });
  }
  work_.reset();
  io_.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  sched_pool_.join();  // a pass in flight finishes; its result is dropped with the io_context
  query_pool_.join();  // a scan in flight finishes before the store goes away
  sync_pool_.join();   // so does a sync
}

}  // namespace muster::rpc
