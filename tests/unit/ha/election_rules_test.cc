// The election's verdicts on etcd's answers, fed the replies an etcd (or whoever answers in its
// place) might send: only a write that went in, or a key under our own lease, is a lead; any
// change to the leader's key ends it; a renewal counts only for our own lease.
#include "election_rules.h"

#include <gtest/gtest.h>

namespace muster::ha {
namespace {

constexpr int64_t kOurLease = 77;

etcdserverpb::TxnResponse KeyHeldBy(const std::string& name, int64_t created, int64_t lease) {
  etcdserverpb::TxnResponse r;
  r.set_succeeded(false);
  etcdserverpb::KeyValue* kv = r.add_responses()->mutable_response_range()->add_kvs();
  kv->set_key("/muster/controller/leader");
  kv->set_value(name);
  kv->set_create_revision(created);
  kv->set_mod_revision(created + 3);
  kv->set_lease(lease);
  return r;
}

TEST(ElectionRulesTest, OnlyOurWriteOrOurOwnKeyIsALead) {
  etcdserverpb::TxnResponse won;
  won.set_succeeded(true);
  won.mutable_header()->set_revision(12);
  CampaignVerdict v = JudgeCampaign(won, kOurLease, "ctl-a:7000");
  EXPECT_EQ(v.kind, CampaignVerdict::kWeLead);
  EXPECT_EQ(v.leader.leader, "ctl-a:7000");
  EXPECT_EQ(v.leader.epoch, 12);
  EXPECT_EQ(v.leader.lease, kOurLease);
  // A success with no revision has no epoch to fence with: not a lead.
  won.mutable_header()->set_revision(0);
  EXPECT_EQ(JudgeCampaign(won, kOurLease, "ctl-a:7000").kind, CampaignVerdict::kUnclear);

  v = JudgeCampaign(KeyHeldBy("ctl-a:7000", 9, kOurLease), kOurLease, "ctl-a:7000");
  EXPECT_EQ(v.kind, CampaignVerdict::kWeLead) << "our key from an attempt whose answer was lost";
  EXPECT_EQ(v.leader.epoch, 9);

  v = JudgeCampaign(KeyHeldBy("ctl-b:7000", 9, 88), kOurLease, "ctl-a:7000");
  EXPECT_EQ(v.kind, CampaignVerdict::kOtherLeads);
  EXPECT_EQ(v.leader.leader, "ctl-b:7000");
  // Our name under another lease is someone else's key (a copy of us, or a forgery).
  EXPECT_EQ(JudgeCampaign(KeyHeldBy("ctl-a:7000", 9, 88), kOurLease, "ctl-a:7000").kind,
            CampaignVerdict::kOtherLeads);

  v = JudgeCampaign(KeyHeldBy("intruder", 9, 0), kOurLease, "ctl-a:7000");
  EXPECT_EQ(v.kind, CampaignVerdict::kForeignKey) << "a key under no lease would never expire";
  EXPECT_EQ(v.mod_revision, 12) << "only that write of it is removed";

  for (int64_t bad : {int64_t{0}, int64_t{-4}}) {
    EXPECT_EQ(JudgeCampaign(KeyHeldBy("ctl-b:7000", bad, 88), kOurLease, "ctl-a:7000").kind,
              CampaignVerdict::kUnclear);
  }
  EXPECT_EQ(JudgeCampaign(KeyHeldBy("ctl-b:7000", 9, -1), kOurLease, "ctl-a:7000").kind,
            CampaignVerdict::kUnclear);

  etcdserverpb::TxnResponse nobody;
  nobody.add_responses()->mutable_response_range();
  EXPECT_EQ(JudgeCampaign(nobody, kOurLease, "ctl-a:7000").kind, CampaignVerdict::kNobodyLeads);
  etcdserverpb::TxnResponse two = KeyHeldBy("x", 9, kOurLease);
  *two.mutable_responses(0)->mutable_response_range()->add_kvs() =
      two.responses(0).response_range().kvs(0);
  EXPECT_EQ(JudgeCampaign(two, kOurLease, "ctl-a:7000").kind, CampaignVerdict::kUnclear);
  EXPECT_EQ(JudgeCampaign(etcdserverpb::TxnResponse(), kOurLease, "ctl-a:7000").kind,
            CampaignVerdict::kUnclear);
}

TEST(ElectionRulesTest, AnyChangeToTheLeadersKeyEndsTheLead) {
  etcdserverpb::RangeResponse now;
  EXPECT_EQ(LeadLostInRead(now, 9, kOurLease), "the leader key vanished");
  etcdserverpb::KeyValue* kv = now.add_kvs();
  kv->set_create_revision(9);
  kv->set_mod_revision(9);
  kv->set_lease(kOurLease);
  EXPECT_EQ(LeadLostInRead(now, 9, kOurLease), "");
  kv->set_mod_revision(10);  // written again, even with the same value
  EXPECT_NE(LeadLostInRead(now, 9, kOurLease), "");
  kv->set_mod_revision(9);
  kv->set_lease(78);  // moved to another lease (or detached: 0)
  EXPECT_NE(LeadLostInRead(now, 9, kOurLease), "");
  kv->set_lease(kOurLease);
  kv->set_create_revision(11);  // deleted and made again
  kv->set_mod_revision(11);
  EXPECT_NE(LeadLostInRead(now, 9, kOurLease), "");
  *now.add_kvs() = now.kvs(0);
  EXPECT_NE(LeadLostInRead(now, 11, kOurLease), "");

  etcdserverpb::WatchResponse event;
  event.set_created(true);
  EXPECT_EQ(JudgeWatch(event), WatchVerdict::kKeepWatching);
  event.set_compact_revision(5);
  EXPECT_EQ(JudgeWatch(event), WatchVerdict::kRestart);
  event.set_compact_revision(0);
  event.set_canceled(true);
  EXPECT_EQ(JudgeWatch(event), WatchVerdict::kRestart);
  event.add_events()->set_type(etcdserverpb::Event::DELETE);
  EXPECT_EQ(JudgeWatch(event), WatchVerdict::kDeleted) << "a change counts, cancelled or not";
  event.mutable_events(0)->set_type(etcdserverpb::Event::PUT);
  EXPECT_EQ(JudgeWatch(event), WatchVerdict::kOverwritten);
}

TEST(ElectionRulesTest, ARenewalCountsOnlyForOurLease) {
  etcdserverpb::LeaseKeepAliveResponse r;
  r.set_id(kOurLease);
  r.set_ttl(2);
  EXPECT_EQ(JudgeKeepAlive(r, kOurLease), 2);
  r.set_ttl(0);
  EXPECT_EQ(JudgeKeepAlive(r, kOurLease), 0) << "etcd no longer has it";
  r.set_ttl(-3);
  EXPECT_EQ(JudgeKeepAlive(r, kOurLease), 0);
  r.set_id(78);
  r.set_ttl(2);
  EXPECT_EQ(JudgeKeepAlive(r, kOurLease), -1) << "another lease's renewal kept ours alive";
  EXPECT_EQ(JudgeKeepAlive(etcdserverpb::LeaseKeepAliveResponse(), kOurLease), -1);
}

}  // namespace
}  // namespace muster::ha
