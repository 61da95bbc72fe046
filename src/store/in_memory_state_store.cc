#include <algorithm>

#include "muster/store/state_store.h"

namespace muster::store {

std::map<std::string, std::string>& InMemoryStateStore::Fam(Family f) {
  return data_[static_cast<int>(f)];
}

Status InMemoryStateStore::RoomForNewWork() {
  return guard_ ? guard_->RoomForNewWork() : Status::Ok();
}

void InMemoryStateStore::GuardSpaceForTest(uint64_t reserve_bytes,
                                           SpaceGuard::FreeBytes free_bytes) {
  guard_.emplace("(in memory)", reserve_bytes, std::move(free_bytes));
}

Status InMemoryStateStore::Commit(const Mutation& mutation, Durability durability) {
  if (fail_commits_ > 0) {
    --fail_commits_;
    return Internal("injected commit failure");
  }
  if (guard_) MUSTER_RETURN_IF_ERROR(guard_->RoomForWrite());
  for (const auto& op : mutation.ops()) {
    auto& fam = Fam(op.family);
    if (op.value) {
      fam.insert_or_assign(op.key, *op.value);
    } else {
      fam.erase(op.key);
    }
  }
  ++commits_;
  if (durability == Durability::kSync) ++synced_commits_;
  return Status::Ok();
}

Status InMemoryStateStore::ReadSnapshot(
    const std::function<void()>& taken,
    const std::function<bool(Family, const std::string&, const std::string&)>& fn) {
  taken();
  for (int f = 0; f < kNumFamilies; ++f) {
    if (static_cast<Family>(f) == Family::kReplica) continue;
    for (const auto& [k, v] : data_[f]) {
      if (!fn(static_cast<Family>(f), k, v)) return Status::Ok();
    }
  }
  return Status::Ok();
}

Result<v1::ReplicaPosition> InMemoryStateStore::ReadReplicaPosition() {
  for (const auto& [k, v] : Fam(Family::kReplica)) {
    v1::ReplicaPosition p;
    if (k == "position" && p.ParseFromString(v)) return p;
  }
  return NotFound("the store holds no standby copy");
}

Status InMemoryStateStore::Wipe() {
  for (auto& fam : data_) fam.clear();
  return Status::Ok();
}

Result<LoadedState> InMemoryStateStore::LoadAll() {
  std::vector<RawRecord> raw;
  for (int f = 0; f < kNumFamilies; ++f) {
    if (static_cast<Family>(f) == Family::kJobPayload || static_cast<Family>(f) == Family::kAudit ||
        static_cast<Family>(f) == Family::kReplica) {
      continue;
    }
    for (const auto& [k, v] : data_[f]) raw.push_back({static_cast<Family>(f), k, v});
  }
  std::vector<RawRecord> quarantine;
  LoadedState state = DecodeAll(raw, &quarantine);
  for (const auto& q : quarantine) {
    Fam(q.family).erase(q.key);
    Fam(Family::kQuarantine)
        .insert_or_assign(std::string(FamilyName(q.family)) + "/" + q.key, q.value);
  }
  return state;
}

Result<std::vector<v1::JobRecord>> InMemoryStateStore::ReadHistory(size_t limit) {
  std::vector<v1::JobRecord> out;
  auto& fam = Fam(Family::kJobHistory);
  for (auto it = fam.rbegin(); it != fam.rend() && out.size() < limit; ++it) {
    v1::JobRecord j;
    if (j.ParseFromString(it->second)) out.push_back(std::move(j));
  }
  return out;
}

Status InMemoryStateStore::ScanHistory(uint64_t from_id,
                                       const std::function<bool(const v1::JobRecord&)>& fn) {
  auto& fam = Fam(Family::kJobHistory);
  const std::string from = Mutation::JobKey(from_id);
  for (auto it = fam.lower_bound(from); it != fam.end(); ++it) {
    v1::JobRecord j;
    if (j.ParseFromString(it->second) && !fn(j)) break;
  }
  return Status::Ok();
}

Result<v1::JobPayload> InMemoryStateStore::ReadJobPayload(uint64_t id) {
  const auto& fam = Fam(Family::kJobPayload);
  if (auto it = fam.find(Mutation::JobKey(id)); it != fam.end()) {
    v1::JobPayload p;
    if (!p.ParseFromString(it->second))
      return DataLoss("payload of job " + std::to_string(id) + " is corrupt");
    return p;
  }
  return NotFound("job " + std::to_string(id) + " has no stored payload");
}

Status InMemoryStateStore::ScanAudit(
    const std::string& from_key,
    const std::function<bool(const std::string&, const v1::AuditEntry&)>& fn) {
  auto& fam = Fam(Family::kAudit);
  for (auto it = fam.lower_bound(from_key); it != fam.end(); ++it) {
    v1::AuditEntry e;
    if (e.ParseFromString(it->second) && !fn(it->first, e)) break;
  }
  return Status::Ok();
}

Status InMemoryStateStore::ScanAuditNewestFirst(
    const std::string& below_key,
    const std::function<bool(const std::string&, const v1::AuditEntry&)>& fn) {
  auto& fam = Fam(Family::kAudit);
  auto end = fam.lower_bound(below_key);
  for (auto it = std::make_reverse_iterator(end); it != fam.rend(); ++it) {
    v1::AuditEntry e;
    if (e.ParseFromString(it->second) && !fn(it->first, e)) break;
  }
  return Status::Ok();
}

void InMemoryStateStore::CorruptForTest(Family family, const std::string& key) {
  if (auto it = Fam(family).find(key); it != Fam(family).end()) {
    it->second = std::string("\xff\xff\xff\xff garbage", 12);
  }
}

}  // namespace muster::store
