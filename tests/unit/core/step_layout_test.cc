// Where a step's tasks go inside its job's allocation, as srun lays them out.
#include "muster/core/step_layout.h"

#include <gtest/gtest.h>

namespace muster::core {
namespace {

// A node of the job with `cpus` CPUs (ids 0..), `gpus` GPUs and `tasks` of the job's tasks; the
// first `busy_cpus` CPUs and `busy_gpus` GPUs are held by running steps.
StepRoom Room(uint32_t cpus, uint32_t gpus, uint32_t tasks, uint32_t busy_cpus = 0,
              uint32_t busy_gpus = 0) {
  StepRoom r;
  r.job_tasks = tasks;
  r.all_cpus = cpus;
  r.all_gpus = gpus;
  for (uint32_t c = busy_cpus; c < cpus; ++c) r.free_cpus.push_back(c);
  for (uint32_t g = busy_gpus; g < gpus; ++g) r.free_gpus.push_back(g);
  return r;
}

TEST(StepLayoutTest, WithoutCountsTheStepTakesTheJobsOwnLayout) {
  auto l = LayOutStep({Room(8, 4, 2), Room(8, 4, 2)}, {}, 1, "job 7", false);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->nodes.size(), 2u);
  EXPECT_EQ(l->nodes[0].tasks, 2u);
  EXPECT_EQ(l->nodes[1].tasks, 2u);
  EXPECT_EQ(l->nodes[0].cpus.size(), 8u) << "without --exact: every CPU left free there";
  EXPECT_TRUE(l->nodes[0].gpus.empty()) << "no GPU options: the step uses the job's, holds none";
}

TEST(StepLayoutTest, CountsAndExactness) {
  StepShape s;
  s.ntasks = 3;
  s.cpus_per_task = 2;
  s.exact = true;
  auto l = LayOutStep({Room(4, 0, 1), Room(4, 0, 1)}, s, 1, "job 7", false);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->nodes.size(), 2u);
  EXPECT_EQ(l->nodes[0].tasks, 2u) << "fills the first node, then the next";
  EXPECT_EQ(l->nodes[1].tasks, 1u);
  EXPECT_EQ(l->nodes[1].cpus, (std::vector<uint32_t>{0, 1})) << "--exact: just what it needs";
  EXPECT_EQ(l->cpus_per_task, 2u);

  s = {};
  s.nodes = 2;
  s.ntasks_per_node = 3;
  l = LayOutStep({Room(4, 0, 1), Room(4, 0, 1)}, s, 1, "job 7", false);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->nodes[0].tasks + l->nodes[1].tasks, 6u);
}

TEST(StepLayoutTest, BusyIsRetryableNeverIsNot) {
  StepShape s;
  s.ntasks = 6;
  // Other steps hold half of each node's CPUs: not now, but it could run.
  auto busy = LayOutStep({Room(4, 0, 2, 2), Room(4, 0, 2, 2)}, s, 1, "job 7", false);
  EXPECT_EQ(busy.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(busy.status().message(), "Requested nodes are busy");
  s.overlap = true;
  StepRoom shared = Room(4, 0, 2);  // --overlap: all of the job's CPUs count
  auto overlap = LayOutStep({shared, shared}, s, 1, "job 7", false);
  ASSERT_TRUE(overlap.ok()) << overlap.status().ToString();
  EXPECT_TRUE(overlap->nodes[0].cpus.empty()) << "an overlapping step holds no CPUs";

  s = {};
  s.ntasks = 9;
  auto never = LayOutStep({Room(4, 0, 2), Room(4, 0, 2)}, s, 1, "job 7", false);
  EXPECT_EQ(never.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(never.status().message().find("more than job 7 holds"), std::string::npos);
}

TEST(StepLayoutTest, GpusPerTaskPerNodeAndInTotal) {
  StepShape s;
  s.ntasks = 2;
  s.gpus_per_task = 2;
  auto l = LayOutStep({Room(8, 4, 1), Room(8, 4, 1)}, s, 1, "job 7", false);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->nodes.size(), 1u) << "both tasks fit the first node";
  EXPECT_EQ(l->nodes[0].gpus, (std::vector<uint32_t>{0, 1, 2, 3}));
  // Another step holds a GPU of each node: three left, two tasks of two do not fit either.
  auto busy = LayOutStep({Room(8, 4, 1, 0, 1)}, s, 1, "job 7", false);
  EXPECT_EQ(busy.status().code(), StatusCode::kUnavailable);

  s = {};
  s.nodes = 2;
  s.gpus_per_node = 2;
  l = LayOutStep({Room(8, 4, 1, 0, 1), Room(8, 4, 1)}, s, 1, "job 7", false);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->nodes[0].gpus, (std::vector<uint32_t>{1, 2})) << "the free ones";
  EXPECT_EQ(l->nodes[1].gpus, (std::vector<uint32_t>{0, 1}));

  s = {};
  s.nodes = 2;
  s.gpus = 4;  // -G: divided evenly over the nodes
  l = LayOutStep({Room(8, 4, 1), Room(8, 4, 1)}, s, 1, "job 7", false);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->nodes[0].gpus.size(), 2u);
  EXPECT_EQ(l->nodes[1].gpus.size(), 2u);
}

TEST(StepLayoutTest, MalformedCountsAreRefused) {
  StepShape s;
  s.nodes = 3;
  s.ntasks = 2;
  EXPECT_EQ(LayOutStep({Room(4, 0, 1), Room(4, 0, 1), Room(4, 0, 1)}, s, 1, "job 7", false)
                .status()
                .code(),
            StatusCode::kInvalidArgument)
      << "more nodes than tasks";
  s = {};
  s.nodes = 3;
  auto too_many = LayOutStep({Room(4, 0, 1), Room(4, 0, 1)}, s, 1, "job 7", true);
  EXPECT_EQ(too_many.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(too_many.status().message().find("of those selected"), std::string::npos);
  s = {};
  s.ntasks = 1u << 30;  // would overflow the products below
  EXPECT_EQ(LayOutStep({Room(4, 0, 1)}, s, 1, "job 7", false).status().code(),
            StatusCode::kInvalidArgument);
  s = {};
  s.gpus = 3;
  EXPECT_EQ(LayOutStep({Room(4, 4, 1), Room(4, 4, 1)}, s, 1, "job 7", false).status().code(),
            StatusCode::kInvalidArgument)
      << "-G 3 does not divide over 2 nodes";
  EXPECT_EQ(LayOutStep({}, {}, 1, "job 7", false).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace muster::core

namespace muster::core {
namespace {

TEST(StepLayoutTest, OvercommitStartsMoreTasksThanCpusSpreadOverTheNodes) {
  StepShape s;
  s.ntasks = 8;
  EXPECT_EQ(LayOutStep({Room(2, 0, 1), Room(2, 0, 1)}, s, 1, "job 7", false).status().code(),
            StatusCode::kFailedPrecondition)
      << "without -O: one CPU per task";
  s.overcommit = true;
  auto l = LayOutStep({Room(2, 0, 1), Room(2, 0, 1)}, s, 1, "job 7", false);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->nodes.size(), 2u);
  EXPECT_EQ(l->nodes[0].tasks, 4u);
  EXPECT_EQ(l->nodes[1].tasks, 4u);
  s.exact = true;
  l = LayOutStep({Room(2, 0, 1), Room(2, 0, 1)}, s, 1, "job 7", false);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->nodes[0].cpus.size(), 1u) << "--exact with -O: one task's CPUs";
  s.exact = false;
  s.cpus_per_task = 3;  // more than a node has: never
  EXPECT_EQ(LayOutStep({Room(2, 0, 1), Room(2, 0, 1)}, s, 1, "job 7", false).status().code(),
            StatusCode::kFailedPrecondition);
  s.cpus_per_task = 0;
  s.ntasks = 2000;
  s.nodes = 2;  // 1000 a node: above Slurm's MAX_TASKS_PER_NODE
  EXPECT_EQ(LayOutStep({Room(2, 0, 1), Room(2, 0, 1)}, s, 1, "job 7", false).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(StepLayoutTest, OvercommitDefaultLayoutIsTheJobsTasks) {
  StepShape s;
  s.overcommit = true;
  auto l = LayOutStep({Room(1, 0, 8)}, s, 1, "job 7", false);  // sbatch -O -n8 on 1 CPU
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->nodes.size(), 1u);
  EXPECT_EQ(l->nodes[0].tasks, 8u);
}

using Ids = std::vector<std::vector<uint32_t>>;

TEST(StepLayoutTest, TaskIdsGoOverTheNodesAsTheDistributionSays) {
  const TaskDistribution block, cyclic{.kind = TaskDistribution::Kind::kCyclic};
  const TaskDistribution plane2{.kind = TaskDistribution::Kind::kPlane, .plane = 2};
  EXPECT_EQ(AssignTaskIds({3, 2}, block), (Ids{{0, 1, 2}, {3, 4}}));
  EXPECT_EQ(AssignTaskIds({3, 2}, cyclic), (Ids{{0, 2, 4}, {1, 3}}));
  EXPECT_EQ(AssignTaskIds({4, 2}, plane2), (Ids{{0, 1, 4, 5}, {2, 3}}));
  EXPECT_EQ(AssignTaskIds({3, 3}, plane2), (Ids{{0, 1, 4}, {2, 3, 5}}));
  // A node that has its share is skipped: the others go on round robin.
  EXPECT_EQ(AssignTaskIds({1, 3, 2}, cyclic), (Ids{{0}, {1, 3, 5}, {2, 4}}));
  EXPECT_EQ(AssignTaskIds({5, 1}, plane2), (Ids{{0, 1, 3, 4, 5}, {2}}));
  // One node: every distribution is a block.
  EXPECT_EQ(AssignTaskIds({3}, cyclic), (Ids{{0, 1, 2}}));

  // The layout's counts stay; only the ids move.
  StepShape s;
  s.nodes = 2;
  s.ntasks = 5;
  s.distribution = cyclic;
  auto l = LayOutStep({Room(4, 0, 1), Room(4, 0, 1)}, s, 1, "job 7", false);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->nodes.size(), 2u);
  EXPECT_EQ(l->nodes[0].tasks, 3u);
  EXPECT_EQ(l->nodes[0].task_ids, (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(l->nodes[1].task_ids, (std::vector<uint32_t>{1, 3}));
  s.distribution = {};
  l = LayOutStep({Room(4, 0, 1), Room(4, 0, 1)}, s, 1, "job 7", false);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->nodes[1].task_ids, (std::vector<uint32_t>{3, 4})) << "block by default";
}

TEST(StepLayoutTest, TaskDistributionNames) {
  auto d = ParseTaskDistribution("");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, TaskDistribution::Kind::kBlock);
  d = ParseTaskDistribution("cyclic");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, TaskDistribution::Kind::kCyclic);
  d = ParseTaskDistribution("plane=3");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, TaskDistribution::Kind::kPlane);
  EXPECT_EQ(d->plane, 3u);
  for (const char* bad : {"plane=0", "plane=", "plane", "plane=x", "arbitrary", "Cyclic"}) {
    EXPECT_EQ(ParseTaskDistribution(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace muster::core
