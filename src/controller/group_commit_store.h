// Group commit: the controller's strand writes each change to the store's log without waiting
// for the disk, and what depends on the change being durable (a reply, a command to an agent)
// waits for the next sync, which one worker makes for every change written before it. At 500
// submissions a second the strand no longer spends the second in fsync (docs/benchmarks.md).
// This store counts the writes; ControllerRunner::WhenDurable holds completions until a sync
// covers them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "muster/controller/service_stats.h"
#include "muster/store/state_store.h"

namespace muster::controller {

class GroupCommitStore final : public store::StateStore {
 public:
  // `stats` (may be null) gets each write's time on the strand ("store/write").
  GroupCommitStore(store::StateStore* inner, ServiceStats* stats) : inner_(inner), stats_(stats) {}

  // Off (the default): commits are synced one by one, as the inner store makes them. On: a
  // synced commit is written buffered and counted; Sync makes it durable.
  void set_grouping(bool on) { grouping_ = on; }
  bool grouping() const { return grouping_; }
  // Commits that asked for durability, written so far. Strand only.
  uint64_t written() const { return written_; }

  Status Commit(const store::Mutation& m, store::Durability d) override {
    const auto began = ServiceStats::Clock::now();
    const bool counted = grouping_ && d == store::Durability::kSync;
    Status st = inner_->Commit(m, counted ? store::Durability::kBuffered : d);
    if (stats_) stats_->Record("store/write", ServiceStats::Clock::now() - began);
    if (st.ok() && counted) ++written_;
    return st;
  }
  Status Sync() override { return inner_->Sync(); }
  Result<store::LoadedState> LoadAll() override { return inner_->LoadAll(); }
  Result<std::vector<v1::JobRecord>> ReadHistory(size_t limit) override {
    return inner_->ReadHistory(limit);
  }
  Status ScanHistory(uint64_t from_id,
                     const std::function<bool(const v1::JobRecord&)>& fn) override {
    return inner_->ScanHistory(from_id, fn);
  }
  Status ScanAudit(
      const std::string& from_key,
      const std::function<bool(const std::string& key, const v1::AuditEntry&)>& fn) override {
    return inner_->ScanAudit(from_key, fn);
  }
  Result<v1::JobPayload> ReadJobPayload(uint64_t id) override { return inner_->ReadJobPayload(id); }

 private:
  store::StateStore* inner_;
  ServiceStats* stats_;
  bool grouping_ = false;
  uint64_t written_ = 0;
};

}  // namespace muster::controller
