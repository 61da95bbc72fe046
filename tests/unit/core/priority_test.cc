#include "muster/core/priority.h"

#include <gtest/gtest.h>

#include "cluster_builder.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

constexpr TimeMs kDay = 24LL * 3600 * 1000;

ClusterView TwoTiers() {
  return testing::ClusterBuilder()
      .Nodes(4, {}, "n", 0)
      .Partition("low", {0, 1}, 0, 1)
      .Partition("high", {2, 3}, 0, 2)
      .Build();
}

PendingJob Job(JobId id, TimeMs submit, const std::string& partition, uint32_t nodes,
               uint32_t gpus) {
  return testing::Job(id, 0, submit, testing::Gang(nodes, gpus, 1, partition));
}

TEST(PriorityTest, WeighsEachFactor) {
  ClusterView v = TwoTiers();
  PriorityScale scale = PriorityScale::Of(v);
  EXPECT_EQ(scale.total_gpus, 32u);
  EXPECT_EQ(scale.max_tier, 2u);
  PriorityWeights w;  // age 1000, size 1000, partition 1000, qos 1000, fairshare 10000
  PendingJob j = Job(1, 0, "low", 2, 8);  // 16 of 32 GPUs
  j.priority.qos = 0.25;
  j.priority.fairshare = 0.1;
  j.priority.nice = 7;
  PriorityFactors f = ComputePriority(j, 1, scale, 7 * kDay / 2, w);  // half of max age
  EXPECT_DOUBLE_EQ(f.age, 0.5);
  EXPECT_DOUBLE_EQ(f.size, 0.5);
  EXPECT_DOUBLE_EQ(f.partition, 0.5);
  EXPECT_DOUBLE_EQ(f.qos, 0.25);
  EXPECT_DOUBLE_EQ(f.fairshare, 0.1);
  EXPECT_EQ(f.priority, 500 + 500 + 500 + 250 + 1000 - 7);
  // Age saturates; an admin's fixed priority replaces the sum.
  EXPECT_DOUBLE_EQ(ComputePriority(j, 1, scale, 30 * kDay, w).age, 1.0);
  j.priority.fixed = 42;
  EXPECT_EQ(ComputePriority(j, 1, scale, 0, w).priority, 42);
}

TEST(PriorityTest, OrderIsTierThenPriorityThenSubmitThenId) {
  ClusterView v = TwoTiers();
  std::vector<PendingJob> q = {Job(1, 100, "low", 1, 8), Job(2, 100, "high", 1, 1),
                               Job(3, 50, "low", 1, 8), Job(4, 50, "low", 1, 8),
                               Job(5, 100, "low", 2, 8)};
  SchedulerConfig c;
  c.weights.age = 0;  // equal ages would not matter anyway; keep the arithmetic obvious
  std::vector<size_t> order = PriorityOrder(v, q, 1000, c);
  std::vector<JobId> ids;
  for (size_t i : order) ids.push_back(q[i].id);
  // Job 2: higher tier. Job 5: bigger. Then 3 and 4 (earlier submit, then id), then 1.
  EXPECT_EQ(ids, (std::vector<JobId>{2, 5, 3, 4, 1}));
}

TEST(GpuLocalityTest, PicksGpusSharingASwitchAndCpusOnTheirNuma) {
  // A PCIe box: GPUs 0-3 under switch 0 (NUMA 0), 4-7 under switch 1 (NUMA 1); CPUs 0-7 on NUMA 0,
  // 8-15 on NUMA 1. GPU 1 is busy, so a 4-GPU job fits only under switch 1.
  ClusterView v;
  v.nodes.push_back(NodeView::Empty("box", 16, 64000, 8, "l40s", ""));
  NodeView& n = v.nodes[0];
  n.gpu_link_group = {0, 0, 0, 0, 1, 1, 1, 1};
  n.gpu_numa = {0, 0, 0, 0, 1, 1, 1, 1};
  for (uint32_t c = 0; c < 16; ++c) n.cpu_numa.push_back(c < 8 ? 0 : 1);
  n.gpu_free[1] = false;
  v.partitions.push_back({"gpu", {0}, 0, 1});
  JobRequest r;
  r.partitions = {"gpu"};
  r.tasks_per_node = {2};
  r.cpus_per_task = 2;
  r.gpus_per_node = 4;
  auto p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes[0].gpus, (std::vector<uint32_t>{4, 5, 6, 7}));
  EXPECT_EQ(p->nodes[0].cpus, (std::vector<uint32_t>{8, 9, 10, 11}));
  // A 2-GPU job takes the best-fitting switch: the one with 3 free, not a fresh one.
  Allocate(*p, v);
  r.gpus_per_node = 2;
  r.tasks_per_node = {1};
  auto q = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->nodes[0].gpus, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(q->nodes[0].cpus, (std::vector<uint32_t>{0, 1}));
}

}  // namespace
}  // namespace muster::core
