// A leader musterctld (ControllerServer) with a standby following its store over gRPC on
// loopback: nothing is acknowledged to a client before the in-sync standby has it on disk; a
// standby that goes away is dropped and the leader goes on; one that comes back resumes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

#include "muster/client/controller_client.h"
#include "muster/ha/replication_follower.h"
#include "muster/rpc/controller_server.h"
#include "muster/store/state_store.h"
#include "unit/rpc/one_node_config.h"

namespace muster::rpc {
namespace {

namespace fs = std::filesystem;

class ReplicationServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("muster-repl-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto c = testing::OneNodeConfig();
    ASSERT_TRUE(c.ok());
    config_ = *c;
    config_.controller.state_dir = dir_ + "/leader";
    config_.controller.socket_path = dir_ + "/ctld.sock";
    config_.controller.agent_address = "127.0.0.1:0";
    config_.controller.state_reserve_mb = 0;
    ControllerServerOptions o;
    o.config = config_;
    o.replication.enabled = true;
    o.replication.ack_timeout = std::chrono::milliseconds(500);
    auto s = ControllerServer::Create(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    leader_ = std::move(*s);
    ASSERT_TRUE(leader_->Start().ok());
    auto st = store::OpenRocksDbStateStore(dir_ + "/standby");
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    standby_store_ = std::move(*st);
  }
  void TearDown() override {
    follower_.reset();
    if (leader_) leader_->Shutdown();
    standby_store_.reset();
    fs::remove_all(dir_);
  }

  void StartFollower() {
    ha::ReplicationFollowerOptions f;
    f.name = "standby1";
    const std::string address = "127.0.0.1:" + std::to_string(leader_->agent_port());
    f.leader_address = [address] { return address; };
    f.store = standby_store_.get();
    follower_ = std::make_unique<ha::ReplicationFollower>(std::move(f));
    follower_->Start();
  }
  bool WaitInSync(bool want) {
    for (int i = 0; i < 200; ++i) {
      if (!leader_->standbys_in_sync().empty() == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }
  Result<uint64_t> Submit(client::ControllerClient& c) {
    v1::SubmitJobRequest r;
    r.mutable_spec()->set_work_dir("/tmp");
    r.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
    MUSTER_ASSIGN_OR_RETURN(v1::SubmitJobResponse resp, c.SubmitJob(r));
    return resp.job_id();
  }
  std::set<uint64_t> StandbysJobs() {
    auto loaded = standby_store_->LoadAll();
    std::set<uint64_t> ids;
    if (loaded.ok()) {
      for (const auto& j : loaded->jobs) ids.insert(j.id());
    }
    return ids;
  }

  std::string dir_;
  Config config_;
  std::unique_ptr<ControllerServer> leader_;
  std::unique_ptr<store::StateStore> standby_store_;
  std::unique_ptr<ha::ReplicationFollower> follower_;
};

TEST_F(ReplicationServiceTest, EveryAcknowledgedSubmissionIsOnTheInSyncStandbysDisk) {
  StartFollower();
  ASSERT_TRUE(WaitInSync(true)) << "the standby never caught up";
  auto c = client::ControllerClient::Connect(config_.controller.socket_path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (int i = 0; i < 20; ++i) {
    auto id = Submit(*c);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    // No waiting: the reply came after the standby acknowledged the change.
    EXPECT_TRUE(StandbysJobs().count(*id)) << "job " << *id << " acknowledged, not on the standby";
  }
  EXPECT_EQ(follower_->leader_epoch(), leader_->epoch());
}

TEST_F(ReplicationServiceTest, AStandbyThatGoesIsDroppedAndOneThatReturnsResumes) {
  StartFollower();
  ASSERT_TRUE(WaitInSync(true));
  auto c = client::ControllerClient::Connect(config_.controller.socket_path);
  ASSERT_TRUE(c.ok());
  auto first = Submit(*c);
  ASSERT_TRUE(first.ok());
  const uint64_t applied = follower_->applied_seq();
  follower_.reset();  // the standby stops
  // The leader goes on alone (at worst after the acknowledgement timeout).
  std::set<uint64_t> later;
  for (int i = 0; i < 5; ++i) {
    auto id = Submit(*c);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    later.insert(*id);
  }
  EXPECT_TRUE(leader_->standbys_in_sync().empty());
  for (uint64_t id : later) EXPECT_FALSE(StandbysJobs().count(id));
  // Back: it resumes from its position (no snapshot) and is in sync again.
  StartFollower();
  ASSERT_TRUE(WaitInSync(true));
  for (uint64_t id : later) EXPECT_TRUE(StandbysJobs().count(id)) << id;
  EXPECT_GT(follower_->applied_seq(), applied);
  auto again = Submit(*c);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(StandbysJobs().count(*again));
}

// A second standby under a name that already follows is refused (they would share one place in
// the in-sync set); the first goes on undisturbed.
TEST_F(ReplicationServiceTest, ASecondStandbyUnderTheSameNameIsRefused) {
  StartFollower();
  ASSERT_TRUE(WaitInSync(true));
  auto other_store = store::OpenRocksDbStateStore(dir_ + "/impostor");
  ASSERT_TRUE(other_store.ok());
  ha::ReplicationFollowerOptions f;
  f.name = "standby1";
  const std::string address = "127.0.0.1:" + std::to_string(leader_->agent_port());
  f.leader_address = [address] { return address; };
  f.store = other_store->get();
  ha::ReplicationFollower impostor(std::move(f));
  impostor.Start();
  auto c = client::ControllerClient::Connect(config_.controller.socket_path);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 3; ++i) {
    auto id = Submit(*c);
    ASSERT_TRUE(id.ok());
    EXPECT_TRUE(StandbysJobs().count(*id));
  }
  impostor.Stop();
  EXPECT_EQ(impostor.applied_seq(), 0u) << "the second stream under the name got changes";
  EXPECT_EQ(leader_->standbys_in_sync(), std::vector<std::string>{"standby1"});
}

TEST_F(ReplicationServiceTest, AStandbyOfAnEarlierLeaderGetsASnapshotOfTheNewOne) {
  StartFollower();
  ASSERT_TRUE(WaitInSync(true));
  auto c = client::ControllerClient::Connect(config_.controller.socket_path);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(Submit(*c).ok());
  follower_.reset();
  // The leader restarts: a new epoch, a new numbering of its changes.
  leader_->Shutdown();
  ControllerServerOptions o;
  o.config = config_;
  o.replication.enabled = true;
  o.min_epoch = 100;  // as a leader elected at etcd revision 100
  auto s = ControllerServer::Create(o);
  ASSERT_TRUE(s.ok());
  leader_ = std::move(*s);
  ASSERT_TRUE(leader_->Start().ok());
  EXPECT_EQ(leader_->epoch(), 100u);
  auto c2 = client::ControllerClient::Connect(config_.controller.socket_path);
  ASSERT_TRUE(c2.ok());
  auto id = Submit(*c2);
  ASSERT_TRUE(id.ok());
  StartFollower();
  ASSERT_TRUE(WaitInSync(true));
  EXPECT_EQ(follower_->leader_epoch(), 100u);
  EXPECT_TRUE(StandbysJobs().count(*id));
  auto pos = standby_store_->ReadReplicaPosition();
  ASSERT_TRUE(pos.ok());
  EXPECT_EQ(pos->leader_epoch(), 100u);
}

}  // namespace
}  // namespace muster::rpc
