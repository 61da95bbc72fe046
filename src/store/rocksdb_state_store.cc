// RocksDB-backed StateStore: one column family per record kind, one synced WriteBatch per commit.
// rocksdb::Status is converted here and nowhere else.
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "muster/store/state_store.h"

namespace muster::store {
namespace {

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  std::string m = what + ": " + s.ToString();
  if (s.IsIOError() && s.ToString().find("No space") != std::string::npos) {
    return ResourceExhausted(m);
  }
  if (s.IsCorruption()) return DataLoss(m);
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return FailedPrecondition(m + " (is another musterctld using this state_dir?)");
  }
  return Internal(m);
}

// The store holds every job's script and environment and the secret step keys derive from: only
// the controller's user may read it, and nobody else may have made or own the directory.
Status KeepPrivate(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Internal("cannot stat state_dir " + dir);
  if (st.st_uid != ::geteuid()) {
    return PermissionDenied("state_dir " + dir + " belongs to uid " + std::to_string(st.st_uid) +
                            ", not to the controller's user (uid " + std::to_string(::geteuid()) +
                            ")");
  }
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) {
    return Internal("cannot make state_dir " + dir + " private (mode 0700)");
  }
  return Status::Ok();
}

class RocksDbStateStore final : public StateStore {
 public:
  static Result<std::unique_ptr<StateStore>> Open(const std::string& dir,
                                                  const StoreOptions& options) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Internal("cannot create state_dir " + dir + ": " + ec.message());
    MUSTER_RETURN_IF_ERROR(KeepPrivate(dir));
    // Opening writes (a new log, a manifest, the replayed log's tables): not below the floor.
    SpaceGuard guard(dir, options.reserve_bytes);
    MUSTER_RETURN_IF_ERROR_PREPEND(guard.RoomForWrite(), "cannot open the state store");
    rocksdb::DBOptions opts;
    opts.create_if_missing = true;
    opts.create_missing_column_families = true;
    opts.keep_log_file_num = 5;
    opts.max_manifest_file_size = 64 << 20;
    // Bounds what a restart after a crash replays. Without it a quiet family (meta, nodes) keeps
    // every write-ahead log alive until its own memtable fills: a 100,000-job fill left 390 MB of
    // logs and a 2.3 s replay (docs/benchmarks.md, Recovery).
    opts.max_total_wal_size = 32 << 20;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    cfs.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
    for (int f = 0; f < kNumFamilies; ++f) {
      cfs.emplace_back(FamilyName(static_cast<Family>(f)), rocksdb::ColumnFamilyOptions());
    }
    auto store = std::unique_ptr<RocksDbStateStore>(new RocksDbStateStore(std::move(guard)));
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(opts, dir, cfs, &store->handles_, &db);
    MUSTER_RETURN_IF_ERROR(FromRocks(s, "cannot open state store in " + dir));
    store->db_.reset(db);
    return std::unique_ptr<StateStore>(std::move(store));
  }

  ~RocksDbStateStore() override {
    for (auto* h : handles_) {
      if (db_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    if (db_) db_->Close().PermitUncheckedError();
  }

  Status Commit(const Mutation& mutation, Durability durability) override {
    MUSTER_RETURN_IF_ERROR(guard_.RoomForWrite());
    rocksdb::WriteBatch batch;
    for (const auto& op : mutation.ops()) {
      auto* cf = Handle(op.family);
      rocksdb::Status s = op.value ? batch.Put(cf, op.key, *op.value) : batch.Delete(cf, op.key);
      MUSTER_RETURN_IF_ERROR(FromRocks(s, "cannot build write batch"));
    }
    rocksdb::WriteOptions wo;
    wo.sync = durability == Durability::kSync;
    return FromRocks(db_->Write(wo, &batch), "cannot commit state change");
  }

  Result<LoadedState> LoadAll() override {
    std::vector<RawRecord> raw;
    for (int f = 0; f < kNumFamilies; ++f) {
      Family fam = static_cast<Family>(f);
      if (fam == Family::kQuarantine || fam == Family::kJobPayload || fam == Family::kAudit ||
          fam == Family::kReplica) {
        continue;
      }
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), Handle(fam)));
      if (fam == Family::kJobHistory) {
        // Only the newest id matters for recovery; the history is read on demand.
        it->SeekToLast();
        if (it->Valid()) raw.push_back({fam, it->key().ToString(), ""});
      } else {
        for (it->SeekToFirst(); it->Valid(); it->Next()) {
          raw.push_back({fam, it->key().ToString(), it->value().ToString()});
        }
      }
      MUSTER_RETURN_IF_ERROR(
          FromRocks(it->status(), std::string("cannot read ") + FamilyName(fam)));
    }
    std::vector<RawRecord> quarantine;
    LoadedState state = DecodeAll(raw, &quarantine);
    if (!quarantine.empty()) {
      rocksdb::WriteBatch batch;
      for (const auto& q : quarantine) {
        batch
            .Put(Handle(Family::kQuarantine), std::string(FamilyName(q.family)) + "/" + q.key,
                 q.value)
            .PermitUncheckedError();
        batch.Delete(Handle(q.family), q.key).PermitUncheckedError();
      }
      rocksdb::WriteOptions wo;
      wo.sync = true;
      MUSTER_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "cannot quarantine bad records"));
    }
    return state;
  }

  Status RoomForNewWork() override { return guard_.RoomForNewWork(); }

  Status ReadSnapshot(
      const std::function<void()>& taken,
      const std::function<bool(Family, const std::string&, const std::string&)>& fn) override {
    const rocksdb::Snapshot* snap = db_->GetSnapshot();
    taken();
    rocksdb::ReadOptions ro;
    ro.snapshot = snap;
    ro.fill_cache = false;
    Status result = Status::Ok();
    bool more = true;
    for (int f = 0; f < kNumFamilies && more && result.ok(); ++f) {
      const Family fam = static_cast<Family>(f);
      if (fam == Family::kReplica) continue;
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, Handle(fam)));
      for (it->SeekToFirst(); it->Valid() && more; it->Next()) {
        more = fn(fam, it->key().ToString(), it->value().ToString());
      }
      result = FromRocks(it->status(), std::string("cannot read ") + FamilyName(fam));
    }
    db_->ReleaseSnapshot(snap);
    return result;
  }

  Result<v1::ReplicaPosition> ReadReplicaPosition() override {
    std::string value;
    rocksdb::Status s =
        db_->Get(rocksdb::ReadOptions(), Handle(Family::kReplica), "position", &value);
    if (s.IsNotFound()) return NotFound("the store holds no standby copy");
    MUSTER_RETURN_IF_ERROR(FromRocks(s, "cannot read the standby's position"));
    v1::ReplicaPosition p;
    if (!p.ParseFromString(value)) return DataLoss("the standby's position does not parse");
    return p;
  }

  Status Wipe() override {
    // In batches of bounded size (a store of 100,000 jobs would otherwise be one huge batch), the
    // position first: a wipe cut short leaves a copy that asks for a snapshot again.
    constexpr size_t kBatchKeys = 10'000;
    rocksdb::WriteOptions wo;
    wo.sync = true;
    for (int f = kNumFamilies - 1; f >= 0; --f) {  // kReplica is the last family
      rocksdb::ColumnFamilyHandle* cf = Handle(static_cast<Family>(f));
      rocksdb::WriteBatch batch;
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        batch.Delete(cf, it->key()).PermitUncheckedError();
        if (static_cast<size_t>(batch.Count()) >= kBatchKeys) {
          MUSTER_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "cannot wipe the store"));
          batch.Clear();
        }
      }
      MUSTER_RETURN_IF_ERROR(FromRocks(it->status(), "cannot read the store to wipe it"));
      MUSTER_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "cannot wipe the store"));
    }
    return Status::Ok();
  }

  // RocksDB syncs every log file written so far; writes may go on meanwhile.
  Status Sync() override { return FromRocks(db_->SyncWAL(), "cannot sync the state store"); }

  Result<v1::JobPayload> ReadJobPayload(uint64_t id) override {
    std::string value;
    rocksdb::Status s =
        db_->Get(rocksdb::ReadOptions(), Handle(Family::kJobPayload), Mutation::JobKey(id), &value);
    if (s.IsNotFound()) return NotFound("job " + std::to_string(id) + " has no stored payload");
    MUSTER_RETURN_IF_ERROR(FromRocks(s, "cannot read the payload of job " + std::to_string(id)));
    v1::JobPayload p;
    if (!p.ParseFromString(value)) {
      return DataLoss("payload of job " + std::to_string(id) + " is corrupt");
    }
    return p;
  }

  Result<std::vector<v1::JobRecord>> ReadHistory(size_t limit) override {
    std::vector<v1::JobRecord> out;
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), Handle(Family::kJobHistory)));
    for (it->SeekToLast(); it->Valid() && out.size() < limit; it->Prev()) {
      v1::JobRecord j;
      if (j.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
        out.push_back(std::move(j));
      }
    }
    MUSTER_RETURN_IF_ERROR(FromRocks(it->status(), "cannot read job history"));
    return out;
  }

  Status ScanHistory(uint64_t from_id,
                     const std::function<bool(const v1::JobRecord&)>& fn) override {
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;  // a scan of the whole history must not evict the live records
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, Handle(Family::kJobHistory)));
    v1::JobRecord j;
    for (it->Seek(Mutation::JobKey(from_id)); it->Valid(); it->Next()) {
      j.Clear();
      if (!j.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) continue;
      if (!fn(j)) break;
    }
    return FromRocks(it->status(), "cannot read job history");
  }

  Status ScanAudit(
      const std::string& from_key,
      const std::function<bool(const std::string&, const v1::AuditEntry&)>& fn) override {
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, Handle(Family::kAudit)));
    v1::AuditEntry e;
    for (it->Seek(from_key); it->Valid(); it->Next()) {
      e.Clear();
      if (!e.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) continue;
      if (!fn(it->key().ToString(), e)) break;
    }
    return FromRocks(it->status(), "cannot read the audit log");
  }

  Status ScanAuditNewestFirst(
      const std::string& below_key,
      const std::function<bool(const std::string&, const v1::AuditEntry&)>& fn) override {
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, Handle(Family::kAudit)));
    v1::AuditEntry e;
    it->SeekForPrev(below_key);
    if (it->Valid() && it->key().compare(below_key) >= 0) it->Prev();  // below, not at
    for (; it->Valid(); it->Prev()) {
      e.Clear();
      if (!e.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) continue;
      if (!fn(it->key().ToString(), e)) break;
    }
    return FromRocks(it->status(), "cannot read the audit log");
  }

 private:
  explicit RocksDbStateStore(SpaceGuard guard) : guard_(std::move(guard)) {}
  rocksdb::ColumnFamilyHandle* Handle(Family f) { return handles_[1 + static_cast<int>(f)]; }

  SpaceGuard guard_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

}  // namespace

Result<std::unique_ptr<StateStore>> OpenRocksDbStateStore(const std::string& dir,
                                                          const StoreOptions& options) {
  return RocksDbStateStore::Open(dir, options);
}

}  // namespace muster::store
