// The runner on a virtual clock and a synchronous executor: what a simulator or a standby does,
// with no sockets and no threads. Time moves only when the test moves it.
#include "muster/controller/controller_runner.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "muster/common/manual_executor.h"

namespace muster::controller {
namespace {

constexpr const char* kConfig = R"(
cluster_name = "sim"
[scheduling]
heartbeat_interval_ms = 1000
node_not_responding_ms = 3000
node_down_ms = 10000
sched_min_interval_ms = 50
[[nodes]]
names = "node[1-2]"
cpus = 8
memory_mb = 16000
gpus = 4
gpu_type = "h100"
[[partition]]
name = "gpu"
nodes = "node[1-2]"
default = true
)";

// Records what the runner delivers to the agents.
class RecordingAgents : public AgentSessions {
 public:
  void Deliver(std::vector<Outgoing> commands) override {
    for (auto& c : commands) sent.push_back(std::move(c));
  }
  size_t Launches(const std::string& node) const {
    size_t n = 0;
    for (const auto& o : sent) n += o.node == node && o.message.has_launch_job();
    return n;
  }
  bool Closed(const std::string& node) const {
    for (const auto& o : sent) {
      if (o.node == node && o.close_session) return true;
    }
    return false;
  }
  std::vector<Outgoing> sent;
};

class ControllerRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    auto c = ParseConfig(kConfig, "sim.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ControllerRunnerOptions o;
    o.config = *c;
    o.clock = &clock_;
    o.executor = &executor_;
    o.store = std::make_unique<store::InMemoryStateStore>();
    o.make_credential = [] { return std::string("cred"); };
    auto r = ControllerRunner::Create(std::move(o));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner_ = std::move(*r);
    runner_->Start(&agents_);
    executor_.RunUntilIdle();
  }

  // Runs `fn` on the runner's strand, as a transport would, and lets it finish.
  void OnStrand(const std::function<void(Engine&)>& fn) {
    runner_->Post([&] {
      fn(runner_->engine());
      runner_->AfterEvent();
    });
    executor_.RunUntilIdle();
  }

  void Up(const std::string& node) {
    OnStrand([&](Engine& e) {
      v1::RegisterRequest r;
      r.set_instance_id(node + "-1");
      r.mutable_inventory()->set_name(node);
      r.mutable_inventory()->set_cpus(8);
      r.mutable_inventory()->set_memory_mb(16000);
      for (uint32_t i = 0; i < 4; ++i) {
        v1::GpuDevice* g = r.mutable_inventory()->add_gpus();
        g->set_index(i);
        g->set_type("h100");
      }
      ASSERT_TRUE(e.RegisterNode(r, clock_.NowMs()).ok());
      v1::Hello h;
      h.set_node(node);
      h.set_instance_id(node + "-1");
      ASSERT_TRUE(e.AttachSession(h, clock_.NowMs()).ok());
    });
  }

  uint64_t Submit(uint32_t nodes) {
    uint64_t id = 0;
    OnStrand([&](Engine& e) {
      v1::SubmitJobRequest req;
      req.mutable_spec()->set_nodes(nodes);
      req.mutable_spec()->set_gpus_per_node(4);
      req.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
      req.mutable_spec()->set_work_dir("/tmp");
      auto r = e.SubmitJob(Caller{1000, 1000, "alice", false}, req, clock_.NowMs());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      id = r->job_id();
    });
    return id;
  }

  v1::JobInfo Job(uint64_t id) {
    v1::JobInfo info;
    OnStrand([&](Engine& e) {
      v1::GetJobRequest r;
      r.set_job_id(id);
      auto j = e.GetJob(Caller{0, 0, "root", true}, r);
      ASSERT_TRUE(j.ok());
      info = j->job();
    });
    return info;
  }

  ManualClock clock_;
  ManualExecutor executor_{&clock_};
  RecordingAgents agents_;
  std::unique_ptr<ControllerRunner> runner_;
};

TEST_F(ControllerRunnerTest, APassRunsOnlyWhenTheVirtualClockReachesIt) {
  Up("node1");
  Up("node2");
  const uint64_t id = Submit(2);
  EXPECT_EQ(Job(id).state(), v1::PENDING) << "no pass before sched_min_interval_ms has passed";
  EXPECT_EQ(agents_.Launches("node1"), 0u);

  executor_.AdvanceMs(49);
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  executor_.AdvanceMs(1);  // the coalesced pass falls due: prepare, compute (offloaded), apply
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_EQ(agents_.Launches("node1"), 1u);
  EXPECT_EQ(agents_.Launches("node2"), 1u);
}

TEST_F(ControllerRunnerTest, TheTickDeclaresASilentNodeDownAndRequeuesItsGang) {
  Up("node1");
  Up("node2");
  const uint64_t id = Submit(2);
  executor_.AdvanceMs(50);
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  for (const char* n : {"node1", "node2"}) {
    OnStrand([&](Engine& e) {
      v1::AgentMessage m;
      m.mutable_job_started()->set_job_id(id);
      e.OnAgentMessage(n, m, clock_.NowMs());
    });
  }

  // node2 keeps talking; node1 falls silent. Nothing happens until the clock says so.
  for (int s = 0; s < 10; ++s) {
    executor_.AdvanceMs(1000);
    OnStrand([&](Engine& e) {
      v1::AgentMessage hb;
      hb.mutable_heartbeat()->set_seq(static_cast<uint64_t>(s));
      e.OnAgentMessage("node2", hb, clock_.NowMs());
    });
  }
  EXPECT_FALSE(agents_.Closed("node1")) << "silent for exactly node_down_ms: not yet down";
  executor_.AdvanceMs(500);  // the next tick finds it silent for longer
  EXPECT_TRUE(agents_.Closed("node1"));
  const v1::JobInfo job = Job(id);
  EXPECT_EQ(job.state(), v1::PENDING);
  EXPECT_EQ(job.reason(), "NodeFail");
  EXPECT_EQ(job.requeue_count(), 1u);
  bool terminated = false;
  for (const auto& o : agents_.sent) {
    terminated |= o.node == "node2" && o.message.has_terminate_job();
  }
  EXPECT_TRUE(terminated) << "the gang's other node is told to stop";
}

TEST_F(ControllerRunnerTest, AfterStopNothingMoves) {
  Up("node1");
  const uint64_t id = Submit(1);
  runner_->Stop();
  executor_.AdvanceMs(60'000);  // the pass and every tick would have fallen due
  EXPECT_EQ(agents_.Launches("node1"), 0u);
  EXPECT_EQ(executor_.timers(), 0u) << "stopped timers do not re-arm";
  EXPECT_EQ(runner_->engine()
                .GetJob(Caller{0, 0, "root", true},
                        [&] {
                          v1::GetJobRequest r;
                          r.set_job_id(id);
                          return r;
                        }())
                ->job()
                .state(),
            v1::PENDING);
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

TEST(ServiceStatsTest, PercentilesAreNeverBelowTheTruthAndAtMostAQuarterOctaveAbove) {
  ServiceStats stats;
  for (int us = 1; us <= 1000; ++us) stats.Record("agent/heartbeat", std::chrono::microseconds(us));
  stats.Record("api/SUBMIT_JOB", std::chrono::milliseconds(3));
  auto snap = stats.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  const ServiceStats::Timing& hb = snap[0];
  EXPECT_EQ(hb.kind, "agent/heartbeat");
  EXPECT_EQ(hb.count, 1000u);
  EXPECT_NEAR(hb.mean_us, 500.5, 0.01);
  EXPECT_GE(hb.p50_us, 500);
  EXPECT_LE(hb.p50_us, 500 * 1.19);
  EXPECT_GE(hb.p99_us, 990);
  EXPECT_LE(hb.p99_us, 1000);  // never above the largest seen
  EXPECT_EQ(hb.max_us, 1000);
  EXPECT_EQ(snap[1].p99_us, 3000);
  stats.Reset(42);
  EXPECT_TRUE(stats.Snapshot().empty());
  EXPECT_EQ(stats.reset_ms(), 42);
}

}  // namespace
}  // namespace muster::controller
