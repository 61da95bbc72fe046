// Time sources. Everything that needs "now" takes it as an argument or through a Clock, so tests
// and the simulator drive time themselves.
#pragma once

#include <atomic>
#include <cstdint>

namespace muster {

using TimeMs = int64_t;  // milliseconds since the Unix epoch (wall clock)

// Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimeMs NowMs() const = 0;
};

// The real wall clock. Thread-safe.
class SystemClock final : public Clock {
 public:
  TimeMs NowMs() const override;
  static SystemClock* Get();
};

// A clock that only moves when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimeMs start = 1'700'000'000'000) : now_(start) {}
  TimeMs NowMs() const override { return now_.load(); }
  void AdvanceMs(TimeMs d) { now_.fetch_add(d); }
  void SetMs(TimeMs t) { now_.store(t); }

 private:
  std::atomic<TimeMs> now_;
};

// Monotonic milliseconds for measuring intervals inside one process.
int64_t MonotonicMs();

}  // namespace muster
