// muster explain and sbatch --test-only.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

constexpr int64_t kMin = 60'000;

class ExplainTest : public EngineTest {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    // A second partition over node3-4, for "it would start now in partition gpu".
    auto c = ParseConfig(std::string(kConfig) +
                             "[[partition]]\nname = \"small\"\n"
                             "nodes = \"node[3-4]\"\n",
                         "test.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    Restart();
    AllUp();
  }
  v1::JobExplanation Explain(uint64_t id) {
    v1::ExplainJobRequest r;
    r.set_job_id(id);
    auto x = engine_->ExplainJob(Root(), r, now_);
    EXPECT_TRUE(x.ok()) << x.status().ToString();
    return x.ok() ? x->explanation() : v1::JobExplanation();
  }
  static v1::JobSpec Timed(uint32_t nodes, uint32_t gpus, int64_t limit_ms) {
    v1::JobSpec s = Gang(nodes, gpus);
    s.set_time_limit_ms(limit_ms);
    return s;
  }
};

TEST_F(ExplainTest, TellsWhatHoldsAJobBackAndWhatWouldStartIt) {
  v1::JobSpec a = Timed(2, 8, 30 * kMin);
  a.add_required_nodes("node3");
  a.add_required_nodes("node4");
  auto running = *Submit(a, Bob());
  Pass();
  ASSERT_EQ(Job(running).state(), v1::RUNNING);
  auto wide = *Submit(Timed(4, 8, 10 * kMin), Alice());   // waits for node3-4: a reservation
  auto small = *Submit(Timed(1, 4, 60 * kMin), Alice());  // fits now, but not before `wide`
  Pass();
  ASSERT_EQ(Job(small).state(), v1::PENDING);

  v1::JobExplanation w = Explain(wide);
  EXPECT_EQ(w.state(), v1::PENDING);
  EXPECT_EQ(w.rank(), 1u);
  EXPECT_EQ(w.pending_total(), 2u);
  EXPECT_TRUE(w.reserved());
  EXPECT_EQ(w.expected_start_ms(), now_ + 30 * kMin) << "when the running job's limit ends";
  ASSERT_EQ(w.partitions_size(), 1);
  const v1::PartitionExplanation& p = w.partitions(0);
  EXPECT_EQ(p.name(), "gpu");
  EXPECT_EQ(p.needed(), 4u);
  EXPECT_EQ(p.fit_now(), 2u);
  ASSERT_GE(p.groups_size(), 2);
  EXPECT_EQ(p.groups(0).verdict(), "fits_now");
  EXPECT_EQ(p.groups(0).nodes(), "node[1-2]");
  EXPECT_EQ(p.groups(1).verdict(), "busy");
  EXPECT_EQ(p.groups(1).nodes(), "node[3-4]");
  EXPECT_FALSE(p.gang_now().empty());
  EXPECT_TRUE(p.never().empty());
  ASSERT_EQ(w.holding_size(), 1);
  EXPECT_EQ(w.holding(0).job_id(), running);
  EXPECT_EQ(w.holding(0).user(), "bob");
  EXPECT_EQ(w.holding(0).end_ms(), now_ + 30 * kMin);
  EXPECT_EQ(w.reservations_ahead_total(), 0u) << "its own reservation is not ahead of it";

  v1::JobExplanation s = Explain(small);
  EXPECT_EQ(s.rank(), 2u);
  ASSERT_EQ(s.reservations_ahead_size(), 1);
  EXPECT_EQ(s.reservations_ahead(0).job_id(), wide);
  EXPECT_EQ(s.reservations_ahead(0).nodes(), "node[1-4]");
  EXPECT_EQ(s.partitions(0).gang_now(), "") << "it fits the free nodes";
  bool time_hint = false;
  for (const auto& c : s.changes())
    time_hint |= c.find("a time limit of at most 30:00 (--time)") == 0;
  EXPECT_TRUE(time_hint) << (s.changes_size() ? s.changes(0) : s.summary());
  EXPECT_NE(s.summary().find("1 reservation ahead"), std::string::npos) << s.summary();

  // Following the advice starts it.
  auto fits = *Submit(Timed(1, 4, 20 * kMin), Alice());
  Pass();
  EXPECT_EQ(Job(fits).state(), v1::RUNNING);
}

TEST_F(ExplainTest, SuggestsOtherPartitionsAndReleasesAndSaysWhatCanNeverRun) {
  v1::JobSpec a = Timed(2, 8, 30 * kMin);
  a.add_partitions("small");
  auto running = *Submit(a);
  Pass();
  ASSERT_EQ(Job(running).state(), v1::RUNNING);
  v1::JobSpec b = Timed(1, 8, 5 * kMin);
  b.add_partitions("small");
  auto waiting = *Submit(b, Alice());
  Pass();
  v1::JobExplanation x = Explain(waiting);
  bool other = false;
  for (const auto& c : x.changes()) other |= c == "it would start now in partition gpu (-p gpu)";
  EXPECT_TRUE(other) << (x.changes_size() ? x.changes(0) : x.summary());

  v1::JobSpec h = Gang(1, 1);
  h.set_hold(true);
  auto held = *Submit(h, Alice());
  x = Explain(held);
  EXPECT_EQ(x.rank(), 0u) << "a held job is not in the queue";
  ASSERT_GE(x.changes_size(), 1);
  EXPECT_EQ(x.changes(0),
            "it is held: release it with `scontrol release " + std::to_string(held) + "`");

  v1::JobSpec spec = Gang(3, 1);
  spec.add_partitions("small");
  auto never = *Submit(spec, Alice());
  Pass();
  x = Explain(never);
  EXPECT_EQ(x.reason(), "PartitionNodeLimit");
  EXPECT_EQ(x.partitions(0).never(), "asks for 3 nodes; partition small has 2");
  EXPECT_EQ(x.summary(), "can never run as asked: asks for 3 nodes; partition small has 2");
  bool could = false;
  for (const auto& c : x.changes()) could |= c.find("partition gpu (-p gpu)") != std::string::npos;
  EXPECT_TRUE(could) << (x.changes_size() ? x.changes(0) : x.summary());

  x = Explain(running);
  EXPECT_EQ(x.state(), v1::RUNNING);
  EXPECT_NE(x.summary().find("running since"), std::string::npos);
  v1::ExplainJobRequest r;
  r.set_job_id(9999);
  EXPECT_EQ(engine_->ExplainJob(Root(), r, now_).status().code(), StatusCode::kNotFound);
}

TEST_F(ExplainTest, TestOnlyForecastsWithoutSubmitting) {
  v1::JobSpec a = Timed(2, 8, 30 * kMin);
  a.add_required_nodes("node3");
  a.add_required_nodes("node4");
  auto running = *Submit(a);
  Pass();
  ASSERT_EQ(Job(running).state(), v1::RUNNING);
  auto test = [&](v1::JobSpec s) {
    s.set_script("#!/bin/sh\ntrue\n");
    s.set_work_dir("/tmp");
    v1::SubmitJobRequest req;
    *req.mutable_spec() = s;
    req.set_test_only(true);
    auto r = engine_->SubmitJob(Alice(), req, now_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : v1::SubmitJobResponse();
  };
  v1::SubmitJobResponse now = test(Timed(2, 8, 5 * kMin));
  EXPECT_TRUE(now.test_only().starts_now());
  EXPECT_EQ(now.test_only().start_ms(), now_);
  EXPECT_EQ(now.test_only().partition(), "gpu");
  EXPECT_EQ(now.test_only().nodes_size(), 2);
  EXPECT_EQ(now.test_only().nodes(0), "node1");
  v1::SubmitJobResponse later = test(Timed(4, 8, 5 * kMin));
  EXPECT_FALSE(later.test_only().starts_now());
  EXPECT_EQ(later.test_only().start_ms(), now_ + 30 * kMin);
  EXPECT_EQ(later.test_only().nodes_size(), 4);
  EXPECT_EQ(later.test_only().reason(), "Resources");
  // Nothing was accepted: the queue is as it was, and the id is still free.
  v1::ListJobsRequest all;
  EXPECT_EQ(engine_->ListJobs(Root(), all)->jobs_size(), 1);
  auto real = *Submit(Gang(1, 1));
  EXPECT_EQ(real, later.job_id());
  EXPECT_EQ(now.job_id(), later.job_id());
  // A job that can never run is refused as a real submission would be.
  v1::SubmitJobRequest bad;
  *bad.mutable_spec() = Gang(1, 16);
  bad.mutable_spec()->set_script("#!/bin/sh\n");
  bad.mutable_spec()->set_work_dir("/tmp");
  bad.set_test_only(true);
  EXPECT_EQ(engine_->SubmitJob(Alice(), bad, now_).status().code(),
            StatusCode::kFailedPrecondition);
}

// private_data = ["jobs"]: the jobs in a waiting job's way are told by id, nodes and end, but
// whose they are only to those who may see other users' jobs.
TEST_F(ExplainTest, WhoseJobsAreInTheWayIsPrivateWhereJobsAre) {
  config_.private_data.jobs = true;
  Restart();
  AllUp();
  auto running = *Submit(Timed(4, 8, 30 * kMin), Bob());
  Pass();
  ASSERT_EQ(Job(running).state(), v1::RUNNING);
  auto waiting = *Submit(Timed(4, 8, 10 * kMin), Alice());
  Pass();
  v1::ExplainJobRequest r;
  r.set_job_id(waiting);
  auto as_alice = engine_->ExplainJob(Alice(), r, now_);
  ASSERT_TRUE(as_alice.ok()) << as_alice.status().ToString();
  ASSERT_GE(as_alice->explanation().holding_size(), 1);
  EXPECT_EQ(as_alice->explanation().holding(0).job_id(), running);
  EXPECT_EQ(as_alice->explanation().holding(0).user(), "") << "bob's name reached alice";
  EXPECT_EQ(Explain(waiting).holding(0).user(), "bob") << "an admin sees whose it is";
}

}  // namespace
}  // namespace muster::controller
