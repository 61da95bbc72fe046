// QoS, account and QoS limits, and preemption through the engine: which QoS a job gets, the
// limit that holds it back (named as Slurm names it, with the numbers), and high-QoS jobs that
// push low-QoS gangs off whole, with their signal and grace, requeued or ended.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

constexpr const char* kPolicy = R"(
[[qos]]
name = "low"
priority = 0
grace_time = "2s"

[[qos]]
name = "high"
priority = 100
preempt = ["low"]

[[qos]]
name = "scavenger"
preempt_mode = "cancel"

[[qos]]
name = "urgent"
priority = 200
preempt = ["scavenger", "low"]

[[qos]]
name = "short"
max_wall = "1:00:00"
max_jobs_per_user = 1
flags = []

[[qos]]
name = "strict"
max_wall = "1:00:00"
max_submit_jobs_per_user = 2
flags = ["DenyOnLimit"]

[[accounts]]
name = "physics"
users = ["alice"]
qos = ["normal", "low", "high", "short", "strict", "scavenger", "urgent"]
default_qos = "low"
grp_gpus = { h100 = 16 }

[[accounts]]
name = "bio"
users = ["bob"]
qos = ["normal", "high"]
grp_jobs = 1
)";

class QosTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    UseConfig(kPolicy);
  }

  Result<uint64_t> SubmitQos(uint32_t nodes, uint32_t gpus, const std::string& qos,
                             Caller who = Alice(), const std::string& topology = "") {
    v1::JobSpec s = Gang(nodes, gpus);
    s.set_qos(qos);
    s.set_topology(topology);
    return Submit(s, who);
  }
};

TEST_F(QosTest, JobsGetTheAccountsDefaultQosAndOnlyAllowedOnes) {
  auto id = SubmitQos(1, 1, "");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(Job(*id).qos(), "low");
  auto refused = SubmitQos(1, 1, "urgent", Bob());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("may not use qos 'urgent'"), std::string::npos)
      << refused.status().message();
  auto unknown = SubmitQos(1, 1, "gold");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("invalid qos 'gold'"), std::string::npos);
}

TEST_F(QosTest, QosPriorityOrdersPendingJobs) {
  // Every GPU busy, then a low and a high job wait: the high one is first in line.
  auto filler = SubmitQos(4, 8, "normal", Root());
  Pass();
  ASSERT_EQ(Job(*filler).state(), v1::RUNNING);
  auto low = SubmitQos(1, 8, "low");
  auto high = SubmitQos(1, 8, "high", Bob());
  Pass();
  EXPECT_GT(Job(*high).priority(), Job(*low).priority());
  EXPECT_DOUBLE_EQ(Job(*high).priority_factors().qos(), 0.5);  // 100 of 200
}

TEST_F(QosTest, AccountGpuLimitHoldsJobsWithTheReasonAndNumbers) {
  auto a = SubmitQos(1, 8, "normal");
  auto b = SubmitQos(1, 8, "normal");
  auto c = SubmitQos(1, 8, "normal");
  Pass();
  EXPECT_EQ(Job(*a).state(), v1::RUNNING);
  EXPECT_EQ(Job(*b).state(), v1::RUNNING);
  ASSERT_EQ(Job(*c).state(), v1::PENDING);
  EXPECT_EQ(Job(*c).reason(), "AssocGrpGRES");
  EXPECT_NE(Job(*c).reason_detail().find("account physics: h100 GPUs (GrpTRES gres/gpu:h100): "
                                         "16 of 16 in use, this job needs 8"),
            std::string::npos)
      << Job(*c).reason_detail();
  // A GPU limit holds back no CPU-only job, and no other account.
  auto bob = SubmitQos(1, 8, "normal", Bob());
  Pass();
  EXPECT_EQ(Job(*bob).state(), v1::RUNNING);
  // When one ends, the held job starts.
  Run(*a);
  const std::string node = Job(*a).nodes(0);
  Exited(*a, node, 0);
  Cleaned(*a, node);
  Pass();
  EXPECT_EQ(Job(*c).state(), v1::RUNNING);
}

TEST_F(QosTest, ExplainNamesTheLimitHowFarOverAndTheJobsWhoseEndFreesIt) {
  v1::JobSpec one_hour = Gang(1, 8);
  one_hour.set_qos("normal");
  one_hour.set_time_limit_ms(2 * 3'600'000);
  auto a = Submit(one_hour, Alice());
  one_hour.set_time_limit_ms(3'600'000);
  auto b = Submit(one_hour, Alice());
  Pass();
  auto c = SubmitQos(2, 8, "normal");  // 16 more where 16 of 16 are in use
  Pass();
  ASSERT_EQ(Job(*c).state(), v1::PENDING);
  v1::ExplainJobRequest er;
  er.set_job_id(*c);
  auto x = engine_->ExplainJob(Root(), er, now_);
  ASSERT_TRUE(x.ok());
  const v1::JobExplanation& e = x->explanation();
  ASSERT_EQ(e.limits_size(), 1);
  const v1::LimitHeld& l = e.limits(0);
  EXPECT_EQ(l.reason(), "AssocGrpGRES");
  EXPECT_EQ(l.what(), "account physics: h100 GPUs (GrpTRES gres/gpu:h100)");
  EXPECT_EQ(l.used(), 16u);
  EXPECT_EQ(l.max(), 16u);
  EXPECT_EQ(l.need(), 16u);
  EXPECT_EQ(l.over(), 16u);
  // Both must end; b's limit comes first; the limit frees when a's does.
  ASSERT_EQ(l.freeing_jobs_size(), 2);
  EXPECT_EQ(l.freeing_jobs(0), *b);
  EXPECT_EQ(l.freeing_jobs(1), *a);
  EXPECT_EQ(l.free_at_ms(), now_ + 2 * 3'600'000);
  EXPECT_EQ(e.summary().rfind("held back by AssocGrpGRES", 0), 0u) << e.summary();
  // A job over the limit on its own can never start under it.
  auto huge = SubmitQos(3, 8, "normal");
  ASSERT_TRUE(huge.ok());
  Pass();
  er.set_job_id(*huge);
  x = engine_->ExplainJob(Root(), er, now_);
  ASSERT_TRUE(x.ok());
  ASSERT_EQ(x->explanation().limits_size(), 1);
  EXPECT_NE(x->explanation().limits(0).frees().find("can never start under it"), std::string::npos)
      << x->explanation().limits(0).frees();
}

TEST_F(QosTest, AccountRunningJobLimitAndQosPerUserLimit) {
  auto b1 = SubmitQos(1, 1, "normal", Bob());
  auto b2 = SubmitQos(1, 1, "normal", Bob());
  auto s1 = SubmitQos(1, 1, "short");
  auto s2 = SubmitQos(1, 1, "short");
  Pass();
  EXPECT_EQ(Job(*b1).state(), v1::RUNNING);
  EXPECT_EQ(Job(*b2).reason(), "AssocGrpJobsLimit");
  EXPECT_EQ(Job(*s1).state(), v1::RUNNING);
  EXPECT_EQ(Job(*s2).reason(), "QOSMaxJobsPerUserLimit");
  EXPECT_NE(Job(*s2).reason_detail().find("1 of 1 in use"), std::string::npos)
      << Job(*s2).reason_detail();
}

TEST_F(QosTest, WallLimitHoldsOrRefusesUnderDenyOnLimit) {
  v1::JobSpec s = Gang(1, 1);
  s.set_qos("short");
  s.set_time_limit_ms(2 * 3'600'000);
  auto held = Submit(s, Alice());
  ASSERT_TRUE(held.ok());
  Pass();
  EXPECT_EQ(Job(*held).reason(), "QOSMaxWallDurationPerJobLimit");
  EXPECT_NE(Job(*held).reason_detail().find("at most 1:00:00 per job"), std::string::npos)
      << Job(*held).reason_detail();
  s.set_qos("strict");
  auto refused = Submit(s, Alice());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("DenyOnLimit"), std::string::npos);
  // MaxSubmitJobs refuses the third job at submission.
  s.set_time_limit_ms(600'000);
  ASSERT_TRUE(Submit(s, Alice()).ok());
  auto second = Submit(s, Alice());
  ASSERT_TRUE(second.ok());
  auto third = Submit(s, Alice());
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("QOSMaxSubmitJobPerUserLimit"), std::string::npos);
  // The count follows the jobs: one cancelled makes room for one more, and no more.
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(*second);
  ASSERT_TRUE(engine_->CancelJob(Alice(), cancel, now_).ok());
  EXPECT_TRUE(Submit(s, Alice()).ok());
  EXPECT_FALSE(Submit(s, Alice()).ok());
}

TEST_F(QosTest, HighQosPreemptsAWholeLowGangUnderOneLeafAndStartsWhenItLeft) {
  // Two low gangs fill the two leaves; the second started later (less work lost).
  auto g1 = SubmitQos(2, 8, "low", Alice(), "leaf");
  Pass();
  Run(*g1);
  now_ += 60'000;
  auto g2 = SubmitQos(2, 8, "low", Root(), "leaf");
  Pass();
  Run(*g2);
  Flush();
  auto high = SubmitQos(2, 8, "high", Bob(), "leaf");
  Pass();
  // The newer gang goes, whole; the older keeps running.
  EXPECT_EQ(Job(*g1).state(), v1::RUNNING);
  ASSERT_EQ(Job(*g2).state(), v1::PENDING);
  EXPECT_EQ(Job(*g2).reason(), "Preempted");
  EXPECT_NE(Job(*g2).reason_detail().find("preempted by job " + std::to_string(*high)),
            std::string::npos);
  EXPECT_EQ(Job(*g2).preempt_count(), 1u);
  // Both of its nodes are told to stop it, with the low QoS's 2 s of grace.
  const v1::JobInfo victim = Job(*g2);
  for (const auto& n : victim.nodes()) {
    auto sent = Sent(n);
    ASSERT_EQ(sent.size(), 1u) << n;
    ASSERT_TRUE(sent[0].has_terminate_job());
    EXPECT_EQ(sent[0].terminate_job().kill_grace_ms(), 2000u);
  }
  EXPECT_EQ(Job(*high).state(), v1::PENDING);
  // Another pass while the victims leave preempts nothing more.
  Pass();
  EXPECT_EQ(Job(*g1).state(), v1::RUNNING);
  CleanUp(*g2, 0);
  Pass();
  ASSERT_EQ(Job(*high).state(), v1::RUNNING);
  const v1::JobInfo started = Job(*high);
  std::vector<std::string> nodes(started.nodes().begin(), started.nodes().end());
  EXPECT_EQ(nodes, (std::vector<std::string>{"node3", "node4"}));
}

TEST_F(QosTest, TwoPreemptorsInOnePassDoNotCountTheSameFreeNode) {
  // One leaf of four nodes: node4 is free, node1-3 each run a low job. Two 2-node high jobs
  // wait: the first takes node4 and one victim's node, so the second must free two nodes of its
  // own (counting node4 again, it would stop one job for nothing and still not start).
  for (NodeConfig& n : config_.nodes) n.topology = "spine1/leaf1";
  Restart();
  AllUp();
  std::vector<uint64_t> lows;
  for (const char* n : {"node1", "node2", "node3"}) {
    v1::JobSpec s = Gang(1, 8);
    s.set_qos("low");
    s.add_required_nodes(n);
    auto id = Submit(s, Root());
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    lows.push_back(*id);
  }
  Pass();
  for (uint64_t id : lows) Run(id);
  auto a = SubmitQos(2, 8, "high", Root());
  auto b = SubmitQos(2, 8, "high", Root());
  Pass();
  size_t preempted = 0;
  for (uint64_t id : lows) preempted += Job(id).state() == v1::PENDING;
  EXPECT_EQ(preempted, 3u);
  for (uint64_t id : lows) CleanUp(id, 0);
  Pass();
  EXPECT_EQ(Job(*a).state(), v1::RUNNING);
  EXPECT_EQ(Job(*b).state(), v1::RUNNING);
}

TEST_F(QosTest, NoPreemptionThatWouldNotLetThePreemptorStart) {
  auto low = SubmitQos(1, 8, "low");
  auto normal = SubmitQos(3, 8, "normal", Root());
  Pass();
  Run(*low);
  Run(*normal);
  // Needs all four nodes; only one holds a job it may preempt.
  auto high = SubmitQos(4, 8, "high", Bob());
  Pass();
  EXPECT_EQ(Job(*low).state(), v1::RUNNING);
  EXPECT_EQ(Job(*high).state(), v1::PENDING);
}

TEST_F(QosTest, CancelModeEndsThePreemptedJobAndMinRuntimeProtectsNewJobs) {
  config_.scheduling.preempt_min_runtime_ms = 600'000;
  Restart();
  AllUp();
  auto scav = SubmitQos(4, 8, "scavenger", Root());
  Pass();
  Run(*scav);
  auto urgent = SubmitQos(1, 8, "urgent");
  Pass();
  EXPECT_EQ(Job(*scav).state(), v1::RUNNING) << "started under preempt_min_runtime ago";
  now_ += 600'000;
  Pass();
  EXPECT_EQ(Job(*scav).state(), v1::PREEMPTED);
  EXPECT_EQ(Job(*scav).reason(), "Preempted");
  CleanUp(*scav, 0);
  Pass();
  EXPECT_EQ(Job(*urgent).state(), v1::RUNNING);
}

TEST_F(QosTest, VictimsGetTheirSignal) {
  v1::JobSpec s = Gang(4, 8);
  s.set_qos("low");
  s.set_signal(SIGUSR1);
  s.set_signal_batch_only(true);
  auto low = Submit(s, Root());
  Pass();
  Run(*low);
  Flush();
  ASSERT_TRUE(SubmitQos(1, 8, "high", Bob()).ok());
  Pass();
  auto sent = Sent("node1");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].terminate_job().signal(), SIGUSR1);
  EXPECT_TRUE(sent[0].terminate_job().signal_batch_only());
}

TEST_F(QosTest, QosOfTheSameLevelIsNotPreempted) {
  auto a = SubmitQos(4, 8, "high", Root());
  Pass();
  Run(*a);
  auto b = SubmitQos(1, 8, "high", Bob());
  Pass();
  EXPECT_EQ(Job(*a).state(), v1::RUNNING);
  EXPECT_EQ(Job(*b).state(), v1::PENDING);
}

TEST_F(QosTest, QosChangesAreAdminsOnlyAndNeverCircular) {
  v1::UpdateQosRequest req;
  req.set_op(v1::ACCOUNT_OP_ADD);
  req.set_name("gold");
  req.set_priority(50);
  req.set_preempt("high");
  EXPECT_EQ(engine_->UpdateQos(Alice(), req, now_).status().code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(engine_->UpdateQos(Root(), req, now_).ok());
  // low preempting gold would close gold -> high -> low -> gold.
  v1::UpdateQosRequest circle;
  circle.set_op(v1::ACCOUNT_OP_ADD);
  circle.set_name("loop");
  circle.set_preempt("gold");
  ASSERT_TRUE(engine_->UpdateQos(Root(), circle, now_).ok());
  v1::UpdateQosRequest back;
  back.set_op(v1::ACCOUNT_OP_MODIFY);
  back.set_name("gold");
  back.set_preempt("high,loop");
  auto r = engine_->UpdateQos(Root(), back, now_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("circle"), std::string::npos) << r.status().message();
  // The config's QoS are changed there.
  v1::UpdateQosRequest cfg;
  cfg.set_op(v1::ACCOUNT_OP_MODIFY);
  cfg.set_name("low");
  cfg.set_priority(5);
  EXPECT_EQ(engine_->UpdateQos(Root(), cfg, now_).status().code(), StatusCode::kFailedPrecondition);
  // Live QoS survive a restart.
  Restart();
  auto list = engine_->ListAccounts(Root());
  bool found = false;
  for (const auto& q : list->qos()) found = found || (q.name() == "gold" && q.priority() == 50);
  EXPECT_TRUE(found);
}

TEST(QosConfigTest, BadPoliciesAreRefusedWithTheReason) {
  auto bad = [](const std::string& extra) {
    auto c = ParseConfig(std::string(kConfig) + extra, "t.toml");
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_NE(bad("[[qos]]\nname = \"a\"\npreempt = [\"b\"]\n[[qos]]\nname = \"b\"\npreempt = "
                "[\"a\"]\n")
                .find("circle"),
            std::string::npos);
  EXPECT_NE(bad("[[qos]]\nname = \"a\"\npreempt = [\"zz\"]\n").find("not defined"),
            std::string::npos);
  EXPECT_NE(bad("[[qos]]\nname = \"a\"\npreempt_mode = \"pause\"\n")
                .find("expected requeue, cancel or suspend"),
            std::string::npos);
  EXPECT_NE(bad("[[qos]]\nname = \"a\"\nflags = [\"NoReserve\"]\n").find("unknown flag"),
            std::string::npos);
  EXPECT_NE(bad("[[accounts]]\nname = \"x\"\nqos = [\"nope\"]\n").find("not defined"),
            std::string::npos);
  EXPECT_NE(bad("[[accounts]]\nname = \"x\"\ngrp_gpus = \"many\"\n").find("grp_gpus"),
            std::string::npos);
  EXPECT_EQ(bad("[[accounts]]\nname = \"x\"\ngrp_gpus = 8\nmax_wall = \"2:00:00\"\n"), "");
}

}  // namespace
}  // namespace muster::controller
