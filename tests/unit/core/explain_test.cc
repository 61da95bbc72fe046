// muster explain's node-by-node verdicts: every node of a partition lands in one group, by the
// first reason it cannot take a slot, and the gang-level verdicts agree with Place().
#include "muster/core/explain.h"

#include <gtest/gtest.h>

#include "cluster_builder.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

// 8 nodes with 8 GPUs each: node0 fully busy, node1 half busy, node2 drained, node3 without the
// "ib" feature, node7 has only 4 GPUs; node4-6 are free.
ClusterView Cluster() {
  ClusterView v = testing::ClusterBuilder()
                      .Nodes(7, {32, 256000, 8, "h100"}, "node", 0, testing::Under("s1/l1"))
                      .Nodes(1, {32, 256000, 4, "h100"}, "node", 7, testing::Under("s1/l1"))
                      .Partition("gpu")
                      .Schedulable()
                      .Build();
  for (uint32_t i = 0; i < 8; ++i) v.nodes[i].features = {i == 3 ? "eth" : "ib"};
  for (uint32_t g = 0; g < 8; ++g) v.nodes[0].gpu_free[g] = false;
  for (uint32_t g = 0; g < 4; ++g) v.nodes[1].gpu_free[g] = false;
  v.nodes[2].schedulable = false;
  v.nodes[2].unavailable = "drained: bad fan";
  return v;
}

JobRequest Gang(uint32_t nodes, uint32_t gpus) {
  JobRequest r = testing::Gang(nodes, gpus);
  r.features = {{"ib"}};
  return r;
}

const NodeGroup* Find(const PartitionExplanation& e, NodeVerdict v) {
  for (const auto& g : e.groups) {
    if (g.verdict == v) return &g;
  }
  return nullptr;
}

TEST(ExplainTest, EveryNodeIsJudgedOnceByItsFirstReason) {
  JobRequest r = Gang(4, 8);
  r.excluded_nodes = {"node6"};
  auto out = ExplainPlacement(r, Cluster(), 0);
  ASSERT_EQ(out.size(), 1u);
  const PartitionExplanation& e = out[0];
  EXPECT_EQ(e.nodes, 8u);
  EXPECT_EQ(e.needed, 4u);
  EXPECT_EQ(e.fit_now, 2u);  // node4, node5
  size_t total = 0;
  for (const auto& g : e.groups) total += g.nodes.size();
  EXPECT_EQ(total, 8u);
  ASSERT_EQ(e.groups.front().verdict, NodeVerdict::kFitsNow) << "the usable nodes come first";
  EXPECT_EQ(e.groups.front().nodes, (std::vector<std::string>{"node4", "node5"}));
  const NodeGroup* busy = Find(e, NodeVerdict::kBusy);
  ASSERT_NE(busy, nullptr);
  EXPECT_EQ(busy->nodes, (std::vector<std::string>{"node0", "node1"}));
  EXPECT_EQ(busy->cause, "too few free GPUs (needs 8)");
  const NodeGroup* down = Find(e, NodeVerdict::kUnavailable);
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->cause, "drained: bad fan");
  EXPECT_EQ(Find(e, NodeVerdict::kLacksFeatures)->nodes, std::vector<std::string>{"node3"});
  EXPECT_EQ(Find(e, NodeVerdict::kExcluded)->nodes, std::vector<std::string>{"node6"});
  const NodeGroup* small = Find(e, NodeVerdict::kTooSmall);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->nodes, std::vector<std::string>{"node7"});
  EXPECT_EQ(small->cause, "has fewer than 8 GPUs");
  // The gang: not now (2 usable nodes, 4 needed), but some day (node0-2 and 4-5 qualify).
  EXPECT_NE(e.gang_now.find("Resources"), std::string::npos) << e.gang_now;
  EXPECT_EQ(e.never, "");
}

TEST(ExplainTest, GangVerdictsMatchPlace) {
  ClusterView v = Cluster();
  JobRequest fits = Gang(2, 4);  // node1 (half free), node4-6, node7 (4 GPUs): fits now
  auto e = ExplainPlacement(fits, v, 0);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].gang_now, "");
  EXPECT_TRUE(Place(fits, v, PlaceMode::kNow).ok());
  EXPECT_EQ(e[0].fit_now, 5u);

  JobRequest huge = Gang(1, 16);
  e = ExplainPlacement(huge, v, 0);
  EXPECT_EQ(e[0].fit_now, 0u);
  EXPECT_EQ(e[0].never, Place(huge, v, PlaceMode::kEver).status().message());
  EXPECT_NE(e[0].never.find("16 GPUs per node"), std::string::npos) << e[0].never;

  JobRequest wide = Gang(9, 0);
  e = ExplainPlacement(wide, v, 0);
  EXPECT_EQ(e[0].never, "asks for 9 nodes; partition gpu has 8");
}

TEST(ExplainTest, ANodeOfferingTooLittleTemporaryDiskIsTooSmall) {
  ClusterView v = Cluster();
  v.nodes[4].tmp_disk_mb = 1000;
  JobRequest r = Gang(1, 1);
  r.min_tmp_disk_mb = 1000;
  auto e = ExplainPlacement(r, v, 0);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].fit_now, 1u);
  EXPECT_EQ(e[0].groups.front().nodes, std::vector<std::string>{"node4"});
  bool small = false;
  for (const auto& g : e[0].groups) {
    small |= g.verdict == NodeVerdict::kTooSmall &&
             g.cause == "offers less than 1000 MB of temporary disk";
  }
  EXPECT_TRUE(small);
}

TEST(ExplainTest, CpuShapeVerdicts) {
  ClusterView v = Cluster();
  // node4: 2 sockets x 16 cores; node5: 1 x 16; node0, node1 and node6 are up without a known
  // topology; node7 has none and is down. node2 is drained, node3 lacks the feature.
  v.nodes[4].sockets = 2;
  v.nodes[5].sockets = 1;
  for (uint32_t i : {4, 5}) {
    v.nodes[i].cores_per_socket = 16;
    v.nodes[i].threads_per_core = 2;
  }
  v.nodes[7].schedulable = false;
  v.nodes[7].unavailable = "not registered";
  JobRequest r = Gang(1, 1);
  r.min_sockets = 2;
  auto e = ExplainPlacement(r, v, 0);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].fit_now, 1u);
  EXPECT_EQ(e[0].groups.front().nodes, std::vector<std::string>{"node4"});
  bool fewer = false, unknown = false, down = false;
  for (const auto& g : e[0].groups) {
    fewer |= g.verdict == NodeVerdict::kTooSmall && g.cause == "has fewer than 2 sockets" &&
             g.nodes == std::vector<std::string>{"node5"};
    unknown |= g.verdict == NodeVerdict::kTooSmall &&
               g.cause == "has no known CPU topology (sockets, cores, threads)" &&
               g.nodes == std::vector<std::string>{"node0", "node1", "node6"};
    down |= g.verdict == NodeVerdict::kUnavailable && g.cause == "not registered" &&
            g.nodes == std::vector<std::string>{"node7"};
  }
  EXPECT_TRUE(fewer && unknown && down) << [&] {
    std::string all;
    for (const auto& g : e[0].groups) {
      all += std::string(NodeVerdictName(g.verdict)) + " '" + g.cause + "' " +
             std::to_string(g.nodes.size()) + "; ";
    }
    return all;
  }();
  // 40 tasks, one per core: no node has 40 cores.
  r.min_sockets = 0;
  r.ntasks_per_core = 1;
  r.tasks_per_node = {40};
  r.gpus_per_node = 0;
  e = ExplainPlacement(r, v, 0);
  bool cores = false;
  for (const auto& g : e[0].groups) {
    cores |= g.cause == "has fewer than 40 cores (40 tasks, at most 1 per core)";
  }
  EXPECT_TRUE(cores);
}

TEST(ExplainTest, UnknownPartitionsAreLeftOut) {
  JobRequest r = Gang(1, 1);
  r.partitions = {"nosuch", "gpu"};
  auto e = ExplainPlacement(r, Cluster(), 0);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].partition, "gpu");
}

}  // namespace
}  // namespace muster::core
