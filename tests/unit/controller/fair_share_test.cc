// Fair-share through the engine: usage charged in billing units as jobs run, decayed, kept across
// restarts, and the factor that orders pending jobs.
#include <map>
#include <set>

#include "engine_fixture.h"

namespace muster::controller {
namespace {

constexpr const char* kTeams = R"(
[billing]
cpu = 0.0
gpu = 1.0
[billing.gpu_types]
h100 = 2.0
[[accounts]]
name = "a"
users = ["alice"]
[[accounts]]
name = "b"
users = ["bob"]
)";

class FairShareTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    auto c = ParseConfig(std::string(kConfig) + kTeams, "test.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    config_.scheduling.priority_weight_fairshare = 100'000;
    config_.scheduling.priority_weight_age = 0;
    config_.scheduling.priority_weight_size = 0;
    config_.scheduling.fairshare_half_life_ms = 3'600'000;  // an hour
    Restart();
    AllUp();
  }

  // Time passes, the agents keep beating (with the jobs each runs), the engine ticks.
  void Advance(TimeMs ms) {
    now_ += ms;
    for (const char* n : {"node1", "node2", "node3", "node4"}) {
      v1::AgentMessage hb;
      hb.mutable_heartbeat()->set_seq(static_cast<uint64_t>(now_));
      for (uint64_t id : running_) {
        if (Job(id).nodes_size() > 0 && Job(id).nodes(0) == n) {
          hb.mutable_heartbeat()->add_running_job_ids(id);
        }
      }
      Agent(n, hb);
    }
    engine_->Tick(now_);
  }

  // Runs a job of `who` on `gpus` GPUs of node1 for `ms`, then ends it.
  void RunFor(const Caller& who, uint32_t gpus, TimeMs ms) {
    auto id = Submit(Gang(1, gpus), who);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    Pass();
    ASSERT_EQ(Job(*id).state(), v1::RUNNING);
    Started(*id, Job(*id).nodes(0));
    running_.insert(*id);
    for (TimeMs t = 0; t < ms; t += 5'000) Advance(5'000);
    const std::string node = Job(*id).nodes(0);
    Exited(*id, node, 0);
    Cleaned(*id, node);
    running_.erase(*id);
    Advance(1'000);
  }

  std::set<uint64_t> running_;

  v1::ShareRow Row(const std::string& account, const std::string& user) {
    auto rows = engine_->ListShares(Root(), v1::ListSharesRequest(), now_);
    for (const auto& r : rows->rows()) {
      if (r.account() == account && r.user() == user) return r;
    }
    ADD_FAILURE() << "no share row " << account << "/" << user;
    return {};
  }
};

TEST_F(FairShareTest, RunningJobsAreChargedByGpuTypeAndUsageDecays) {
  RunFor(Alice(), 4, 600'000);  // 4 H100s (weight 2) for 10 minutes
  Pass();                       // factors are recomputed with each pass
  // 4 x 2 x 600 s, and a little decay over the run.
  const double charged = Row("a", "alice").raw_usage();
  EXPECT_NEAR(charged, 4 * 2 * 600.0, 4 * 2 * 600.0 * 0.1);
  EXPECT_GT(charged, 4 * 2 * 600.0 * 0.9);
  // An hour later it is half.
  for (int i = 0; i < 720; ++i) Advance(5'000);
  EXPECT_NEAR(Row("a", "alice").raw_usage(), charged / 2, charged * 0.01);
}

TEST_F(FairShareTest, TheLessServedAccountsJobGoesFirst) {
  RunFor(Alice(), 8, 1'200'000);
  Pass();
  EXPECT_DOUBLE_EQ(Row("b", "bob").fairshare(), 1.0);
  EXPECT_DOUBLE_EQ(Row("a", "alice").fairshare(), 0.5);
  EXPECT_EQ(Row("a", "").effective_usage(), 1.0);
  // Fill the cluster, then queue one job of each: bob's, submitted later, starts first.
  std::vector<uint64_t> fill;
  for (int i = 0; i < 4; ++i) fill.push_back(*Submit(Gang(1, 8), Root()));
  Pass();
  for (uint64_t id : fill) {
    Started(id, Job(id).nodes(0));
    running_.insert(id);
  }
  const uint64_t alices = *Submit(Gang(1, 8), Alice());
  Advance(1'000);
  const uint64_t bobs = *Submit(Gang(1, 8), Bob());
  Pass();
  EXPECT_GT(Job(bobs).priority(), Job(alices).priority());
  Exited(fill[0], Job(fill[0]).nodes(0), 0);
  running_.erase(fill[0]);
  Cleaned(fill[0], Job(fill[0]).nodes(0));
  Pass();
  EXPECT_EQ(Job(bobs).state(), v1::RUNNING);
  EXPECT_EQ(Job(alices).state(), v1::PENDING);
}

TEST_F(FairShareTest, DrfOrdersByWhatRunsNowAcrossResources) {
  config_.scheduling.fairshare_algorithm = "drf";
  Restart();
  AllUp();
  // alice holds 16 of 32 GPUs; bob a CPU-only job with 4 of 64 CPUs: bob's dominant share is
  // the smaller, so his next job goes first, though alice's was submitted earlier.
  auto gpus = Submit(Gang(2, 8), Alice());
  v1::JobSpec cpu = Gang(1, 0);
  cpu.set_ntasks_per_node(4);
  auto cpus = Submit(cpu, Bob());
  Pass();
  ASSERT_EQ(Job(*gpus).state(), v1::RUNNING);
  ASSERT_EQ(Job(*cpus).state(), v1::RUNNING);
  auto fill = Submit(Gang(2, 8), Root());
  Pass();
  ASSERT_EQ(Job(*fill).state(), v1::RUNNING);
  const uint64_t alices = *Submit(Gang(1, 8), Alice());
  const uint64_t bobs = *Submit(Gang(1, 8), Bob());
  Pass();
  EXPECT_DOUBLE_EQ(Row("b", "bob").fairshare(), 1.0);
  EXPECT_DOUBLE_EQ(Row("a", "alice").fairshare(), 0.5);
  EXPECT_GT(Job(bobs).priority(), Job(alices).priority());
  // Bad values are refused by name.
  std::string text = kConfig;
  text.replace(text.find("[scheduling]\n"), 13,
               "[scheduling]\nfairshare_algorithm = \"lottery\"\n");
  auto bad = ParseConfig(text, "test.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected fair_tree or drf"), std::string::npos);
}

TEST_F(FairShareTest, UsageSurvivesARestart) {
  RunFor(Alice(), 8, 1'200'000);
  for (int i = 0; i < 13; ++i) Advance(5'000);  // the minute's flush
  Pass();
  const double before = Row("a", "alice").raw_usage();
  ASSERT_GT(before, 0);
  Restart();
  AllUp();
  Pass();
  EXPECT_NEAR(Row("a", "alice").raw_usage(), before, before * 0.001);
  EXPECT_DOUBLE_EQ(Row("b", "bob").fairshare(), 1.0);
}

TEST_F(FairShareTest, AJobRunningAcrossARestartIsNotChargedTwice) {
  auto id = Submit(Gang(1, 8), Alice());
  Pass();
  const std::string node = Job(*id).nodes(0);
  Started(*id, node);
  running_.insert(*id);
  for (int i = 0; i < 24; ++i) Advance(5'000);  // two minutes: a flush after the first
  Restart();
  for (const char* n : {"node1", "node2", "node3", "node4"}) {
    Up(n, n == node ? std::vector<uint64_t>{*id} : std::vector<uint64_t>{});
  }
  ASSERT_EQ(Job(*id).state(), v1::RUNNING);
  Advance(5'000);
  Pass();
  // 8 H100s (weight 2) for 125 s at most, give or take a little decay; not 245 s.
  const double usage = Row("a", "alice").raw_usage();
  EXPECT_LE(usage, 8 * 2 * 125.0 * 1.001);
  EXPECT_GE(usage, 8 * 2 * 120.0 * 0.99);
}

// A day of saturating load from two 50/50 accounts whose jobs differ (alice: hour-long whole-node
// jobs; bob: 20-minute ones): fair-share brings their GPU-hours within 5% of each other.
TEST_F(FairShareTest, TwoEqualAccountsConvergeOverADayOfSaturatingLoad) {
  config_.scheduling.fairshare_half_life_ms = 6 * 3'600'000;
  Restart();
  AllUp();
  struct Running {
    uint64_t id;
    std::string node;
    TimeMs ends;
    bool alice;
  };
  std::vector<Running> running;
  std::map<bool, int> pending = {{true, 0}, {false, 0}};
  std::map<bool, double> gpu_hours = {{true, 0}, {false, 0}};
  std::set<uint64_t> queued;
  std::map<uint64_t, bool> owner;
  const TimeMs step = 5 * 60'000, day = 24 * 3'600'000;
  for (TimeMs t = 0; t < day; t += step) {
    // Both keep four jobs waiting.
    for (bool alice : {true, false}) {
      while (pending[alice] < 4) {
        auto id = Submit(Gang(1, 8), alice ? Alice() : Bob());
        ASSERT_TRUE(id.ok()) << id.status().ToString();
        queued.insert(*id);
        owner[*id] = alice;
        ++pending[alice];
      }
    }
    Pass();
    for (auto it = queued.begin(); it != queued.end();) {
      const v1::JobInfo j = Job(*it);
      if (j.state() != v1::RUNNING) {
        ++it;
        continue;
      }
      Started(*it, j.nodes(0));
      const bool alice = owner[*it];
      running.push_back({*it, j.nodes(0), now_ + (alice ? 60 : 20) * 60'000, alice});
      running_.insert(*it);
      --pending[alice];
      it = queued.erase(it);
    }
    Advance(step);
    for (auto it = running.begin(); it != running.end();) {
      if (it->ends > now_) {
        ++it;
        continue;
      }
      Exited(it->id, it->node, 0);
      Cleaned(it->id, it->node);
      running_.erase(it->id);
      gpu_hours[it->alice] += 8.0 * (it->alice ? 1.0 : 1.0 / 3.0);
      it = running.erase(it);
    }
  }
  const double a = gpu_hours[true], b = gpu_hours[false];
  ASSERT_GT(a + b, 24 * 4 * 8 * 0.8) << "the cluster was kept busy";
  EXPECT_NEAR(a / (a + b), 0.5, 0.05) << "alice " << a << " GPU-hours, bob " << b;
}

}  // namespace
}  // namespace muster::controller
