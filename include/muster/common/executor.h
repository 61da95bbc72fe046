// Where a daemon's work runs: one strand that owns its state, timers on it, and workers for what
// must not hold the strand. The controller's executor is Asio with a worker per lane
// (rpc/asio_executor.h); the agent's is its io thread (agent/io_executor.h); tests
// use ManualExecutor (manual_executor.h), which runs everything on the caller's thread under a
// virtual clock.
#pragma once

#include <cstdint>
#include <functional>

namespace muster {

class Executor {
 public:
  // Work that runs off the strand, each kind on its own worker so that one does not wait for the
  // other: the controller's scheduling pass's core, reads of its archive (sacct), and its
  // store's group commit syncs. The agent offloads nothing.
  enum class Lane { kScheduling, kQuery, kSync };

  virtual ~Executor() = default;
  // Runs `fn` on the strand, after what is already queued there. Thread-safe.
  virtual void Post(std::function<void()> fn) = 0;
  // Runs `fn` on the strand once `delay_ms` have passed. Thread-safe.
  virtual void PostAfter(int64_t delay_ms, std::function<void()> fn) = 0;
  // Runs `fn` off the strand, on `lane`'s worker; `fn` posts its result back. Thread-safe.
  virtual void Offload(Lane lane, std::function<void()> fn) = 0;
};

}  // namespace muster
