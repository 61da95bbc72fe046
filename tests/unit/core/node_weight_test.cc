// Node weights (Slurm's Weight): the lightest nodes that can hold a job are used first, heavier
// ones only when those are not enough; topology and best fit choose among what is allowed.
#include <gtest/gtest.h>

#include <set>

#include "cluster_builder.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

// node0-3 under s1/leafA weigh 10, node4-7 under s1/leafB weigh 1.
ClusterView Cluster() {
  ClusterView v =
      testing::ClusterBuilder()
          .Nodes(8, {}, "node", 0, [](uint32_t k) { return k < 4 ? "s1/leafA" : "s1/leafB"; })
          .Partition("gpu")
          .Schedulable()
          .Build();
  for (uint32_t i = 0; i < 4; ++i) v.nodes[i].weight = 10;
  return v;
}

std::set<NodeIndex> Nodes(const Placement& p) {
  std::set<NodeIndex> s;
  for (const auto& np : p.nodes) s.insert(np.node);
  return s;
}

TEST(NodeWeightTest, TheLightestNodesThatFitAreUsedFirst) {
  ClusterView v = Cluster();
  auto one = Place(testing::Gang(1, 8), v, PlaceMode::kNow);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_GE(*Nodes(*one).begin(), 4u) << "a light node, though leafA comes first";
  auto four = Place(testing::Gang(4, 8), v, PlaceMode::kNow);
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(Nodes(*four), (std::set<NodeIndex>{4, 5, 6, 7}));
  // Six: every light node, and two heavy ones.
  auto six = Place(testing::Gang(6, 8), v, PlaceMode::kNow);
  ASSERT_TRUE(six.ok());
  std::set<NodeIndex> got = Nodes(*six);
  for (NodeIndex i = 4; i < 8; ++i) EXPECT_TRUE(got.count(i)) << i;
}

TEST(NodeWeightTest, HeavierNodesTakeWhatTheLightOnesCannotHold) {
  ClusterView v = Cluster();
  for (uint32_t i = 4; i < 8; ++i) {
    for (uint32_t g = 0; g < 4; ++g) v.nodes[i].gpu_free[g] = false;
  }
  auto whole = Place(testing::Gang(1, 8), v, PlaceMode::kNow);
  ASSERT_TRUE(whole.ok());
  EXPECT_LT(*Nodes(*whole).begin(), 4u) << "only a heavy node has 8 GPUs free";
  auto half = Place(testing::Gang(1, 4), v, PlaceMode::kNow);
  ASSERT_TRUE(half.ok());
  EXPECT_GE(*Nodes(*half).begin(), 4u) << "a light node still holds 4";
  // A node asked for by name is used whatever it weighs.
  JobRequest named = testing::Gang(1, 8);
  named.required_nodes = {"node2"};
  auto p = Place(named, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{2}));
}

// -N min-max takes as many as are free, as without weights: the light tiers first only when
// they hold the most the job takes.
TEST(NodeWeightTest, ANodeRangeTakesItsMostAndOnlyFallsBackToItsFewest) {
  ClusterView v = Cluster();
  JobRequest range = testing::Gang(8, 8);
  range.min_nodes = 2;
  auto all = Place(range, v, PlaceMode::kNow);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->nodes.size(), 8u) << "the light four alone are not the most it takes";
  for (uint32_t i = 0; i < 2; ++i) {
    for (uint32_t g = 0; g < 8; ++g) v.nodes[i].gpu_free[g] = false;
  }
  range.nodes = 6;
  range.tasks_per_node.assign(6, 1);
  auto six = Place(range, v, PlaceMode::kNow);
  ASSERT_TRUE(six.ok());
  EXPECT_EQ(six->nodes.size(), 6u) << "node2-7 are free: all six";
  for (uint32_t i = 0; i < 4; ++i) {
    for (uint32_t g = 0; g < 8; ++g) v.nodes[i].gpu_free[g] = false;
  }
  auto light = Place(range, v, PlaceMode::kNow);
  ASSERT_TRUE(light.ok());
  EXPECT_EQ(Nodes(*light), (std::set<NodeIndex>{4, 5, 6, 7}));
}

TEST(NodeWeightTest, TheScheduleStartsTheQueueOnTheLightNodesFirst) {
  ClusterView v = Cluster();
  std::vector<PendingJob> queue;
  for (JobId id = 1; id <= 5; ++id) queue.push_back(testing::Job(id, 0, 0, testing::Gang(1, 8)));
  SchedulePass r = Schedule(v, queue, 0, SchedulerConfig{});
  ASSERT_EQ(r.starts.size(), 5u);
  std::set<NodeIndex> light;
  for (size_t k = 0; k < 4; ++k) light.insert(r.starts[k].placement.nodes[0].node);
  EXPECT_EQ(light, (std::set<NodeIndex>{4, 5, 6, 7})) << "the first four on the light nodes";
  EXPECT_LT(r.starts[4].placement.nodes[0].node, 4u);
}

}  // namespace
}  // namespace muster::core
