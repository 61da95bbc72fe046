#include "muster/store/replicating_store.h"

namespace muster::store {

Status ReplicatingStore::Commit(const Mutation& m, Durability d) {
  if (may_write_) MUSTER_RETURN_IF_ERROR(may_write_());
  if (!log_) return inner()->Commit(m, d);
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> l(commit_mu_);
    MUSTER_RETURN_IF_ERROR(inner()->Commit(m, d));
    seq = log_->Append(m);
  }
  return d == Durability::kSync ? log_->WaitForStandbys(seq) : Status::Ok();
}

Status ReplicatingStore::Sync() {
  if (!log_) return inner()->Sync();
  const uint64_t seq = log_->last_seq();  // everything written before this call
  MUSTER_RETURN_IF_ERROR(inner()->Sync());
  return log_->WaitForStandbys(seq);
}

Status ReplicatingStore::ReadSnapshotAt(
    uint64_t* seq, const std::function<bool(Family, const std::string&, const std::string&)>& fn) {
  if (!log_) return FailedPrecondition("this store replicates nothing yet");
  std::unique_lock<std::mutex> l(commit_mu_);
  return inner()->ReadSnapshot(
      [&] {
        *seq = log_->last_seq();
        l.unlock();
      },
      fn);
}

}  // namespace muster::store
