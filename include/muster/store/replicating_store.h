// The leader's store with a hot standby: each commit also goes into the ReplicationLog, and what
// must be durable (a synced commit, the group commit's Sync) waits for the in-sync standbys as
// well as for the local disk. A leader that has lost its lead (may_write says why) commits
// nothing more: a deposed leader that still runs must not acknowledge.
// Thread-safety: as the inner store's; ReadSnapshotAt may run beside Commit.
#pragma once

#include <functional>
#include <mutex>

#include "muster/store/forwarding_store.h"
#include "muster/store/replication_log.h"

namespace muster::store {

class ReplicatingStore final : public ForwardingStore {
 public:
  // Commits pass straight through until set_log (recovery's own writes come before the log
  // exists: a standby's first snapshot carries them).
  ReplicatingStore(StateStore* inner, std::function<Status()> may_write)
      : ForwardingStore(inner), may_write_(std::move(may_write)) {}
  void set_log(ReplicationLog* log) { log_ = log; }

  Status Commit(const Mutation& m, Durability d) override;
  Status Sync() override;
  // The whole store as of change *seq (set before the first record is visited).
  Status ReadSnapshotAt(
      uint64_t* seq, const std::function<bool(Family, const std::string&, const std::string&)>& fn);

 private:
  ReplicationLog* log_ = nullptr;
  std::function<Status()> may_write_;
  std::mutex commit_mu_;  // a commit and its place in the log, against a snapshot's moment
};

}  // namespace muster::store
