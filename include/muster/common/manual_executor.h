// An Executor that runs nothing by itself: the caller runs what is queued (RunUntilIdle) and moves
// a ManualClock (AdvanceMs), which runs the timers that fall due, in time order. Work offloaded
// runs in turn like posted work. The controller runner under it is deterministic and needs no
// sockets or threads, and so are the agent's job lifecycles: the tests' way to
// drive them (Mesos's Clock::advance).
//
// Thread-compatible: drive it from one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <utility>

#include "muster/common/clock.h"
#include "muster/common/executor.h"

namespace muster {

class ManualExecutor final : public Executor {
 public:
  explicit ManualExecutor(ManualClock* clock) : clock_(clock) {}

  void Post(std::function<void()> fn) override;
  void PostAfter(int64_t delay_ms, std::function<void()> fn) override;
  void Offload(Lane lane, std::function<void()> fn) override;

  // Runs queued work (and whatever it queues) until none is left; timers not yet due stay.
  // Returns how many items ran.
  size_t RunUntilIdle();
  // Moves the clock forward by `ms`, stopping at each timer that falls due on the way to run it
  // (and what it queues) at its time.
  void AdvanceMs(TimeMs ms);
  size_t queued() const { return queue_.size(); }
  // When the earliest timer falls due; -1: none is set.
  TimeMs next_due_ms() const { return timers_.empty() ? -1 : timers_.begin()->first.first; }
  size_t timers() const { return timers_.size(); }

 private:
  ManualClock* clock_;
  std::deque<std::function<void()>> queue_;
  // (due time, sequence) -> work: equal times run in the order they were set.
  std::map<std::pair<TimeMs, uint64_t>, std::function<void()>> timers_;
  uint64_t seq_ = 0;
};

}  // namespace muster
