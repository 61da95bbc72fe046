#include "muster/core/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "cluster_builder.h"

namespace muster::core {
namespace {

// n nodes with `gpus` GPUs and 16 CPUs each; half under leaf1, half under leaf2.
ClusterView Cluster(uint32_t n, uint32_t gpus = 8, uint32_t cpus = 16) {
  return testing::ClusterBuilder()
      .Nodes(n, {cpus, 64000, gpus, "h100"}, "node", 1, testing::TwoLeaves(n))
      .Partition("gpu")
      .Build();
}

using testing::Gang;
using testing::Job;

SchedulerConfig NoBackfill() {
  SchedulerConfig c;
  c.backfill_depth = 0;
  return c;
}

TEST(PlaceTest, PlacesAWholeGangWithGpusByIndex) {
  ClusterView v = Cluster(4);
  auto p = Place(Gang(2, 8), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->nodes.size(), 2u);
  EXPECT_EQ(p->partition, "gpu");
  for (const auto& np : p->nodes) {
    EXPECT_EQ(np.gpus, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(np.cpus.size(), 1u);
    EXPECT_EQ(np.ntasks, 1u);
  }
  EXPECT_LT(p->nodes[0].node, p->nodes[1].node);  // the batch node is the lowest
}

TEST(PlaceTest, KeepsAGangUnderOneLeafWhenItCan) {
  ClusterView v = Cluster(8);  // node1-4 leaf1, node5-8 leaf2
  // Half of node1 is used, so leaf1 has only 3 nodes with 8 GPUs free.
  auto first = Place(Gang(1, 4), v, PlaceMode::kNow);
  ASSERT_TRUE(first.ok());
  Allocate(*first, v);
  auto p = Place(Gang(4, 8), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok());
  std::set<std::string> leaves;
  for (const auto& np : p->nodes) leaves.insert(v.nodes[np.node].topology);
  EXPECT_EQ(leaves.size(), 1u) << "a 4-node gang fits in leaf2 and must not span leaves";
  EXPECT_EQ(*leaves.begin(), "spine1/leaf2");
}

TEST(PlaceTest, BestFitLeafLeavesTheBiggestIslandFree) {
  ClusterView v = Cluster(8);
  // Fill node5 so leaf2 has 3 whole nodes left and leaf1 has 4: a 2-node gang goes to leaf2.
  auto fill = Place(Gang(1, 8), v, PlaceMode::kNow);
  ASSERT_TRUE(fill.ok());
  Placement moved = *fill;
  moved.nodes[0].node = 4;
  Allocate(moved, v);
  auto p = Place(Gang(2, 8), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok());
  for (const auto& np : p->nodes) EXPECT_EQ(v.nodes[np.node].topology, "spine1/leaf2");
}

TEST(PlaceTest, NeverPlacesPartOfAGang) {
  ClusterView v = Cluster(4);
  v.nodes[3].schedulable = false;
  auto p = Place(Gang(4, 8), v, PlaceMode::kNow);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find("ReqNodeNotAvail"), std::string::npos)
      << p.status().message();
}

TEST(PlaceTest, ExplainsWhyARequestCanNeverRun) {
  ClusterView v = Cluster(4);
  auto p = Place(Gang(1, 16), v, PlaceMode::kEver);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.status().message(),
            "asks for 16 GPUs per node; the largest node in partition gpu has 8");

  JobRequest r = Gang(1, 0, 17);
  p = Place(r, v, PlaceMode::kEver);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("17 CPUs on one node"), std::string::npos);

  r = Gang(1, 1);
  r.gpu_type = "a100";
  p = Place(r, v, PlaceMode::kEver);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("GPU type 'a100'; partition gpu has h100"),
            std::string::npos);

  r = Gang(1, 0);
  r.mem_per_node_mb = 100000;
  EXPECT_FALSE(Place(r, v, PlaceMode::kEver).ok());

  r.partitions = {"nosuch"};
  p = Place(r, v, PlaceMode::kEver);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);

  // More nodes than the partition has: accepted (it pends), as Slurm does.
  EXPECT_TRUE(Place(Gang(5, 8), v, PlaceMode::kEver).ok());
  // Ever ignores what is busy or down.
  v.nodes[0].schedulable = false;
  EXPECT_TRUE(Place(Gang(4, 8), v, PlaceMode::kEver).ok());
}

TEST(PlaceTest, ExclusiveTakesWholeIdleNodes) {
  ClusterView v = Cluster(2);
  auto small = Place(Gang(1, 1), v, PlaceMode::kNow);
  ASSERT_TRUE(small.ok());
  Allocate(*small, v);
  JobRequest r = Gang(1, 0);
  r.exclusive = true;
  auto p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->nodes[0].node, 1u);
  EXPECT_EQ(p->nodes[0].gpus.size(), 8u);
  EXPECT_EQ(p->nodes[0].cpus.size(), 16u);
  r.nodes = 2;
  r.tasks_per_node = {1, 1};
  EXPECT_FALSE(Place(r, v, PlaceMode::kNow).ok());
}

TEST(PlaceTest, TriesPartitionsInOrder) {
  ClusterView v = Cluster(2);
  v.partitions[0].nodes = {0};
  v.partitions.push_back({"other", {1}, 0, 1});
  auto a = Place(Gang(1, 8), v, PlaceMode::kNow);
  ASSERT_TRUE(a.ok());
  Allocate(*a, v);
  JobRequest r = Gang(1, 8);
  r.partitions = {"gpu", "other"};
  auto b = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->partition, "other");
}

TEST(ScheduleTest, WithoutBackfillABlockedJobHoldsBackLowerJobs) {
  ClusterView v = Cluster(2);
  std::vector<PendingJob> q;
  q.push_back(Job(1, 10, 100, Gang(2, 8)));  // fits: takes everything
  q.push_back(Job(2, 10, 200, Gang(1, 1)));  // blocked: resources
  q.push_back(Job(3, 10, 300, Gang(1, 1)));  // behind job 2
  SchedulePass pass = Schedule(v, q, 0, NoBackfill());
  ASSERT_EQ(pass.starts.size(), 1u);
  EXPECT_EQ(pass.starts[0].job, 1u);
  ASSERT_EQ(pass.pending.size(), 2u);
  EXPECT_EQ(pass.pending[0].job, 2u);
  EXPECT_EQ(pass.pending[0].reason, JobReason::kResources);
  EXPECT_EQ(pass.pending[1].job, 3u);
  EXPECT_EQ(pass.pending[1].reason, JobReason::kPriority);
}

TEST(ScheduleTest, HigherPriorityFirstThenSubmitOrder) {
  ClusterView v = Cluster(1);
  std::vector<PendingJob> q;
  q.push_back(Job(1, 1, 100, Gang(1, 8)));
  q.push_back(Job(2, 5, 200, Gang(1, 8)));
  SchedulePass pass = Schedule(v, q, 0, {});
  ASSERT_EQ(pass.starts.size(), 1u);
  EXPECT_EQ(pass.starts[0].job, 2u);
}

TEST(ScheduleTest, PartitionTimeLimitPends) {
  ClusterView v = Cluster(1);
  v.partitions[0].max_time_ms = 1000;
  JobRequest r = Gang(1, 1);
  r.time_limit_ms = 2000;
  SchedulePass pass = Schedule(v, {Job(1, 1, 1, r)}, 0, {});
  ASSERT_EQ(pass.pending.size(), 1u);
  EXPECT_EQ(pass.pending[0].reason, JobReason::kPartitionTimeLimit);
}

// Randomized: thousands of random clusters and queues; after every pass no CPU or GPU is given
// twice, gangs are whole, nothing lands on an unschedulable node, and the pass is deterministic.
TEST(ScheduleTest, RandomizedInvariants) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 2000; ++iter) {
    uint32_t n = 1 + rng() % 12;
    ClusterView v = Cluster(n, rng() % 2 ? 8 : 4, 4 + rng() % 13);
    for (auto& node : v.nodes) node.schedulable = rng() % 6 != 0;
    // Some resources already in use.
    for (auto& node : v.nodes) {
      for (size_t g = 0; g < node.gpu_free.size(); ++g) node.gpu_free[g] = rng() % 4 != 0;
      for (size_t c = 0; c < node.cpu_free.size(); ++c) node.cpu_free[c] = rng() % 3 != 0;
    }
    std::vector<PendingJob> q;
    uint32_t jobs = 1 + rng() % 20;
    for (uint32_t j = 0; j < jobs; ++j) {
      JobRequest r = Gang(1 + rng() % 4, rng() % 9, 1 + rng() % 3);
      r.exclusive = rng() % 10 == 0;
      q.push_back(
          Job(j + 1, static_cast<int64_t>(1 + rng() % 3), static_cast<TimeMs>(rng() % 100), r));
    }
    SchedulePass pass = Schedule(v, q, 0, {});
    SchedulePass again = Schedule(v, q, 0, {});
    ASSERT_EQ(pass.starts.size(), again.starts.size()) << "not deterministic";
    std::map<JobId, const PendingJob*> by_id;
    for (const auto& j : q) by_id[j.id] = &j;
    ClusterView used = v;
    for (size_t s = 0; s < pass.starts.size(); ++s) {
      const JobStart& st = pass.starts[s];
      ASSERT_EQ(st.job, again.starts[s].job);
      const JobRequest& r = by_id[st.job]->request;
      ASSERT_EQ(st.placement.nodes.size(), r.nodes) << "partial gang";
      std::set<NodeIndex> distinct;
      for (const auto& np : st.placement.nodes) {
        NodeView& node = used.nodes[np.node];
        ASSERT_TRUE(node.schedulable) << "placed on an unschedulable node";
        ASSERT_TRUE(distinct.insert(np.node).second) << "a node twice in one gang";
        ASSERT_GE(np.gpus.size(), r.gpus_per_node);
        for (uint32_t g : np.gpus) {
          ASSERT_TRUE(node.gpu_free[g]) << "GPU given twice";
          node.gpu_free[g] = false;
        }
        for (uint32_t c : np.cpus) {
          ASSERT_TRUE(node.cpu_free[c]) << "CPU given twice";
          node.cpu_free[c] = false;
        }
      }
    }
    ASSERT_EQ(pass.starts.size() + pass.pending.size(), q.size());
  }
}

}  // namespace
}  // namespace muster::core
