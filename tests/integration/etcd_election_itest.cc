// Leader election against a real etcd (Debian's etcd-server), started by each test on loopback
// and stopped by its pid. Skipped where /usr/bin/etcd is missing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "etcd/election.grpc.pb.h"
#include "harness/test_etcd.h"
#include "muster/ha/etcd_election.h"

namespace muster::ha {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class EtcdElectionTest : public ::testing::Test {
 protected:
  // Waits (5 s at most) until `e` campaigns behind the leader of `epoch`: what the tests used
  // to sleep for.
  static bool StandsBy(const EtcdElection& e, int64_t epoch) {
    const Clock::time_point end = Clock::now() + 5s;
    while (e.observed_epoch() != epoch) {
      if (Clock::now() > end) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }
  void SetUp() override {
    if (!testing::TestEtcd::Installed()) GTEST_SKIP() << "etcd-server is not installed";
    dir_ = std::filesystem::temp_directory_path() /
           ("muster-etcd-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    auto etcd = testing::TestEtcd::Start(dir_.string());
    ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
    etcd_ = std::move(*etcd);
    endpoint_ = etcd_->endpoint();
  }

  void TearDown() override {
    etcd_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<EtcdElection> Candidate(const std::string& name,
                                          const std::string& state_prefix = "") {
    EtcdElectionOptions o = etcd_->Options("/muster/controller/leader", name);
    o.state_prefix = state_prefix;
    o.ttl_s = 2;
    o.poll = 100ms;
    auto e = EtcdElection::Create(o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(*e) : nullptr;
  }

  // A client of etcd's with the controllers' certificate, below the election.
  std::shared_ptr<grpc::Channel> RawChannel() {
    const TlsIdentity id = etcd_->Options("", "").tls.value();
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = id.ca_pem;
    tls.pem_cert_chain = id.cert_pem;
    tls.pem_private_key = id.key_pem;
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("etcd");
    return grpc::CreateCustomChannel(endpoint_, grpc::SslCredentials(tls), args);
  }
  std::unique_ptr<etcdserverpb::KV::Stub> RawKv() {
    return etcdserverpb::KV::NewStub(RawChannel());
  }

  std::filesystem::path dir_;
  std::string endpoint_;
  std::unique_ptr<testing::TestEtcd> etcd_;
};

TEST_F(EtcdElectionTest, TheFirstCandidateLeadsAndTheOtherStandsBy) {
  auto a = Candidate("ctl-a:6817");
  auto b = Candidate("ctl-b:6817");
  auto won = a->Campaign(nullptr);
  ASSERT_TRUE(won.ok()) << won.status().ToString();
  EXPECT_GT(won->epoch, 0);
  EXPECT_TRUE(a->leading());
  auto seen = b->Leader();
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->leader, "ctl-a:6817");
  EXPECT_EQ(seen->epoch, won->epoch);

  auto standby = std::async(std::launch::async, [&] { return b->Campaign(nullptr); });
  EXPECT_EQ(standby.wait_for(3s), std::future_status::timeout)
      << "the standby took over from a leader that keeps its lease";
  EXPECT_TRUE(a->leading()) << "the leader renewed its lease past its TTL";
  b->Stop();
  auto stopped = standby.get();
  EXPECT_EQ(stopped.status().code(), StatusCode::kCancelled);
}

// A leader that dies or freezes (Stop: no more renewals, nothing revoked) is replaced once its
// lease runs out, and the new leader's epoch is larger: the old one is fenced.
TEST_F(EtcdElectionTest, ALeaderThatStopsAnsweringIsReplacedWithinItsTtlUnderALargerEpoch) {
  auto a = Candidate("ctl-a:6817");
  auto b = Candidate("ctl-b:6817");
  auto first = a->Campaign(nullptr);
  ASSERT_TRUE(first.ok());
  auto standby = std::async(std::launch::async, [&] { return b->Campaign(nullptr); });
  ASSERT_TRUE(StandsBy(*b, first->epoch));
  const Clock::time_point gone = Clock::now();
  a->Stop();
  ASSERT_EQ(standby.wait_for(5s), std::future_status::ready) << "no takeover within 5 s";
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - gone);
  auto second = standby.get();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->leader, "ctl-b:6817");
  EXPECT_GT(second->epoch, first->epoch);
  EXPECT_LT(took, 4000ms) << "the TTL (2 s), a poll and a loaded machine's delays, no more";
  std::printf("takeover after the leader stopped: %lld ms\n", static_cast<long long>(took.count()));
}

TEST_F(EtcdElectionTest, AResigningLeaderIsReplacedAtOnce) {
  auto a = Candidate("ctl-a:6817");
  auto b = Candidate("ctl-b:6817");
  auto first = a->Campaign(nullptr);
  ASSERT_TRUE(first.ok());
  auto standby = std::async(std::launch::async, [&] { return b->Campaign(nullptr); });
  ASSERT_TRUE(StandsBy(*b, first->epoch));
  a->Resign();
  EXPECT_FALSE(a->leading());
  ASSERT_EQ(standby.wait_for(1500ms), std::future_status::ready)
      << "resigning should not wait a TTL";
  auto second = standby.get();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->leader, "ctl-b:6817");
}

// Cut off from etcd (here: etcd frozen with SIGSTOP), a leader must assume it lost the lead once
// a TTL has passed without a confirmed renewal: by then etcd may have handed it to another.
TEST_F(EtcdElectionTest, ALeaderCutOffFromEtcdGivesUpTheLeadWithinItsTtl) {
  auto a = Candidate("ctl-a:6817");
  std::promise<Clock::time_point> lost;
  ASSERT_TRUE(a->Campaign([&] { lost.set_value(Clock::now()); }).ok());
  const Clock::time_point cut = Clock::now();
  etcd_->Freeze(true);
  auto when = lost.get_future();
  ASSERT_EQ(when.wait_for(4s), std::future_status::ready) << "still believes it leads";
  EXPECT_FALSE(a->leading());
  // It gives up at 0.9 TTL after its last confirmed renewal, which came before the cut: so
  // within the TTL, plus what a loaded machine may delay its timer by.
  EXPECT_LE(when.get() - cut, 2500ms) << "a TTL after the last confirmed renewal, at the latest";
  etcd_->Freeze(false);
}

// A hot standby's rule: only a standby the leader recorded as in sync may take over; the first
// leader ever needs no record; a new leader is the only one in sync until it records others.
TEST_F(EtcdElectionTest, OnlyAStandbyRecordedInSyncTakesOver) {
  const std::string prefix = "/muster/t/";
  auto a = Candidate("ctl-a", prefix);
  auto b = Candidate("ctl-b", prefix);
  auto c = Candidate("ctl-c", prefix);
  auto first = a->Campaign(nullptr);
  ASSERT_TRUE(first.ok()) << first.status().ToString();  // nobody ever led: no record needed
  ASSERT_TRUE(a->RecordInSync("ctl-b", true).ok());
  ASSERT_TRUE(a->RecordInSync("ctl-c", true).ok());
  ASSERT_TRUE(a->RecordInSync("ctl-c", false).ok());  // c fell behind
  auto b_campaign = std::async(std::launch::async, [&] { return b->Campaign(nullptr); });
  auto c_campaign = std::async(std::launch::async, [&] { return c->Campaign(nullptr); });
  ASSERT_TRUE(StandsBy(*b, first->epoch));
  ASSERT_TRUE(StandsBy(*c, first->epoch));
  a->Stop();  // dies without resigning
  ASSERT_EQ(b_campaign.wait_for(5s), std::future_status::ready) << "the in-sync standby waits";
  auto second = b_campaign.get();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->leader, "ctl-b");
  EXPECT_GT(second->epoch, first->epoch);
  EXPECT_EQ(a->RecordInSync("ctl-c", true).code(), StatusCode::kFailedPrecondition)
      << "a deposed leader must not change who is in sync";

  // b leads alone in sync: when it dies, neither c (dropped by a) nor a (a copy from before b's
  // lead) may take over; b itself, restarted, may.
  auto a_again = Candidate("ctl-a", prefix);
  auto a_campaign = std::async(std::launch::async, [&] { return a_again->Campaign(nullptr); });
  b->Stop();
  EXPECT_EQ(a_campaign.wait_for(4s), std::future_status::timeout) << "a took over, not in sync";
  EXPECT_EQ(c_campaign.wait_for(0s), std::future_status::timeout) << "c took over, not in sync";
  EXPECT_EQ(a_again->Leader().status().code(), StatusCode::kNotFound);
  auto b_again = Candidate("ctl-b", prefix);
  auto third = b_again->Campaign(nullptr);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_GT(third->epoch, second->epoch);
  // b records a in sync: now a takes over when b resigns.
  ASSERT_TRUE(b_again->RecordInSync("ctl-a", true).ok());
  b_again->Resign();
  ASSERT_EQ(a_campaign.wait_for(3s), std::future_status::ready);
  auto fourth = a_campaign.get();
  ASSERT_TRUE(fourth.ok()) << fourth.status().ToString();
  EXPECT_EQ(fourth->leader, "ctl-a");
  c->Stop();
  EXPECT_EQ(c_campaign.get().status().code(), StatusCode::kCancelled);
}

// What only another etcd client could do to the leader key (etcd trusts the controllers' own
// certificate alone; this is that certificate): the leader must notice at once, not at the end
// of a lease that is still being renewed.
TEST_F(EtcdElectionTest, ALeaderWhoseKeyIsDeletedOrOverwrittenStepsDownAtOnce) {
  for (bool overwrite : {false, true}) {
    auto a = Candidate("ctl-a");
    std::promise<void> lost;
    auto won = a->Campaign([&] { lost.set_value(); });
    ASSERT_TRUE(won.ok()) << won.status().ToString();
    auto kv = RawKv();
    grpc::ClientContext ctx;
    if (overwrite) {  // the same name, detached from the lease: it would never expire
      etcdserverpb::PutRequest put;
      put.set_key("/muster/controller/leader");
      put.set_value("ctl-a");
      etcdserverpb::PutResponse resp;
      ASSERT_TRUE(kv->Put(&ctx, put, &resp).ok());
    } else {
      etcdserverpb::DeleteRangeRequest del;
      del.set_key("/muster/controller/leader");
      etcdserverpb::DeleteRangeResponse resp;
      ASSERT_TRUE(kv->DeleteRange(&ctx, del, &resp).ok());
    }
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(lost.get_future().wait_for(1500ms), std::future_status::ready)
        << (overwrite ? "overwritten" : "deleted") << " key: the leader did not step down";
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "not at once";
    EXPECT_FALSE(a->leading());
    a->Stop();
    // The overwritten key holds no lease and names a controller that no longer leads: the
    // next campaign removes it (it is no candidate's) and someone leads again.
    auto b = Candidate("ctl-b");
    auto next = b->Campaign([] {});
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    EXPECT_EQ(next->leader, "ctl-b");
    b->Resign();
  }
}

// A leader key without a lease (no candidate writes one) is said, removed and campaigned past,
// not waited on forever; one under a lease naming an unknown controller is waited out.
TEST_F(EtcdElectionTest, AKeyNoCandidateWroteIsRemovedAndAnUnknownLeaderIsWaitedOut) {
  auto kv = RawKv();
  {
    grpc::ClientContext ctx;
    etcdserverpb::PutRequest put;
    put.set_key("/muster/controller/leader");
    put.set_value("intruder:6817");
    etcdserverpb::PutResponse resp;
    ASSERT_TRUE(kv->Put(&ctx, put, &resp).ok());
  }
  EtcdElectionOptions o = etcd_->Options("/muster/controller/leader", "ctl-a");
  o.candidates = {"ctl-a", "ctl-b"};
  o.poll = 100ms;
  auto a = EtcdElection::Create(o);
  ASSERT_TRUE(a.ok());
  auto campaign = std::async(std::launch::async, [&] { return (*a)->Campaign([] {}); });
  ASSERT_EQ(campaign.wait_for(5s), std::future_status::ready) << "it waited on the intruder";
  auto won = campaign.get();
  ASSERT_TRUE(won.ok()) << won.status().ToString();
  EXPECT_EQ(won->leader, "ctl-a");
  (*a)->Resign();

  // Under a lease, a name this candidate does not know may be a controller of a newer config:
  // said and waited out, never removed.
  auto leases = etcdserverpb::Lease::NewStub(RawChannel());
  etcdserverpb::LeaseGrantResponse lease;
  {
    grpc::ClientContext ctx;
    etcdserverpb::LeaseGrantRequest grant;
    grant.set_ttl(30);
    ASSERT_TRUE(leases->LeaseGrant(&ctx, grant, &lease).ok());
    grpc::ClientContext put_ctx;
    etcdserverpb::PutRequest put;
    put.set_key("/muster/controller/leader");
    put.set_value("ctl-new");
    put.set_lease(lease.id());
    etcdserverpb::PutResponse resp;
    ASSERT_TRUE(kv->Put(&put_ctx, put, &resp).ok());
  }
  auto b = EtcdElection::Create(o);
  ASSERT_TRUE(b.ok());
  auto waiting = std::async(std::launch::async, [&] { return (*b)->Campaign([] {}); });
  EXPECT_EQ(waiting.wait_for(1500ms), std::future_status::timeout) << "it deposed ctl-new";
  {
    grpc::ClientContext ctx;
    etcdserverpb::LeaseRevokeRequest revoke;
    revoke.set_id(lease.id());
    etcdserverpb::LeaseRevokeResponse resp;
    ASSERT_TRUE(leases->LeaseRevoke(&ctx, revoke, &resp).ok());
  }
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  auto next = waiting.get();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->leader, "ctl-a");
  (*b)->Resign();
}

TEST(EtcdElectionOptionsTest, MistakesAreRefused) {
  EtcdElectionOptions o;
  o.candidate = "x";
  o.tls = TlsIdentity{};
  EXPECT_EQ(EtcdElection::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.endpoints = {"127.0.0.1:2379"};
  o.tls.reset();
  auto plain = EtcdElection::Create(o);
  EXPECT_EQ(plain.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plain.status().message().find("must know its clients"), std::string::npos);
  o.tls = TlsIdentity{};
  o.ttl_s = 0;
  EXPECT_EQ(EtcdElection::Create(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace muster::ha
