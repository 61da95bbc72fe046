// GPU quotas through the engine: guaranteed GPUs, borrowing from the cohort (jobs marked
// borrowed), an owner taking its GPUs back by preemption within a pass plus the victims' grace,
// jobs that accept several GPU types, quotas changed live and kept across restarts, bad input.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

// 32 h100 (node1-4) and 16 a100 (node5-6). physics and bio share cohort "science" with 16
// guaranteed h100 each; chem holds no quota.
constexpr const char* kQuotaConfig = R"(
cluster_name = "t"
admins = ["ops"]
[scheduling]
heartbeat_interval_ms = 1000
node_not_responding_ms = 3000
node_down_ms = 10000
kill_grace_ms = 100
[[nodes]]
names = "node[1-4]"
cpus = 16
memory_mb = 64000
gpus = 8
gpu_type = "h100"
topology = "spine1/leaf1"
[[nodes]]
names = "node[5-6]"
cpus = 16
memory_mb = 64000
gpus = 8
gpu_type = "a100"
topology = "spine1/leaf2"
[[partition]]
name = "gpu"
nodes = "node[1-6]"
default = true

[[qos]]
name = "normal"
grace_time = "3s"

[[accounts]]
name = "physics"
users = ["alice"]
cohort = "science"
quota = { h100 = 16, a100 = { guaranteed = 8, max = 8 } }

[[accounts]]
name = "bio"
users = ["bob"]
cohort = "science"
quota = { h100 = { guaranteed = 16, max = 24 } }

[[accounts]]
name = "chem"
users = ["carol"]
)";

class QuotaTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    auto c = ParseConfig(kQuotaConfig, "test.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    Restart();
    for (const char* n : {"node1", "node2", "node3", "node4", "node5", "node6"}) Up(n);
  }

  static Caller Carol() { return {1002, 1002, "carol", false}; }

  Result<uint64_t> SubmitGpus(uint32_t gpus, const std::string& type, Caller who) {
    v1::JobSpec s = Gang(1, gpus);
    s.set_gpu_type(type);
    return Submit(s, who);
  }

  v1::QuotaUse Use(const std::string& account, const std::string& type) {
    auto all = engine_->ListAccounts(Root());
    EXPECT_TRUE(all.ok());
    for (const v1::QuotaUse& u : all->quota_use()) {
      if (u.account() == account && u.gpu_type() == type) return u;
    }
    ADD_FAILURE() << "no quota " << account << "/" << type;
    return {};
  }
};

TEST_F(QuotaTest, BorrowedGpusAreMarkedAndTheOwnerTakesThemBackWithinAPassPlusGrace) {
  // physics runs 4 nodes' worth of h100: 16 guaranteed, 16 borrowed from bio's idle quota.
  std::vector<uint64_t> alice;
  for (int i = 0; i < 4; ++i) {
    auto id = SubmitGpus(8, "h100", Alice());
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    alice.push_back(*id);
    Pass();
    Run(*id);
    now_ += 1000;
  }
  EXPECT_FALSE(Job(alice[0]).borrowed());
  EXPECT_FALSE(Job(alice[1]).borrowed());
  EXPECT_TRUE(Job(alice[2]).borrowed());
  EXPECT_TRUE(Job(alice[3]).borrowed());
  EXPECT_EQ(Use("physics", "h100").used(), 32u);
  EXPECT_EQ(Use("physics", "h100").borrowed(), 16u);
  EXPECT_EQ(Use("bio", "h100").lent(), 16u);
  // A fifth would borrow beyond what bio lends.
  auto fifth = SubmitGpus(8, "h100", Alice());
  Pass();
  EXPECT_EQ(Job(*fifth).reason(), "QuotaBorrow") << Job(*fifth).reason_detail();
  ASSERT_TRUE(engine_
                  ->CancelJob(
                      Root(),
                      [&] {
                        v1::CancelJobRequest r;
                        r.add_job_ids(*fifth);
                        return r;
                      }(),
                      now_)
                  .ok());
  Flush();

  // bio comes back for 8 of its guaranteed 16: in the same pass, the most recently started
  // borrowed job of physics is told to stop, with its QoS's 3 s of grace.
  auto owner = SubmitGpus(8, "h100", Bob());
  Pass();
  ASSERT_EQ(Job(alice[3]).state(), v1::PENDING);
  EXPECT_EQ(Job(alice[3]).reason(), "Preempted");
  EXPECT_NE(Job(alice[3]).reason_detail().find("reclaimed by job " + std::to_string(*owner) +
                                               " (account bio's guaranteed h100 GPUs)"),
            std::string::npos)
      << Job(alice[3]).reason_detail();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(Job(alice[i]).state(), v1::RUNNING) << i;
  const std::string node = Job(alice[3]).nodes(0);
  auto sent = Sent(node);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(sent[0].has_terminate_job());
  EXPECT_EQ(sent[0].terminate_job().kill_grace_ms(), 3000u);
  // Once it has left (within the grace), the owner starts there, unborrowed.
  now_ += 3000;
  Cleaned(alice[3], node);
  Pass();
  ASSERT_EQ(Job(*owner).state(), v1::RUNNING) << Job(*owner).reason_detail();
  EXPECT_EQ(Job(*owner).nodes(0), node);
  EXPECT_FALSE(Job(*owner).borrowed());
  // The requeued borrower cannot borrow again: bio lends only 8 now, physics borrows 8.
  Pass();
  EXPECT_EQ(Job(alice[3]).state(), v1::PENDING);
  EXPECT_EQ(Job(alice[3]).reason(), "QuotaBorrow") << Job(alice[3]).reason_detail();
}

TEST_F(QuotaTest, JobsWithinTheirGuaranteeAreNeverReclaimed) {
  // physics holds exactly its 16; bio borrows 8 and runs its own 16: the cluster's h100 are
  // full. A new physics job within its guarantee takes back the borrowed one, not bio's own.
  std::vector<uint64_t> bio;
  for (int i = 0; i < 3; ++i) {
    auto id = SubmitGpus(8, "h100", Bob());
    ASSERT_TRUE(id.ok());
    bio.push_back(*id);
    Pass();
    Run(*id);
    now_ += 1000;
  }
  auto p1 = SubmitGpus(8, "h100", Alice());
  Pass();
  Run(*p1);
  EXPECT_TRUE(Job(bio[2]).borrowed());
  auto p2 = SubmitGpus(8, "h100", Alice());
  Pass();
  EXPECT_EQ(Job(bio[0]).state(), v1::RUNNING);
  EXPECT_EQ(Job(bio[1]).state(), v1::RUNNING);
  EXPECT_EQ(Job(bio[2]).state(), v1::PENDING);
  EXPECT_EQ(Job(*p1).state(), v1::RUNNING);
  // A physics job beyond its guarantee reclaims nothing: it waits for the cohort to lend.
  Cleaned(bio[2], Job(bio[2]).nodes(0));
  Pass();
  ASSERT_EQ(Job(*p2).state(), v1::RUNNING);
  auto p3 = SubmitGpus(8, "h100", Alice());
  Pass();
  EXPECT_EQ(Job(*p3).state(), v1::PENDING);
  EXPECT_EQ(Job(*p3).reason(), "QuotaBorrow");
  for (uint64_t id : {bio[0], bio[1], *p1, *p2}) EXPECT_EQ(Job(id).state(), v1::RUNNING) << id;
}

TEST_F(QuotaTest, AJobWithoutAQuotaOnAQuotaTypeRunsBorrowedAndIsReclaimed) {
  // chem holds no quota: its h100 jobs run on what physics and bio are guaranteed.
  std::vector<uint64_t> chem;
  for (int i = 0; i < 4; ++i) {
    auto id = SubmitGpus(8, "h100", Carol());
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    chem.push_back(*id);
    Pass();
    Run(*id);
    now_ += 1000;
  }
  for (uint64_t id : chem) EXPECT_TRUE(Job(id).borrowed()) << id;
  // A CPU-only job is not borrowed.
  auto cpu = Submit(Gang(1, 0), Carol());
  Pass();
  EXPECT_FALSE(Job(*cpu).borrowed());
  auto owner = SubmitGpus(8, "h100", Alice());
  Pass();
  EXPECT_EQ(Job(chem[3]).state(), v1::PENDING);
  EXPECT_EQ(Job(chem[3]).reason(), "Preempted");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Job(chem[i]).state(), v1::RUNNING);
  EXPECT_EQ(Job(*owner).state(), v1::PENDING);
}

TEST_F(QuotaTest, AJobThatAcceptsSeveralTypesRunsOnTheNextWhenTheFirstHasNoQuota) {
  // physics's a100 quota is 8 (max 8): its second a100|h100 job runs on h100.
  v1::JobSpec s = Gang(1, 8);
  s.add_gpu_types("a100");
  s.add_gpu_types("h100");
  auto first = Submit(s, Alice());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = Submit(s, Alice());
  ASSERT_TRUE(second.ok());
  Pass();
  ASSERT_EQ(Job(*first).state(), v1::RUNNING);
  ASSERT_EQ(Job(*second).state(), v1::RUNNING);
  auto type_of = [&](uint64_t id) { return Node(Job(id).nodes(0)).gpu_type(); };
  EXPECT_EQ(type_of(*first), "a100");
  EXPECT_EQ(type_of(*second), "h100");
  EXPECT_EQ(Job(*first).gpu_type(), "a100|h100");
  EXPECT_EQ(Use("physics", "a100").used(), 8u);
  EXPECT_EQ(Use("physics", "h100").used(), 8u);
  // A job that names no type runs on its account's quota types only.
  auto any = Submit(Gang(1, 8), Alice());
  Pass();
  ASSERT_EQ(Job(*any).state(), v1::RUNNING);
  EXPECT_EQ(type_of(*any), "h100");

  // Bad alternatives are refused: a type no node has, a type named twice.
  v1::JobSpec bad = Gang(1, 8);
  bad.add_gpu_types("h100");
  bad.add_gpu_types("v100");
  auto r = Submit(bad, Alice());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("v100"), std::string::npos) << r.status().message();
  bad.set_gpu_types(1, "H100");
  r = Submit(bad, Alice());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("named twice"), std::string::npos) << r.status().message();
}

TEST_F(QuotaTest, MaxCapsAnAccountEvenWhenTheCohortLends) {
  // bio may hold at most 24 h100 though physics lends 16.
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = SubmitGpus(8, "h100", Bob());
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  Pass();
  EXPECT_EQ(Job(ids[2]).state(), v1::RUNNING);
  EXPECT_EQ(Job(ids[3]).state(), v1::PENDING);
  EXPECT_EQ(Job(ids[3]).reason(), "QuotaMax");
  EXPECT_NE(Job(ids[3]).reason_detail().find("account bio: h100 GPUs: 24 in use of at most 24"),
            std::string::npos)
      << Job(ids[3]).reason_detail();
  // muster explain names the quota and the first of bio's jobs whose end makes room.
  v1::ExplainJobRequest er;
  er.set_job_id(ids[3]);
  auto x = engine_->ExplainJob(Root(), er, now_);
  ASSERT_TRUE(x.ok());
  ASSERT_EQ(x->explanation().limits_size(), 1);
  const v1::LimitHeld& l = x->explanation().limits(0);
  EXPECT_EQ(l.reason(), "QuotaMax");
  EXPECT_EQ(l.used(), 24u);
  EXPECT_EQ(l.max(), 24u);
  EXPECT_EQ(l.over(), 8u);
  ASSERT_EQ(l.freeing_jobs_size(), 1);
  EXPECT_EQ(l.freeing_jobs(0), ids[0]);
  EXPECT_NE(l.frees().find("when 8 more are free: after job " + std::to_string(ids[0])),
            std::string::npos)
      << l.frees();
}

// With a QoS that preempts: on GPUs under quotas it acts among the jobs of one quota, and only
// where the preemptor then runs within its guarantee; across accounts, only reclaim moves GPUs.
class QuotaQosTest : public QuotaTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    auto c = ParseConfig(std::string(kQuotaConfig) +
                             "[[qos]]\nname = \"high\"\npriority = 10\npreempt = [\"normal\"]\n",
                         "test.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    Restart();
    for (const char* n : {"node1", "node2", "node3", "node4", "node5", "node6"}) Up(n);
  }
  uint64_t Running(const Caller& who, const std::string& qos = "normal") {
    v1::JobSpec s = Gang(1, 8);
    s.set_gpu_type("h100");
    s.set_qos(qos);
    auto id = Submit(s, who);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    Pass();
    EXPECT_EQ(Job(*id).state(), v1::RUNNING) << Job(*id).reason_detail();
    Run(*id);
    now_ += 1000;
    return *id;
  }
  uint64_t Pending(const Caller& who) {
    v1::JobSpec s = Gang(1, 8);
    s.set_gpu_type("h100");
    s.set_qos("high");
    auto id = Submit(s, who);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    Pass();
    return *id;
  }
};

TEST_F(QuotaQosTest, AnotherAccountsHighQosDoesNotTakeAGuarantee) {
  // Each account at its 16 guaranteed h100: the h100 nodes are full. physics started last, so
  // its jobs would lose the least work: the cheapest victims, were they not guaranteed.
  const std::vector<uint64_t> bio = {Running(Bob()), Running(Bob())};
  const std::vector<uint64_t> physics = {Running(Alice()), Running(Alice())};
  const uint64_t high = Pending(Bob());
  EXPECT_EQ(Job(high).state(), v1::PENDING);
  for (uint64_t id : physics) EXPECT_EQ(Job(id).state(), v1::RUNNING) << "physics' guarantee";
  // Its own account's normal job gives way: bio stays within its 16.
  Pass();
  int preempted = 0;
  for (uint64_t id : bio) preempted += Job(id).state() == v1::PENDING;
  EXPECT_EQ(preempted, 1);
  EXPECT_NE(Job(bio[1]).reason_detail().find("(qos high)"), std::string::npos)
      << Job(bio[1]).reason_detail();
  for (uint64_t id : physics) EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(QuotaQosTest, NoPreemptionByQosToRunOnBorrowedGpus) {
  // physics holds 24: 16 guaranteed and 8 borrowed from bio (which lends its idle 16).
  const std::vector<uint64_t> physics = {Running(Alice()), Running(Alice()), Running(Alice())};
  EXPECT_TRUE(Job(physics[2]).borrowed());
  const uint64_t filler = Running(Carol());  // the last h100 node: no quota, borrowed
  // A high job of physics would replace one of its own and still borrow: not done.
  const uint64_t high = Pending(Alice());
  Pass();
  EXPECT_EQ(Job(high).state(), v1::PENDING);
  for (uint64_t id : physics) EXPECT_EQ(Job(id).state(), v1::RUNNING);
  // chem's job has no quota: QoS does not reach it across accounts either.
  EXPECT_EQ(Job(filler).state(), v1::RUNNING);
}

TEST_F(QuotaTest, QuotasChangeLiveForAdminsAndSurviveRestarts) {
  v1::UpdateAccountRequest add;
  add.set_op(v1::ACCOUNT_OP_ADD);
  add.set_name("astro");
  add.set_cohort("science");
  v1::GpuQuota q;
  q.set_guaranteed(8);
  q.set_lending_limit(4);
  (*add.mutable_quotas())["h100"] = q;
  EXPECT_FALSE(engine_->UpdateAccount(Alice(), add, now_).ok());  // not an admin
  ASSERT_TRUE(engine_->UpdateAccount(Root(), add, now_).ok());
  // The audit log says what changed.
  auto audit = engine_->ListAudit(Root(), Chronological(), now_);
  ASSERT_TRUE(audit.ok());
  ASSERT_GT(audit->entries_size(), 0);
  const v1::AuditEntry& last = audit->entries(audit->entries_size() - 1);
  EXPECT_EQ(last.target(), "account astro");
  EXPECT_NE(last.detail().find("cohort=science"), std::string::npos) << last.detail();
  EXPECT_NE(last.detail().find("quota=h100:8:-:4"), std::string::npos) << last.detail();
  Restart();
  EXPECT_EQ(Use("astro", "h100").lent(), 4u);
  // Bad quotas are refused and change nothing.
  v1::UpdateAccountRequest bad;
  bad.set_op(v1::ACCOUNT_OP_MODIFY);
  bad.set_name("astro");
  v1::GpuQuota over;
  over.set_guaranteed(8);
  over.set_max(4);
  (*bad.mutable_quotas())["h100"] = over;
  auto r = engine_->UpdateAccount(Root(), bad, now_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("below guaranteed"), std::string::npos);
  over.clear_max();
  over.set_lending_limit(9);
  (*bad.mutable_quotas())["h100"] = over;
  EXPECT_FALSE(engine_->UpdateAccount(Root(), bad, now_).ok());
  over.clear_lending_limit();
  over.set_guaranteed(2'000'000'000);
  (*bad.mutable_quotas())["h100"] = over;
  EXPECT_FALSE(engine_->UpdateAccount(Root(), bad, now_).ok());
  EXPECT_EQ(Use("astro", "h100").lent(), 4u);
  // Removing a quota: guaranteed 4294967295.
  v1::GpuQuota none;
  none.set_guaranteed(0xFFFFFFFFu);
  (*bad.mutable_quotas())["h100"] = none;
  ASSERT_TRUE(engine_->UpdateAccount(Root(), bad, now_).ok());
  auto all = engine_->ListAccounts(Root());
  for (const v1::QuotaUse& u : all->quota_use()) EXPECT_NE(u.account(), "astro");
}

TEST(QuotaConfig, BadQuotasAreClearErrors) {
  auto parse = [](const std::string& account) {
    return ParseConfig(std::string(kConfig) + "[[accounts]]\nname = \"a\"\n" + account, "q.toml");
  };
  EXPECT_TRUE(parse("quota = { h100 = 16 }\ncohort = \"x\"\n").ok());
  auto r = parse("quota = { h100 = { guaranteed = 16, max = 8 } }\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max is below guaranteed"), std::string::npos)
      << r.status().message();
  r = parse("quota = { h100 = { guaranteed = 4, lending_limit = 8 } }\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lending_limit is above guaranteed"), std::string::npos);
  r = parse("quota = { h100 = { guaranteed = 4, borrow = 8 } }\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown key 'accounts.quota.h100.borrow'"),
            std::string::npos)
      << r.status().message();
  r = parse("quota = { h100 = -1 }\n");
  ASSERT_FALSE(r.ok());
  r = parse("quota = 16\n");
  ASSERT_FALSE(r.ok());
  r = parse("cohort = \"a b\"\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad cohort name"), std::string::npos);
}

}  // namespace
}  // namespace muster::controller
