// muster-sim's placement baselines beside Muster's topology-aware choice: first fit takes the
// lowest-numbered nodes that fit, random draws them (the same draw for the same seed and time),
// and neither is used for a job that asks something of the topology.
#include <gtest/gtest.h>

#include <set>

#include "cluster_builder.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

constexpr TimeMs kNow = 1'000'000'000;

// Eight 8-GPU nodes in two leaves of four; nodes 1 and 2 (leaf 1) have a GPU in use, so leaf 1
// has two whole nodes free and leaf 2 four.
ClusterView TwoLeafCluster() {
  ClusterView v = testing::ClusterBuilder()
                      .Nodes(8, {}, "n", 1, testing::TwoLeaves(8))
                      .Partition("gpu")
                      .Build();
  for (NodeIndex n : {1u, 2u}) {
    Placement used{"gpu", 0, {{n, {0}, 0, {0}, 1}}};
    Allocate(used, v);
    v.running.push_back({100 + n, n, kNow + 3'600'000, 1, 1, 0});
  }
  return v;
}

std::vector<NodeIndex> PlaceThree(PlacementMode mode, uint64_t seed, JobRequest r) {
  SchedulerConfig c;
  c.placement = mode;
  c.placement_seed = seed;
  r.time_limit_ms = 3'600'000;
  SchedulePass pass = Schedule(TwoLeafCluster(), {testing::Job(1, 1, kNow, r)}, kNow, c);
  std::vector<NodeIndex> nodes;
  if (pass.starts.size() == 1) {
    for (const NodePlacement& np : pass.starts[0].placement.nodes) nodes.push_back(np.node);
  }
  return nodes;
}

TEST(PlacementModeTest, TopologyKeepsTheGangInOneLeafFirstFitTakesTheLowestNodes) {
  const JobRequest whole = testing::Gang(3, 8);
  EXPECT_EQ(PlaceThree(PlacementMode::kTopology, 0, whole), (std::vector<NodeIndex>{4, 5, 6}));
  EXPECT_EQ(PlaceThree(PlacementMode::kFirstFit, 0, whole), (std::vector<NodeIndex>{0, 3, 4}))
      << "the lowest whole nodes, across both leaves";
}

TEST(PlacementModeTest, RandomIsTheSameDrawForTheSameSeedAndVariesWithIt) {
  const JobRequest whole = testing::Gang(3, 8);
  std::set<std::vector<NodeIndex>> draws;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const auto a = PlaceThree(PlacementMode::kRandom, seed, whole);
    ASSERT_EQ(a.size(), 3u);
    EXPECT_EQ(a, PlaceThree(PlacementMode::kRandom, seed, whole));
    for (NodeIndex n : a) EXPECT_TRUE(n != 1 && n != 2) << "only nodes that fit";
    draws.insert(a);
  }
  EXPECT_GT(draws.size(), 1u) << "eight seeds, one draw";
}

TEST(PlacementModeTest, OneNodeJobsFollowTheModeToo) {
  // Best fit puts a 1-GPU job on a node already in use (node 1); first fit on the first node
  // that fits, in the cluster's order (by topology path, then name): node 0.
  const JobRequest one = testing::Gang(1, 1);
  EXPECT_EQ(PlaceThree(PlacementMode::kTopology, 0, one), (std::vector<NodeIndex>{1}));
  EXPECT_EQ(PlaceThree(PlacementMode::kFirstFit, 0, one), (std::vector<NodeIndex>{0}));
}

TEST(PlacementModeTest, AJobThatAsksForOneLeafGetsOneWhateverTheMode) {
  JobRequest r = testing::Gang(3, 8);
  r.max_leaves = 1;
  EXPECT_EQ(PlaceThree(PlacementMode::kFirstFit, 0, r), (std::vector<NodeIndex>{4, 5, 6}));
  EXPECT_EQ(PlaceThree(PlacementMode::kRandom, 3, r), (std::vector<NodeIndex>{4, 5, 6}));
}

}  // namespace
}  // namespace muster::core
