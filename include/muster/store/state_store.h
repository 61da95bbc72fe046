// Durable controller state. Every change the controller acknowledges goes through Commit() first
// (write-ahead). Records are the protobuf messages of proto/muster/v1/records.proto.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/store/space_guard.h"
#include "muster/v1/records.pb.h"
#include "muster/v1/replication.pb.h"

namespace muster::store {

enum class Family {
  kMeta,
  kJobs,
  kNodes,
  kJobHistory,
  kQuarantine,
  kJobPayload,
  kAudit,
  kAccounts,
  kUsers,
  kUsage,
  kQos,
  kReservations,
  kPartitions,
  // A standby's position in the leader's change stream (ReplicaPosition); never replicated.
  kReplica
};

// kSync: durable when Commit returns (the write-ahead rule for anything acknowledged or sent).
// kBuffered: written, made durable by the next synced commit or by the OS; for facts that recovery
// can re-learn (a launch was acknowledged, a node finished cleaning up), so losing them to a crash
// is harmless and they need not pay for an fsync.
enum class Durability { kSync, kBuffered };
inline constexpr int kNumFamilies = 14;
const char* FamilyName(Family f);

// A set of changes applied atomically (one RocksDB WriteBatch). Not thread-safe.
class Mutation {
 public:
  struct Op {
    Family family;
    std::string key;
    std::optional<std::string> value;  // nullopt: delete
  };

  void PutMeta(const v1::MetaRecord& meta);
  void PutJob(const v1::JobRecord& job);
  void DeleteJob(uint64_t id);  // the record and its payload
  // A job's script and environment; a job array's tasks share one, under the array's id.
  void PutJobPayload(uint64_t id, const v1::JobPayload& payload);
  void DeleteJobPayload(uint64_t id);
  void PutNode(const v1::NodeRecord& node);
  // Moves a finished job out of the live set into the history (accounting) family, with its
  // payload (an array task's shared payload stays: DeleteJobPayload when its last task goes).
  void ArchiveJob(const v1::JobRecord& job);
  void DeleteHistory(uint64_t id);  // an archived record past its retention
  // The audit log, keyed by AuditKey (time first, so it reads in time order).
  void PutAudit(const std::string& key, const v1::AuditEntry& entry);
  void DeleteAudit(const std::string& key);
  // Accounts and users' associations, by name (the config's are stored too, marked so).
  void PutAccount(const v1::AccountRecord& account);
  void DeleteAccount(const std::string& name);
  void PutUser(const v1::UserRecord& user);
  void DeleteUser(const std::string& name);
  // Fair-share usage, keyed "account/user".
  void PutUsage(const v1::UsageRecord& usage);
  void DeleteUsage(const std::string& account, const std::string& user);
  // QoS, by name (the config's are stored too, marked so).
  void PutQos(const v1::QosRecord& qos);
  void DeleteQos(const std::string& name);
  // Advance reservations, by name.
  void PutReservation(const v1::ReservationRecord& reservation);
  void DeleteReservation(const std::string& name);
  // Partitions made, changed or removed live, by name.
  void PutPartition(const v1::PartitionRecord& partition);
  void DeletePartition(const std::string& name);

  // A standby's copy: the leader's keys and values as they are, and where the copy stands.
  void PutRaw(Family family, std::string key, std::string value);
  void EraseRaw(Family family, std::string key);
  void PutReplicaPosition(const v1::ReplicaPosition& position);

  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  const std::vector<Op>& ops() const { return ops_; }
  void Append(const Mutation& other);

  static std::string JobKey(uint64_t id);  // big-endian, so keys sort by id
  // Big-endian time, then the controller's epoch and a counter: in time order, never reused.
  static std::string AuditKey(int64_t time_ms, uint32_t epoch, uint32_t seq);

 private:
  std::vector<Op> ops_;
};

struct LoadedState {
  std::optional<v1::MetaRecord> meta;
  std::vector<v1::JobRecord> jobs;  // live (not yet archived) jobs, by id
  std::vector<v1::NodeRecord> nodes;
  std::vector<v1::AccountRecord> accounts;
  std::vector<v1::UserRecord> users;
  std::vector<v1::UsageRecord> usage;
  std::vector<v1::QosRecord> qos;
  std::vector<v1::ReservationRecord> reservations;
  std::vector<v1::PartitionRecord> partitions;
  uint64_t max_history_job_id = 0;    // so ids are never reused even if meta is lost
  std::vector<std::string> problems;  // corrupt records found, reported and quarantined
};

// Thread-compatible: the controller calls it from its strand only.
class StateStore {
 public:
  virtual ~StateStore() = default;

  // Applies the mutation atomically and durably (synced) before returning OK.
  // Errors: INTERNAL / DATA_LOSS / RESOURCE_EXHAUSTED (disk full) from the storage engine; nothing
  // of the mutation is applied then.
  virtual Status Commit(const Mutation& mutation, Durability durability = Durability::kSync) = 0;

  // Reads everything for recovery. A record that does not parse is moved to the quarantine family
  // and reported in `problems`; it never stops recovery.
  virtual Result<LoadedState> LoadAll() = 0;

  // Reads archived jobs (accounting), newest first, at most `limit`.
  virtual Result<std::vector<v1::JobRecord>> ReadHistory(size_t limit) = 0;

  // Visits archived jobs with id >= from_id in id order until `fn` returns false. Records that do
  // not parse are skipped. May run on another thread than Commit (sacct's scan leaves the
  // controller's strand): the RocksDB store reads a consistent snapshot meanwhile.
  virtual Status ScanHistory(uint64_t from_id,
                             const std::function<bool(const v1::JobRecord&)>& fn) = 0;

  // Visits audit entries with key >= from_key in key (time) order until `fn` returns false.
  // Entries that do not parse are skipped. Strand only.
  virtual Status ScanAudit(
      const std::string& from_key,
      const std::function<bool(const std::string& key, const v1::AuditEntry&)>& fn) = 0;
  // The same backwards: entries with key < below_key, newest first (the audit view: what
  // happened last is what an admin looks for, and a flood of old entries must not hide it).
  virtual Status ScanAuditNewestFirst(
      const std::string& below_key,
      const std::function<bool(const std::string& key, const v1::AuditEntry&)>& fn) = 0;
  // Reads a live job's payload (script, environment). NOT_FOUND when there is none, DATA_LOSS
  // when it does not parse.
  virtual Result<v1::JobPayload> ReadJobPayload(uint64_t id) = 0;

  // Makes every commit made before the call durable (group commit: buffered commits, then one
  // sync for all of them). May run on another thread than Commit, concurrently with it.
  virtual Status Sync() { return Status::Ok(); }

  // Visits every record of every family but kReplica, as of one moment: `taken` runs right after
  // that moment is fixed (a caller that holds its commit lock meanwhile learns which commit it
  // is), then `fn` sees the records, family by family in key order, until it returns false.
  // May run on another thread than Commit.
  virtual Status ReadSnapshot(
      const std::function<void()>& taken,
      const std::function<bool(Family, const std::string& key, const std::string& value)>& fn) = 0;
  // A standby's position (NOT_FOUND when the store holds no copy of a leader's).
  virtual Result<v1::ReplicaPosition> ReadReplicaPosition() = 0;
  // Deletes every record of every family (a standby about to load a snapshot), synced.
  virtual Status Wipe() = 0;

  // Whether new work (a submission) may be admitted: RESOURCE_EXHAUSTED, saying why, while the
  // store's disk is below its reserve of free space (SpaceGuard). Commit itself refuses only
  // below the floor. Strand only.
  virtual Status RoomForNewWork() { return Status::Ok(); }
};

struct StoreOptions {
  // Free space kept for what is already admitted (SpaceGuard); 0: no checks.
  uint64_t reserve_bytes = 0;
};

// Opens (creating if needed) a RocksDB store in `dir`. FAILED_PRECONDITION when another process
// holds it, RESOURCE_EXHAUSTED when its disk is below the SpaceGuard's floor, INTERNAL for other
// storage errors.
Result<std::unique_ptr<StateStore>> OpenRocksDbStateStore(const std::string& dir,
                                                          const StoreOptions& options = {});

// Volatile store for tests and the simulator; single-threaded (no concurrent ScanHistory).
class InMemoryStateStore : public StateStore {
 public:
  Status Commit(const Mutation& mutation, Durability durability = Durability::kSync) override;
  Result<LoadedState> LoadAll() override;
  Result<std::vector<v1::JobRecord>> ReadHistory(size_t limit) override;
  Status ScanHistory(uint64_t from_id,
                     const std::function<bool(const v1::JobRecord&)>& fn) override;
  Result<v1::JobPayload> ReadJobPayload(uint64_t id) override;
  Status ScanAudit(
      const std::string& from_key,
      const std::function<bool(const std::string& key, const v1::AuditEntry&)>& fn) override;
  Status ScanAuditNewestFirst(
      const std::string& below_key,
      const std::function<bool(const std::string& key, const v1::AuditEntry&)>& fn) override;
  Status RoomForNewWork() override;
  Status ReadSnapshot(const std::function<void()>& taken,
                      const std::function<bool(Family, const std::string& key,
                                               const std::string& value)>& fn) override;
  Result<v1::ReplicaPosition> ReadReplicaPosition() override;
  Status Wipe() override;

  // A disk of `free_bytes` under a SpaceGuard with this reserve (none by default).
  void GuardSpaceForTest(uint64_t reserve_bytes, SpaceGuard::FreeBytes free_bytes);
  // Overwrites a stored value with bytes that do not parse.
  void CorruptForTest(Family family, const std::string& key);
  // Makes the next `n` commits fail with INTERNAL (a full or failing disk).
  void FailNextCommitsForTest(int n) { fail_commits_ = n; }
  size_t commits() const { return commits_; }
  size_t synced_commits() const { return synced_commits_; }

 private:
  std::map<std::string, std::string>& Fam(Family f);
  std::map<std::string, std::string> data_[kNumFamilies];
  std::optional<SpaceGuard> guard_;
  int fail_commits_ = 0;
  size_t commits_ = 0;
  size_t synced_commits_ = 0;
};

// musterctld --check-state: what a state directory holds, read without changing it (it may be
// checked while a controller runs on it). `problems` names every record recovery would
// quarantine, and every archived job or payload that does not parse.
struct StateCheck {
  std::vector<std::pair<std::string, uint64_t>> records;  // family name -> records
  uint64_t quarantined = 0;                               // moved aside by earlier recoveries
  std::vector<std::string> problems;
};
Result<StateCheck> CheckStateDir(const std::string& dir);

// Shared by both stores: decode what was read, quarantining what does not parse.
// `quarantine` receives (family, key, raw value) of every bad record.
struct RawRecord {
  Family family;
  std::string key;
  std::string value;
};
LoadedState DecodeAll(const std::vector<RawRecord>& raw, std::vector<RawRecord>* quarantine);

}  // namespace muster::store
