// Replication's two ends without a network: the leader's log of changes and in-sync set, and a
// standby's applier, wired back to back.
#include <gtest/gtest.h>

#include <thread>

#include "muster/store/replica_applier.h"
#include "muster/store/replicating_store.h"
#include "muster/store/replication_log.h"

namespace muster::store {
namespace {

using std::chrono::milliseconds;

Mutation JobChange(uint64_t id) {
  v1::JobRecord j;
  j.set_id(id);
  j.set_state(v1::PENDING);
  Mutation m;
  m.PutJob(j);
  return m;
}

// Everything the log holds after `after`, as one leader message.
v1::ReplicationMessage Burst(ReplicationLog& log, uint64_t after) {
  std::vector<ReplicationLog::Batch> batches;
  EXPECT_TRUE(log.Read(after, 1 << 20, milliseconds(0), &batches));
  v1::ReplicationMessage m;
  m.set_leader_epoch(log.leader_epoch());
  for (const auto& b : batches) m.add_batches()->ParseFromString(*b);
  return m;
}

// sdiag shows each standby's last acknowledgement and when, kept after it leaves the set (a
// standby that fell behind is the one an admin looks for), for a bounded number of names.
TEST(ReplicationLogTest, EachStandbysLastAcknowledgementIsKeptForDiagnostics) {
  ReplicationLog log({.leader_epoch = 1}, nullptr);
  log.Append(JobChange(1));
  log.Append(JobChange(2));
  log.Acked("b", 2);
  log.Acked("c", 1);
  log.Detached("c");
  auto views = log.standbys();
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].name, "b");
  EXPECT_TRUE(views[0].in_sync);
  EXPECT_EQ(views[0].acked, 2u);
  EXPECT_EQ(views[1].name, "c");
  EXPECT_FALSE(views[1].in_sync);
  EXPECT_EQ(views[1].acked, 1u);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  EXPECT_NEAR(static_cast<double>(views[1].acked_at_ms), static_cast<double>(now), 5'000);
  for (int i = 0; i < 100; ++i) log.Acked("s" + std::to_string(i), 2);
  EXPECT_LE(log.standbys().size(), 32u) << "names a peer chose are kept without bound";
}

TEST(ReplicationLogTest, ChangesAreNumberedInOrderAndATrimmedStartNeedsASnapshot) {
  ReplicationLog log({.leader_epoch = 7, .max_bytes = 200}, nullptr);
  for (uint64_t id = 1; id <= 20; ++id) EXPECT_EQ(log.Append(JobChange(id)), id);
  std::vector<ReplicationLog::Batch> out;
  EXPECT_FALSE(log.Read(0, 1 << 20, milliseconds(0), &out)) << "change 1 is no longer kept";
  EXPECT_FALSE(log.Read(21, 1 << 20, milliseconds(0), &out)) << "a position past the last";
  ASSERT_TRUE(log.Read(18, 1 << 20, milliseconds(0), &out));
  ASSERT_EQ(out.size(), 2u);
  v1::ReplicatedBatch b;
  ASSERT_TRUE(b.ParseFromString(*out[0]));
  EXPECT_EQ(b.seq(), 19u);
  ASSERT_EQ(b.ops_size(), 1);
  EXPECT_EQ(b.ops(0).family(), static_cast<uint32_t>(Family::kJobs));
  EXPECT_EQ(b.ops(0).key(), Mutation::JobKey(19));
}

TEST(ReplicationLogTest, SyncsWaitForAnInSyncStandbyAndDropItOnlyOnceTheSetSaysSo) {
  std::vector<std::pair<std::string, bool>> published;
  bool refuse = false;
  // Long enough that the standby's acknowledgement below comes within it even on a loaded machine.
  ReplicationLog log({.leader_epoch = 1, .ack_timeout = milliseconds(1000)},
                     [&](const std::string& name, bool in) -> Status {
                       if (refuse) return Unavailable("etcd is away");
                       published.emplace_back(name, in);
                       return Status::Ok();
                     });
  log.Append(JobChange(1));
  log.Acked("b", 0);
  EXPECT_TRUE(log.in_sync().empty()) << "not in sync before it has every change";
  log.Acked("b", 1);
  ASSERT_EQ(log.in_sync(), std::vector<std::string>{"b"});
  EXPECT_EQ(published, (std::vector<std::pair<std::string, bool>>{{"b", true}}));
  // A sync returns once the standby acknowledges.
  const uint64_t seq = log.Append(JobChange(2));
  std::thread standby([&] {
    std::this_thread::sleep_for(milliseconds(50));
    log.Acked("b", seq);
  });
  EXPECT_TRUE(log.WaitForStandbys(seq).ok());
  standby.join();
  EXPECT_EQ(log.in_sync(), std::vector<std::string>{"b"});
  // Silent past the timeout while the set cannot be changed: the leader must not go on.
  const uint64_t next = log.Append(JobChange(3));
  refuse = true;
  Status st = log.WaitForStandbys(next);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  // Once it can: the standby is dropped (published first) and the leader goes on alone.
  refuse = false;
  EXPECT_TRUE(log.WaitForStandbys(next).ok());
  EXPECT_TRUE(log.in_sync().empty());
  EXPECT_EQ(published.back(), (std::pair<std::string, bool>{"b", false}));
}

// Only a published standby is taken back out; and a leader that stops keeps its standbys'
// standing: they have everything it acknowledged, and one of them must be able to take over.
TEST(ReplicationLogTest, AStoppingLeaderLeavesItsStandbysInSync) {
  std::vector<std::pair<std::string, bool>> published;
  ReplicationLog log({.leader_epoch = 1}, [&](const std::string& name, bool in) -> Status {
    published.emplace_back(name, in);
    return Status::Ok();
  });
  log.Append(JobChange(1));
  log.Acked("behind", 0);
  log.Detached("behind");  // never in sync: nothing to take back
  EXPECT_TRUE(published.empty());
  log.Acked("b", 1);
  ASSERT_EQ(published, (std::vector<std::pair<std::string, bool>>{{"b", true}}));
  log.Stop();
  log.Detached("b");  // its stream ends as the leader stops
  log.Acked("c", 1);  // and nobody joins any more
  EXPECT_EQ(published, (std::vector<std::pair<std::string, bool>>{{"b", true}}));
}

TEST(ReplicaApplierTest, ASnapshotThenChangesMakeTheStandbysCopyAndItsPosition) {
  InMemoryStateStore leader_disk;
  ReplicatingStore leader(&leader_disk, nullptr);
  ReplicationLog log({.leader_epoch = 3}, nullptr);
  leader.set_log(&log);
  ASSERT_TRUE(leader.Commit(JobChange(1), Durability::kBuffered).ok());
  ASSERT_TRUE(leader.Commit(JobChange(2), Durability::kBuffered).ok());

  InMemoryStateStore standby_disk;
  standby_disk.Commit(JobChange(99), Durability::kSync).IgnoreError();  // an old copy's
  ReplicaApplier applier(&standby_disk);
  ASSERT_TRUE(applier.Open().ok());
  EXPECT_FALSE(applier.has_position());
  // The snapshot, as the service sends it.
  v1::ReplicationMessage snap;
  snap.set_leader_epoch(3);
  snap.set_snapshot_begin(true);
  uint64_t at = 0;
  ASSERT_TRUE(leader
                  .ReadSnapshotAt(&at,
                                  [&](Family f, const std::string& k, const std::string& v) {
                                    auto* op = snap.add_snapshot_ops();
                                    op->set_family(static_cast<uint32_t>(f));
                                    op->set_key(k);
                                    op->set_value(v);
                                    return true;
                                  })
                  .ok());
  EXPECT_EQ(at, 2u);
  snap.set_snapshot_end(true);
  snap.set_snapshot_seq(at);
  auto ack = applier.Apply(snap);
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(**ack, 2u);
  // Later changes, a deletion among them.
  Mutation gone;
  gone.DeleteJob(1);
  ASSERT_TRUE(leader.Commit(gone, Durability::kBuffered).ok());
  ASSERT_TRUE(leader.Commit(JobChange(3), Durability::kBuffered).ok());
  ack = applier.Apply(Burst(log, 2));
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(**ack, 4u);
  auto copy = standby_disk.LoadAll();
  ASSERT_TRUE(copy.ok());
  std::vector<uint64_t> ids;
  for (const auto& j : copy->jobs) ids.push_back(j.id());
  EXPECT_EQ(ids, (std::vector<uint64_t>{2, 3})) << "the old copy's job 99 is gone too";
  auto pos = standby_disk.ReadReplicaPosition();
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ(pos->leader_epoch(), 3u);
  EXPECT_EQ(pos->seq(), 4u);
  // A change out of order, or from another leader's stream, is refused.
  EXPECT_EQ(applier.Apply(Burst(log, 2)).status().code(), StatusCode::kDataLoss);
  v1::ReplicationMessage other = Burst(log, 3);
  other.set_leader_epoch(4);
  EXPECT_EQ(applier.Apply(other).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace muster::store
