// The runner on a virtual clock and a synchronous executor: what a simulator or a standby does,
// with no sockets and no threads. Time moves only when the test moves it.
#include "muster/controller/controller_runner.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>

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

  void Up(const std::string& node, uint32_t gpus = 4) {
    OnStrand([&](Engine& e) {
      v1::RegisterRequest r;
      r.set_instance_id(node + "-1");
      r.mutable_inventory()->set_name(node);
      r.mutable_inventory()->set_cpus(8);
      r.mutable_inventory()->set_memory_mb(16000);
      for (uint32_t i = 0; i < gpus; ++i) {
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

// The same cluster with more: a node n3 ("node3") and a partition "debug" on it.
constexpr const char* kGrown = R"(
[[nodes]]
names = "node3"
cpus = 8
memory_mb = 16000
[[partition]]
name = "debug"
nodes = "node3"
)";

Config ParsedConfig(const std::string& text) {
  auto c = ParseConfig(text, "sim.toml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Config{};
}

TEST_F(ControllerRunnerTest, ReconfigureAddsAPartitionAndANodeWhileAGangRuns) {
  Up("node1");
  Up("node2");
  const uint64_t id = Submit(2);
  executor_.AdvanceMs(50);
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  const uint64_t epoch = runner_->epoch();
  const uint64_t passes = runner_->engine().Metrics().passes;
  ASSERT_GT(passes, 0u);
  agents_.sent.clear();

  Result<ControllerRunner::Reconfigured> r = InvalidArgument("not run");
  runner_->Post([&] { r = runner_->Reconfigure(ParsedConfig(std::string(kConfig) + kGrown)); });
  executor_.RunUntilIdle();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->epoch, epoch);
  EXPECT_EQ(runner_->epoch(), r->epoch);
  EXPECT_NE(std::find(r->changes.begin(), r->changes.end(), "partition debug added"),
            r->changes.end());
  EXPECT_NE(std::find(r->changes.begin(), r->changes.end(), "node node3 added"), r->changes.end());
  EXPECT_EQ(runner_->engine().config().partitions.size(), 2u);
  // Every agent of the previous engine is told to register again, and why.
  for (const char* n : {"node1", "node2"}) {
    bool told = false;
    for (const auto& o : agents_.sent) {
      told |= o.node == n && o.close_session &&
              o.close_reason.find("reconfigured") != std::string::npos;
    }
    EXPECT_TRUE(told) << n;
  }
  // The gang runs on, on the same nodes; the counters go on from where they were.
  const v1::JobInfo job = Job(id);
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.allocation().nodes_size(), 2);
  EXPECT_EQ(runner_->engine().Metrics().passes, passes) << "no pass yet: the count carried over";
  EXPECT_TRUE(runner_->engine().CheckInvariantsForTest().ok());

  // The agents come back under the new epoch; a job for the new partition starts there.
  Up("node1");
  Up("node2");
  Up("node3", /*gpus=*/0);
  uint64_t debug_job = 0;
  OnStrand([&](Engine& e) {
    v1::SubmitJobRequest req;
    req.mutable_spec()->add_partitions("debug");
    req.mutable_spec()->set_nodes(1);
    req.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
    req.mutable_spec()->set_work_dir("/tmp");
    auto s = e.SubmitJob(Caller{1000, 1000, "alice", false}, req, clock_.NowMs());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    debug_job = s->job_id();
  });
  executor_.AdvanceMs(50);
  EXPECT_EQ(Job(debug_job).state(), v1::RUNNING);
  EXPECT_EQ(agents_.Launches("node3"), 1u);
}

// A dead node goes down when its silence reaches node_down_ms, however often the controller is
// reconfigured meanwhile: the new engine goes on from the previous one's liveness.
TEST_F(ControllerRunnerTest, ADeadNodeGoesDownThroughFrequentReconfigurations) {
  Up("node1");
  Up("node2");
  const Config same = ParsedConfig(kConfig);
  auto down = [&] {
    uint64_t n = 0;
    OnStrand([&](Engine& e) {
      auto m = e.Metrics().nodes;
      n = m.count("down") ? m["down"] : 0;
    });
    return n;
  };
  // node2's agent lives (it registers again after each reconfiguration); node1's is dead.
  for (int second = 1; second <= 12; ++second) {
    executor_.AdvanceMs(1000);
    if (second % 3 == 0) {
      Status st = Internal("not run");
      runner_->Post([&] { st = runner_->Reconfigure(same).status(); });
      executor_.RunUntilIdle();
      ASSERT_TRUE(st.ok()) << st.ToString();
      Up("node2");
    } else {
      OnStrand([&](Engine& e) {
        v1::AgentMessage hb;
        hb.mutable_heartbeat();
        e.OnAgentMessage("node2", hb, clock_.NowMs());
      });
    }
    if (second <= 9) {
      EXPECT_EQ(down(), 0u) << "at " << second << " s";
    }
  }
  EXPECT_EQ(down(), 1u) << "node1, silent for 12 s past node_down_ms = 10 s";
}

TEST_F(ControllerRunnerTest, ReconfigureRefusesToTakeAwayWhatJobsHoldAndKeepsTheRunningEngine) {
  Up("node1");
  Up("node2");
  const uint64_t running = Submit(1);
  executor_.AdvanceMs(50);
  ASSERT_EQ(Job(running).state(), v1::RUNNING);
  const std::string node = Job(running).allocation().nodes(0).node();
  const uint64_t epoch = runner_->epoch();
  const uint64_t generation = runner_->engine_generation();

  auto reconfigure = [&](const std::string& text) {
    Result<ControllerRunner::Reconfigured> r = InvalidArgument("not run");
    runner_->Post([&] { r = runner_->Reconfigure(ParsedConfig(text)); });
    executor_.RunUntilIdle();
    return r;
  };
  // Fewer GPUs than the job holds there.
  std::string fewer = kConfig;
  fewer.replace(fewer.find("gpus = 4"), 8, "gpus = 2");
  auto r = reconfigure(fewer);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("node " + node + " changes gpus 2 < GPU"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("job " + std::to_string(running)), std::string::npos);

  // The partition the job runs in, gone.
  std::string renamed = kConfig;
  renamed.replace(renamed.find("name = \"gpu\""), 12, "name = \"gpu2\"");
  r = reconfigure(renamed);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("partition gpu is removed but job " +
                                      std::to_string(running) + " needs it"),
            std::string::npos)
      << r.status().message();

  EXPECT_EQ(runner_->epoch(), epoch) << "a refused config changes nothing";
  EXPECT_EQ(runner_->engine_generation(), generation);
  EXPECT_EQ(runner_->engine().config().partitions[0].name, "gpu");
  EXPECT_EQ(Job(running).state(), v1::RUNNING);
  for (const auto& o : agents_.sent) EXPECT_FALSE(o.close_session) << o.node;

  // More GPUs, or a feature, are fine while it runs.
  std::string more = kConfig;
  more.replace(more.find("gpus = 4"), 8, "gpus = 8");
  r = reconfigure(more + "\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Job(running).state(), v1::RUNNING);
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

// muster partition create: planned, stored, and taken as a reconfiguration is (the engine
// replaced, the agents told to register again, a running gang untouched); audited either way.
TEST_F(ControllerRunnerTest, APartitionCreatedLiveReplacesTheEngineAndARunningGangStays) {
  Up("node1");
  Up("node2");
  const uint64_t id = Submit(2);
  executor_.AdvanceMs(50);
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  const uint64_t epoch = runner_->epoch();
  v1::UpdatePartitionRequest req;
  req.set_action(v1::UpdatePartitionRequest::CREATE);
  req.set_name("short");
  req.set_nodes("node2");
  req.set_max_time_ms(600'000);
  Result<ControllerRunner::Reconfigured> r = InvalidArgument("not run");
  const Caller alice{1000, 1000, "alice", false};
  runner_->Post([&] { r = runner_->ChangePartition(alice, req); });
  executor_.RunUntilIdle();
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(runner_->epoch(), epoch) << "nothing replaced";
  runner_->Post([&] { r = runner_->ChangePartition(Caller{0, 0, "root", true}, req); });
  executor_.RunUntilIdle();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(runner_->epoch(), epoch);
  ASSERT_NE(runner_->engine().config().FindPartition("short"), nullptr);
  EXPECT_EQ(runner_->engine().file_config().FindPartition("short"), nullptr);
  EXPECT_TRUE(agents_.Closed("node1"));
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_TRUE(runner_->engine().CheckInvariantsForTest().ok());
  // A reconfiguration with the same file keeps it: it is laid over whatever the file says.
  runner_->Post([&] { r = runner_->Reconfigure(ParsedConfig(kConfig)); });
  executor_.RunUntilIdle();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(runner_->engine().config().FindPartition("short"), nullptr);
  // Both attempts are in the audit log.
  v1::ListAuditRequest audit;
  audit.set_oldest_first(true);
  auto log = runner_->engine().ListAudit(Caller{0, 0, "root", true}, audit, clock_.NowMs());
  ASSERT_TRUE(log.ok());
  int entries = 0;
  for (const auto& e : log->entries()) entries += e.action() == "partition create";
  EXPECT_EQ(entries, 2);
}

// Node settings set live go the way of a live partition: planned, stored, the engine replaced
// (the gang goes on), kept by a reconfiguration, refused whole when they would take what a job
// holds, and every attempt audited.
TEST_F(ControllerRunnerTest, NodeSettingsSetLiveReplaceTheEngineAndAreAudited) {
  Up("node1");
  Up("node2");
  const uint64_t id = Submit(2);
  executor_.AdvanceMs(50);
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  v1::UpdateNodeRequest req;
  req.set_action(v1::UpdateNodeRequest::SET);
  req.set_nodes("node2");
  req.mutable_settings()->set_weight(4);
  req.mutable_settings()->mutable_features()->add_names("fast");
  const Caller root{0, 0, "root", true};
  Result<ControllerRunner::Reconfigured> r = InvalidArgument("not run");
  runner_->Post([&] { r = runner_->ChangeNodes(Caller{1000, 1000, "alice", false}, req); });
  executor_.RunUntilIdle();
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  const uint64_t epoch = runner_->epoch();
  runner_->Post([&] { r = runner_->ChangeNodes(root, req); });
  executor_.RunUntilIdle();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(runner_->epoch(), epoch);
  EXPECT_EQ(runner_->engine().config().FindNode("node2")->weight, 4u);
  EXPECT_EQ(runner_->engine().file_config().FindNode("node2")->weight, 1u);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  v1::UpdateNodeRequest fewer = req;
  fewer.clear_settings();
  fewer.mutable_settings()->set_gres("gpu:h100:2");
  runner_->Post([&] { r = runner_->ChangeNodes(root, fewer); });
  executor_.RunUntilIdle();
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_FALSE(runner_->engine().node_settings().at("node2").has_gres()) << "nothing stored";
  runner_->Post([&] { r = runner_->Reconfigure(ParsedConfig(kConfig)); });
  executor_.RunUntilIdle();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(runner_->engine().config().FindNode("node2")->features,
            (std::vector<std::string>{"fast"}));
  v1::ListAuditRequest audit;
  audit.set_oldest_first(true);
  auto log = runner_->engine().ListAudit(root, audit, clock_.NowMs());
  ASSERT_TRUE(log.ok());
  int sets = 0;
  for (const auto& e : log->entries()) {
    if (e.action() != "set") continue;
    ++sets;
    // What was asked is in words, the refused attempts' too.
    EXPECT_TRUE(e.detail().find("weight 4") != std::string::npos ||
                e.detail().find("gres gpu:h100:2") != std::string::npos)
        << e.detail();
  }
  EXPECT_EQ(sets, 3);
}

// A file that would undo a live partition (removing a node of its) waits: who may use the
// partition must not change behind the admin's back.
TEST_F(ControllerRunnerTest, AFileThatUndoesALivePartitionIsRefused) {
  v1::UpdatePartitionRequest req;
  req.set_action(v1::UpdatePartitionRequest::CREATE);
  req.set_name("short");
  req.set_nodes("node2");
  req.set_allowed_uids("alice");
  Result<ControllerRunner::Reconfigured> r = InvalidArgument("not run");
  runner_->Post([&] { r = runner_->ChangePartition(Caller{0, 0, "root", true}, req); });
  executor_.RunUntilIdle();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string smaller = kConfig;
  for (const char* from : {"names = \"node[1-2]\"", "nodes = \"node[1-2]\""}) {
    const size_t at = smaller.find(from);
    ASSERT_NE(at, std::string::npos);
    smaller.replace(at, std::string(from).size(),
                    std::string(from).substr(0, std::string(from).find('"')) + "\"node1\"");
  }
  runner_->Post([&] { r = runner_->Reconfigure(ParsedConfig(smaller)); });
  executor_.RunUntilIdle();
  ASSERT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("'short'"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(runner_->engine().config().nodes.size(), 2u) << "the running configuration is kept";
}

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
