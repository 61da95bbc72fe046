#include "muster/store/state_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <tuple>

#include "muster/store/group_commit_store.h"

namespace muster::store {
namespace {

v1::JobRecord Job(uint64_t id, v1::JobState state = v1::PENDING) {
  v1::JobRecord j;
  j.set_id(id);
  j.set_state(state);
  j.mutable_spec()->set_name("job" + std::to_string(id));
  return j;
}

// One contract, two implementations.
class StoreFactory {
 public:
  virtual ~StoreFactory() = default;
  virtual std::unique_ptr<StateStore> Open() = 0;
  // Simulates a restart: the next Open() sees what was committed.
  virtual void Close(std::unique_ptr<StateStore>& s) = 0;
  virtual void Corrupt(std::unique_ptr<StateStore>& s, Family f, const std::string& key) = 0;
};

class RocksFactory : public StoreFactory {
 public:
  RocksFactory() {
    dir_ = std::filesystem::temp_directory_path() /
           ("muster-store-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);
  }
  ~RocksFactory() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<StateStore> Open() override {
    auto s = OpenRocksDbStateStore(dir_.string());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  void Close(std::unique_ptr<StateStore>& s) override { s.reset(); }
  std::string dir() const { return dir_.string(); }
  void Corrupt(std::unique_ptr<StateStore>& s, Family f, const std::string& key) override {
    s.reset();
    // Write junk with RocksDB directly, as a torn or foreign write would leave it.
    rocksdb::DBOptions o;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs{{rocksdb::kDefaultColumnFamilyName, {}}};
    for (int i = 0; i < kNumFamilies; ++i) cfs.push_back({FamilyName(static_cast<Family>(i)), {}});
    std::vector<rocksdb::ColumnFamilyHandle*> h;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_.string(), cfs, &h, &db).ok());
    ASSERT_TRUE(db->Put({}, h[1 + static_cast<int>(f)], key, "\xff\xfe garbage").ok());
    for (auto* x : h) db->DestroyColumnFamilyHandle(x).PermitUncheckedError();
    delete db;
    s = Open();
  }

 private:
  std::filesystem::path dir_;
  static inline int counter_ = 0;
};

class MemoryFactory : public StoreFactory {
 public:
  std::unique_ptr<StateStore> Open() override {
    if (!kept_) kept_ = std::make_unique<InMemoryStateStore>();
    return std::move(kept_);
  }
  void Close(std::unique_ptr<StateStore>& s) override {
    kept_.reset(static_cast<InMemoryStateStore*>(s.release()));
  }
  void Corrupt(std::unique_ptr<StateStore>& s, Family f, const std::string& key) override {
    static_cast<InMemoryStateStore*>(s.get())->CorruptForTest(f, key);
  }

 private:
  std::unique_ptr<InMemoryStateStore> kept_;
};

template <typename F>
class StateStoreTest : public ::testing::Test {
 protected:
  F factory_;
};
using Factories = ::testing::Types<RocksFactory, MemoryFactory>;
TYPED_TEST_SUITE(StateStoreTest, Factories);

// A standby's bookkeeping: its position is kept apart from the records (a snapshot leaves it
// out, recovery ignores it), and a wipe takes everything, the position first among it.
TYPED_TEST(StateStoreTest, ReplicaPositionSnapshotAndWipe) {
  auto s = this->factory_.Open();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ReadReplicaPosition().status().code(), StatusCode::kNotFound);
  Mutation m;
  for (uint64_t id = 1; id <= 3; ++id) m.PutJob(Job(id));
  v1::ReplicaPosition p;
  p.set_leader_epoch(5);
  p.set_seq(42);
  m.PutReplicaPosition(p);
  ASSERT_TRUE(s->Commit(m).ok());
  auto read = s->ReadReplicaPosition();
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->seq(), 42u);
  auto loaded = s->LoadAll();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->jobs.size(), 3u);
  EXPECT_TRUE(loaded->problems.empty()) << "the position is no record to quarantine";
  int seen = 0;
  bool taken = false;
  ASSERT_TRUE(s->ReadSnapshot([&] { taken = true; },
                              [&](Family f, const std::string&, const std::string&) {
                                EXPECT_NE(f, Family::kReplica);
                                ++seen;
                                return true;
                              })
                  .ok());
  EXPECT_TRUE(taken);
  EXPECT_EQ(seen, 3);
  ASSERT_TRUE(s->Wipe().ok());
  EXPECT_EQ(s->ReadReplicaPosition().status().code(), StatusCode::kNotFound);
  loaded = s->LoadAll();
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded->jobs.empty());
}

TYPED_TEST(StateStoreTest, CommitCloseReopenRecover) {
  auto s = this->factory_.Open();
  ASSERT_TRUE(s);
  Mutation m;
  v1::MetaRecord meta;
  meta.set_next_job_id(4);
  meta.set_epoch(7);
  m.PutMeta(meta);
  m.PutJob(Job(1));
  m.PutJob(Job(2, v1::RUNNING));
  m.PutJob(Job(3));
  v1::NodeRecord n;
  n.set_name("node1");
  n.set_drain(true);
  n.set_reason("maint");
  m.PutNode(n);
  ASSERT_TRUE(s->Commit(m).ok());
  Mutation m2;
  m2.DeleteJob(3);
  m2.ArchiveJob(Job(2, v1::COMPLETED));
  ASSERT_TRUE(s->Commit(m2).ok());

  this->factory_.Close(s);
  s = this->factory_.Open();
  auto loaded = s->LoadAll();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->meta.has_value());
  EXPECT_EQ(loaded->meta->next_job_id(), 4u);
  EXPECT_EQ(loaded->meta->epoch(), 7u);
  ASSERT_EQ(loaded->jobs.size(), 1u);
  EXPECT_EQ(loaded->jobs[0].id(), 1u);
  EXPECT_EQ(loaded->jobs[0].spec().name(), "job1");
  ASSERT_EQ(loaded->nodes.size(), 1u);
  EXPECT_EQ(loaded->nodes[0].reason(), "maint");
  EXPECT_EQ(loaded->max_history_job_id, 2u);
  EXPECT_TRUE(loaded->problems.empty());
  auto history = s->ReadHistory(10);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].state(), v1::COMPLETED);
}

TYPED_TEST(StateStoreTest, PayloadIsReadBackByIdAndLeavesWithItsJob) {
  auto s = this->factory_.Open();
  Mutation m;
  m.PutJob(Job(5));
  v1::JobPayload p;
  p.set_script("#!/bin/sh\necho hi\n");
  p.add_environment("A=1");
  m.PutJobPayload(5, p);
  ASSERT_TRUE(s->Commit(m).ok());
  this->factory_.Close(s);
  s = this->factory_.Open();
  auto loaded = s->LoadAll();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->jobs.size(), 1u);  // payloads are not part of recovery
  auto back = s->ReadJobPayload(5);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->script(), p.script());
  ASSERT_EQ(back->environment_size(), 1);
  EXPECT_EQ(s->ReadJobPayload(6).status().code(), StatusCode::kNotFound);
  Mutation archive;
  archive.ArchiveJob(Job(5, v1::COMPLETED));
  ASSERT_TRUE(s->Commit(archive).ok());
  EXPECT_EQ(s->ReadJobPayload(5).status().code(), StatusCode::kNotFound);
}

TYPED_TEST(StateStoreTest, JobsComeBackInIdOrder) {
  auto s = this->factory_.Open();
  Mutation m;
  for (uint64_t id : {300, 2, 70000, 1}) m.PutJob(Job(id));
  ASSERT_TRUE(s->Commit(m).ok());
  auto loaded = s->LoadAll();
  ASSERT_TRUE(loaded.ok());
  std::vector<uint64_t> ids;
  for (const auto& j : loaded->jobs) ids.push_back(j.id());
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 300, 70000}));
}

TYPED_TEST(StateStoreTest, CorruptRecordIsReportedAndQuarantinedNotFatal) {
  auto s = this->factory_.Open();
  Mutation m;
  m.PutJob(Job(1));
  m.PutJob(Job(2));
  ASSERT_TRUE(s->Commit(m).ok());
  this->factory_.Corrupt(s, Family::kJobs, Mutation::JobKey(2));
  auto loaded = s->LoadAll();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->jobs.size(), 1u);
  EXPECT_EQ(loaded->jobs[0].id(), 1u);
  ASSERT_EQ(loaded->problems.size(), 1u);
  EXPECT_NE(loaded->problems[0].find("job 2"), std::string::npos) << loaded->problems[0];
  // Quarantined: a second recovery is clean.
  auto again = s->LoadAll();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->problems.empty());
  EXPECT_EQ(again->jobs.size(), 1u);
}

TYPED_TEST(StateStoreTest, AuditEntriesReadBackInTimeOrderAfterAReopen) {
  auto s = this->factory_.Open();
  ASSERT_TRUE(s);
  Mutation m;
  // Written out of order, two in the same millisecond from different controller runs.
  for (auto [t, epoch, seq] :
       {std::tuple{3000, 1u, 0u}, {1000, 1u, 1u}, {2000, 2u, 0u}, {2000, 1u, 7u}}) {
    v1::AuditEntry e;
    e.set_time_ms(t);
    e.set_action("drain");
    e.set_detail(std::to_string(epoch) + "/" + std::to_string(seq));
    m.PutAudit(Mutation::AuditKey(t, epoch, seq), e);
  }
  ASSERT_TRUE(s->Commit(m).ok());
  this->factory_.Close(s);
  s = this->factory_.Open();
  auto state = s->LoadAll();
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->problems.empty()) << "the audit log is not part of recovery";
  std::vector<std::string> seen;
  std::string last_key;
  ASSERT_TRUE(s->ScanAudit(Mutation::AuditKey(2000, 0, 0), [&](const std::string& key,
                                                               const v1::AuditEntry& e) {
                 seen.push_back(std::to_string(e.time_ms()) + ":" + e.detail());
                 last_key = key;
                 return true;
               }).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"2000:1/7", "2000:2/0", "3000:1/0"}));
  Mutation del;
  del.DeleteAudit(last_key);
  ASSERT_TRUE(s->Commit(del).ok());
  int left = 0;
  ASSERT_TRUE(
      s->ScanAudit(Mutation::AuditKey(0, 0, 0), [&](const std::string&, const v1::AuditEntry&) {
         ++left;
         return true;
       }).ok());
  EXPECT_EQ(left, 3);
}

// musterctld --check-state: read-only (also beside a running controller), every record that
// recovery would quarantine named, nothing moved.
// Group commit's store: off, a synced commit is synced by the inner store; on, it is written
// buffered and counted, for the controller to wait on the next Sync; buffered ones are not counted.
TEST(GroupCommitStoreTest, GroupedCommitsAreBufferedAndCounted) {
  InMemoryStateStore inner;
  int timed = 0;
  GroupCommitStore store(&inner, [&](auto) { ++timed; });
  Mutation m;
  v1::JobRecord r;
  r.set_id(1);
  m.PutJob(r);
  ASSERT_TRUE(store.Commit(m, Durability::kSync).ok());
  EXPECT_EQ(inner.synced_commits(), 1u);
  EXPECT_EQ(store.written(), 0u);
  store.set_grouping(true);
  ASSERT_TRUE(store.Commit(m, Durability::kSync).ok());
  ASSERT_TRUE(store.Commit(m, Durability::kBuffered).ok());
  EXPECT_EQ(inner.synced_commits(), 1u) << "a grouped commit waits for Sync";
  EXPECT_EQ(inner.commits(), 3u);
  EXPECT_EQ(store.written(), 1u);
  EXPECT_EQ(timed, 3);
  EXPECT_TRUE(store.Sync().ok());
  inner.FailNextCommitsForTest(1);
  EXPECT_FALSE(store.Commit(m, Durability::kSync).ok());
  EXPECT_EQ(store.written(), 1u) << "a failed write is not counted";
}

TEST(RocksDbStateStoreTest, CheckStateFindsWhatRecoveryWouldQuarantineAndChangesNothing) {
  RocksFactory f;
  auto s = f.Open();
  Mutation m;
  v1::MetaRecord meta;
  meta.set_epoch(3);
  m.PutMeta(meta);
  m.PutJob(Job(1));
  m.PutJob(Job(2));
  ASSERT_TRUE(s->Commit(m).ok());
  auto clean = CheckStateDir(f.dir());
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_TRUE(clean->problems.empty()) << clean->problems[0];
  uint64_t jobs = 0;
  for (const auto& [family, n] : clean->records) {
    if (family == FamilyName(Family::kJobs)) jobs = n;
  }
  EXPECT_EQ(jobs, 2u);
  f.Corrupt(s, Family::kJobs, Mutation::JobKey(2));  // reopened: a controller holds it now
  for (int round = 0; round < 2; ++round) {
    auto check = CheckStateDir(f.dir());
    ASSERT_TRUE(check.ok()) << check.status().ToString();
    ASSERT_EQ(check->problems.size(), 1u) << "round " << round;
    EXPECT_NE(check->problems[0].find("job 2"), std::string::npos) << check->problems[0];
    EXPECT_NE(check->problems[0].find("recovery would quarantine"), std::string::npos);
  }
  // Recovery quarantines it; the check then counts it there.
  ASSERT_TRUE(s->LoadAll().ok());
  auto after = CheckStateDir(f.dir());
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->problems.empty());
  EXPECT_EQ(after->quarantined, 1u);
  EXPECT_FALSE(CheckStateDir(f.dir() + "/nothing-here").ok());
}

TEST(RocksDbStateStoreTest, SecondOpenOfTheSameDirIsRefused) {
  auto dir = std::filesystem::temp_directory_path() / ("muster-lock-" + std::to_string(::getpid()));
  auto a = OpenRocksDbStateStore(dir.string());
  ASSERT_TRUE(a.ok());
  auto b = OpenRocksDbStateStore(dir.string());
  EXPECT_FALSE(b.ok());
  a->reset();
  std::filesystem::remove_all(dir);
}

// The store holds every job's script and environment and the secret behind the nodes' step keys.
TEST(RocksDbStateStoreTest, TheDirectoryIsMadePrivateAndMustBeTheControllers) {
  auto dir = std::filesystem::temp_directory_path() / ("muster-priv-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ::chmod(dir.c_str(), 0755);
  {
    auto store = OpenRocksDbStateStore(dir.string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
  }
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "others could read the jobs' environments";
  if (::geteuid() == 0) {
    // Made (or handed over) by someone else: refused, not trusted.
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
    auto foreign = OpenRocksDbStateStore(dir.string());
    EXPECT_EQ(foreign.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(foreign.status().message().find("belongs to uid 65534"), std::string::npos)
        << foreign.status().message();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace muster::store
