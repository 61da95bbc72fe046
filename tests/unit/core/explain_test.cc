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

TEST(ExplainTest, UnknownPartitionsAreLeftOut) {
  JobRequest r = Gang(1, 1);
  r.partitions = {"nosuch", "gpu"};
  auto e = ExplainPlacement(r, Cluster(), 0);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].partition, "gpu");
}

}  // namespace
}  // namespace muster::core
