// Group commit: the controller's strand writes each change to the store's log without waiting
// for the disk, and what depends on the change being durable (a reply, a command to an agent)
// waits for the next sync, which one worker makes for every change written before it. At 500
// submissions a second the strand no longer spends the second in fsync (docs/benchmarks.md).
// This store counts the writes; the controller (ControllerRunner::WhenDurable) holds
// completions until a sync covers them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

#include "muster/store/forwarding_store.h"

namespace muster::store {

class GroupCommitStore final : public ForwardingStore {
 public:
  using WriteTimer = std::function<void(std::chrono::steady_clock::duration)>;
  // `on_write` (may be empty) gets each write's time (sdiag's "store/write").
  GroupCommitStore(StateStore* inner, WriteTimer on_write)
      : ForwardingStore(inner), on_write_(std::move(on_write)) {}

  // Off (the default): commits are synced one by one, as the inner store makes them. On: a
  // synced commit is written buffered and counted; Sync makes it durable.
  void set_grouping(bool on) { grouping_ = on; }
  bool grouping() const { return grouping_; }
  // Commits that asked for durability, written so far. Strand only.
  uint64_t written() const { return written_; }

  Status Commit(const Mutation& m, Durability d) override {
    const auto began = std::chrono::steady_clock::now();
    const bool counted = grouping_ && d == Durability::kSync;
    Status st = inner()->Commit(m, counted ? Durability::kBuffered : d);
    if (on_write_) on_write_(std::chrono::steady_clock::now() - began);
    if (st.ok() && counted) ++written_;
    return st;
  }

 private:
  WriteTimer on_write_;
  bool grouping_ = false;
  uint64_t written_ = 0;
};

}  // namespace muster::store
