// A StateStore that hands every call to another one: the base of the stores that change one or
// two calls on their way to the real store (group commit, replication, benchmarks' buffering).
// Thread-safety is the inner store's.
#pragma once

#include "muster/store/state_store.h"

namespace muster::store {

class ForwardingStore : public StateStore {
 public:
  explicit ForwardingStore(StateStore* inner) : inner_(inner) {}

  Status Commit(const Mutation& m, Durability d) override { return inner_->Commit(m, d); }
  Status Sync() override { return inner_->Sync(); }
  Status RoomForNewWork() override { return inner_->RoomForNewWork(); }
  Result<LoadedState> LoadAll() override { return inner_->LoadAll(); }
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
  Status ScanAuditNewestFirst(
      const std::string& below_key,
      const std::function<bool(const std::string& key, const v1::AuditEntry&)>& fn) override {
    return inner_->ScanAuditNewestFirst(below_key, fn);
  }
  Result<v1::JobPayload> ReadJobPayload(uint64_t id) override { return inner_->ReadJobPayload(id); }
  Status ReadSnapshot(
      const std::function<void()>& taken,
      const std::function<bool(Family, const std::string&, const std::string&)>& fn) override {
    return inner_->ReadSnapshot(taken, fn);
  }
  Result<v1::ReplicaPosition> ReadReplicaPosition() override {
    return inner_->ReadReplicaPosition();
  }
  Status Wipe() override { return inner_->Wipe(); }

 protected:
  StateStore* inner() { return inner_; }

 private:
  StateStore* inner_;
};

}  // namespace muster::store
