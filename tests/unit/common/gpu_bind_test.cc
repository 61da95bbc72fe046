#include "muster/common/gpu_bind.h"

#include <gtest/gtest.h>

namespace muster {
namespace {

using Gpus = std::vector<std::string>;

Gpus For(const std::string& bind, uint32_t gpus_per_task, const Gpus& step, uint32_t local) {
  auto b = bind.empty() ? Result<GpuBind>(GpuBind{}) : ParseGpuBind(bind);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  auto gpus = TaskGpus(*b, gpus_per_task, step, local);
  EXPECT_TRUE(gpus.ok()) << gpus.status().ToString();
  return gpus.ok() ? *gpus : Gpus{"error"};
}

const Gpus kStep = {"4", "5", "6", "7"};  // the step's GPUs on a node, by their node index

TEST(GpuBindTest, GpusPerTaskGiveEachTaskItsOwnShare) {
  EXPECT_EQ(For("", 1, kStep, 0), Gpus{"4"});
  EXPECT_EQ(For("", 1, kStep, 3), Gpus{"7"});
  EXPECT_EQ(For("", 2, kStep, 1), (Gpus{"6", "7"}));
  EXPECT_EQ(For("", 0, kStep, 2), kStep) << "without --gpus-per-task every task sees them all";
  EXPECT_EQ(For("none", 2, kStep, 1), kStep);
  EXPECT_EQ(For("verbose", 1, kStep, 2), Gpus{"6"}) << "verbose alone keeps the default";
  EXPECT_EQ(For("per_task:2", 0, kStep, 0), (Gpus{"4", "5"}));
  EXPECT_EQ(For("", 1, kStep, 5), Gpus{"5"}) << "more tasks than GPUs start again from the first";
}

TEST(GpuBindTest, SingleMapAndMaskCountTheStepsGpus) {
  EXPECT_EQ(For("single:2", 0, kStep, 0), Gpus{"4"});
  EXPECT_EQ(For("single:2", 0, kStep, 1), Gpus{"4"});
  EXPECT_EQ(For("single:2", 0, kStep, 2), Gpus{"5"});
  EXPECT_EQ(For("map_gpu:3,0", 0, kStep, 0), Gpus{"7"});
  EXPECT_EQ(For("map_gpu:3,0", 0, kStep, 1), Gpus{"4"});
  EXPECT_EQ(For("map_gpu:3,0", 0, kStep, 2), Gpus{"7"}) << "the list is used again";
  EXPECT_EQ(For("map_gpu:1*2,2", 0, kStep, 1), Gpus{"5"});
  EXPECT_EQ(For("map_gpu:1*2,2", 0, kStep, 2), Gpus{"6"});
  EXPECT_EQ(For("mask_gpu:0x3,0xc", 0, kStep, 1), (Gpus{"6", "7"}));
  EXPECT_EQ(For("verbose,mask_gpu:5", 0, kStep, 0), (Gpus{"4", "6"}));
  // A GPU the step does not hold here is never handed out.
  auto b = ParseGpuBind("map_gpu:9");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(TaskGpus(*b, 0, kStep, 0).status().code(), StatusCode::kFailedPrecondition);
  b = ParseGpuBind("mask_gpu:0x10");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(TaskGpus(*b, 0, kStep, 0).status().code(), StatusCode::kFailedPrecondition);
}

TEST(GpuBindTest, BadValuesAreRefused) {
  for (const char* bad : {"bogus", "single:0", "single:x", "map_gpu:", "map_gpu:a", "mask_gpu:0",
                          "map_gpu:1*0", "map_gpu:0*5000", "per_task:", "closest:2"}) {
    EXPECT_EQ(ParseGpuBind(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(GpuBindTest, ClosestGivesEachTaskTheGpusNearItsCpus) {
  auto b = ParseGpuBind("verbose,closest");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->kind, GpuBind::Kind::kClosest);
  EXPECT_TRUE(b->verbose);
  // GPUs 4 and 5 hang off socket 0 (CPUs 0-3), 6 and 7 off socket 1 (CPUs 4-7).
  const std::vector<std::vector<uint32_t>> near = {
      {0, 1, 2, 3}, {0, 1, 2, 3}, {4, 5, 6, 7}, {4, 5, 6, 7}};
  EXPECT_EQ(ClosestGpus(kStep, near, {1}), (Gpus{"4", "5"}));
  EXPECT_EQ(ClosestGpus(kStep, near, {6, 7}), (Gpus{"6", "7"}));
  EXPECT_EQ(ClosestGpus(kStep, near, {3, 4}), kStep) << "a task on both sockets";
  EXPECT_EQ(ClosestGpus(kStep, near, {12}), kStep) << "near none: all, never none";
  // A GPU whose affinity is unknown is near every CPU.
  EXPECT_EQ(ClosestGpus(kStep, {{0}, {}, {4}, {4}}, {0}), (Gpus{"4", "5"}));
  EXPECT_EQ(ClosestGpus(kStep, {}, {0}), kStep);
}

}  // namespace
}  // namespace muster
