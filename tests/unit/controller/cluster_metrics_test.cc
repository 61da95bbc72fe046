// What /metrics and `muster diag` read from the engine (Engine::Metrics): jobs, nodes and GPUs
// by state, counted in every partition they belong to; queue waits, late heartbeats, each node's
// GPU health.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

class ClusterMetricsTest : public EngineTest {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    // node3-4 are in a second partition as well.
    auto c = ParseConfig(
        std::string(kConfig) + "[[partition]]\nname = \"small\"\n" + "nodes = \"node[3-4]\"\n",
        "test.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    Restart();
    AllUp();
  }
  // Jobs of `state` waiting for or running in `partition`, whatever their account.
  static uint64_t Jobs(const ClusterMetrics& m, const std::string& state,
                       const std::string& partition) {
    uint64_t n = 0;
    for (const auto& [key, count] : m.jobs) {
      if (std::get<0>(key) == state && std::get<1>(key) == partition) n += count;
    }
    return n;
  }
  static uint64_t Gpus(const ClusterMetrics& m, const std::string& state,
                       const std::string& partition) {
    auto it = m.gpus.find({state, "h100", partition});
    return it == m.gpus.end() ? 0 : it->second;
  }
};

TEST_F(ClusterMetricsTest, GpusByStateInEveryPartitionOfTheirNode) {
  ClusterMetrics m = engine_->Metrics();
  EXPECT_EQ(m.nodes["idle"], 4u);
  EXPECT_EQ(m.nodes_responding, 4u);
  EXPECT_EQ(Gpus(m, "idle", "gpu"), 32u);
  EXPECT_EQ(Gpus(m, "idle", "small"), 16u) << "node3-4 count in both partitions";

  v1::JobSpec gang = Gang(2, 8);
  gang.add_partitions("small");
  auto id = Submit(gang);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Pass();
  ASSERT_EQ(Job(*id).state(), v1::RUNNING);
  m = engine_->Metrics();
  EXPECT_EQ(Gpus(m, "allocated", "small"), 16u);
  EXPECT_EQ(Gpus(m, "allocated", "gpu"), 16u);
  EXPECT_EQ(Gpus(m, "idle", "gpu"), 16u);
  EXPECT_EQ(Gpus(m, "idle", "small"), 0u);
  EXPECT_EQ(Jobs(m, "running", "small"), 1u) << "where it runs";
  EXPECT_EQ(m.jobs_started, 1u);
  EXPECT_GE(m.passes, 1u);
}

TEST_F(ClusterMetricsTest, APendingJobsPartitionsInNameOrderWhateverTheUsersOrder) {
  for (const auto& order :
       {std::vector<std::string>{"small", "gpu"}, std::vector<std::string>{"gpu", "small"}}) {
    v1::JobSpec s = Gang(1, 8);
    s.set_hold(true);
    for (const std::string& p : order) s.add_partitions(p);
    ASSERT_TRUE(Submit(s).ok());
  }
  const ClusterMetrics m = engine_->Metrics();
  EXPECT_EQ(Jobs(m, "pending", "gpu,small"), 2u) << "one series, not one per order";
  EXPECT_EQ(Jobs(m, "pending", "small,gpu"), 0u);
}

TEST_F(ClusterMetricsTest, QueueWaitsAreCountedFromSubmissionToStart) {
  auto first = *Submit(Gang(4, 8));  // starts at once: waits 0 s
  Pass();
  ASSERT_EQ(Job(first).state(), v1::RUNNING);
  auto second = *Submit(Gang(1, 8));  // waits for the first to end
  now_ += 90'000;
  Pass();
  ASSERT_EQ(Job(second).state(), v1::PENDING);
  Run(first);
  Exited(first, Job(first).nodes(0), 0);  // the batch script's node
  CleanUp(first, 0);
  Pass();
  ASSERT_EQ(Job(second).state(), v1::RUNNING);
  const QueueWaits& w = engine_->Metrics().queue_waits;
  EXPECT_EQ(w.count, 2u);
  EXPECT_DOUBLE_EQ(w.sum_s, 90.0);
  // Bounds 1, 5, 15, 60, 300 ...: the 0 s wait in every bucket, the 90 s one from 300 on.
  EXPECT_EQ(w.at_or_below[0], 1u);
  EXPECT_EQ(w.at_or_below[3], 1u);
  EXPECT_EQ(w.at_or_below[4], 2u);
  EXPECT_EQ(w.at_or_below.back(), 2u);
}

TEST_F(ClusterMetricsTest, LateHeartbeatsAndEachNodesGpuHealth) {
  v1::AgentMessage hb;
  hb.mutable_heartbeat()->set_seq(1);
  now_ += 1'000;  // on time (interval 1 s)
  Agent("node1", hb);
  now_ += 2'500;  // late: more than two intervals since the last
  Agent("node1", hb);
  Agent("node2", hb);
  ClusterMetrics m = engine_->Metrics();
  EXPECT_EQ(m.heartbeats_late, 2u) << "node1's second and node2's first after 3.5 s";
  EXPECT_EQ(m.node_gpu_health["node3"], std::make_pair(8u, 0u));
  v1::AgentMessage sick;
  sick.mutable_gpu_health()->set_index(2);
  sick.mutable_gpu_health()->set_health("XID 79: fallen off the bus");
  Agent("node3", sick);
  m = engine_->Metrics();
  EXPECT_EQ(m.node_gpu_health["node3"], std::make_pair(8u, 1u));
}

}  // namespace
}  // namespace muster::controller
