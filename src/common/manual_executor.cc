#include "muster/common/manual_executor.h"

#include <algorithm>

namespace muster {

void ManualExecutor::Post(std::function<void()> fn) { queue_.push_back(std::move(fn)); }

void ManualExecutor::PostAfter(int64_t delay_ms, std::function<void()> fn) {
  // As a real timer: one already due runs at the next advance, never in the past.
  timers_.emplace(std::make_pair(clock_->NowMs() + std::max<int64_t>(0, delay_ms), seq_++),
                  std::move(fn));
}

void ManualExecutor::Offload(Lane, std::function<void()> fn) { queue_.push_back(std::move(fn)); }

size_t ManualExecutor::RunUntilIdle() {
  size_t ran = 0;
  while (!queue_.empty()) {
    std::function<void()> fn = std::move(queue_.front());
    queue_.pop_front();
    fn();
    ++ran;
  }
  return ran;
}

void ManualExecutor::AdvanceMs(TimeMs ms) {
  const TimeMs until = clock_->NowMs() + ms;
  RunUntilIdle();
  while (!timers_.empty() && timers_.begin()->first.first <= until) {
    auto it = timers_.begin();
    if (it->first.first > clock_->NowMs()) clock_->SetMs(it->first.first);
    std::function<void()> fn = std::move(it->second);
    timers_.erase(it);
    fn();
    RunUntilIdle();
  }
  clock_->SetMs(until);
}

}  // namespace muster
