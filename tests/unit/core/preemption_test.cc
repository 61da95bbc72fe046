// Victim choice: whole jobs only, the cheapest that free the right shape, never a preemption
// that leaves the preemptor unable to start. Also the scheduler's limit counters.
#include "muster/core/preemption.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cluster_builder.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

using testing::ClusterBuilder;
using testing::Gang;
using testing::NodeShape;
using testing::TwoLeaves;

// Runs a job on `nodes` (every GPU of each) in `view`; returns it as a candidate.
PreemptCandidate Occupy(ClusterView& view, JobId id, std::vector<NodeIndex> nodes, int64_t priority,
                        TimeMs since) {
  PreemptCandidate c;
  c.job = id;
  c.priority = priority;
  c.work_since_ms = since;
  JobRequest r = Gang(static_cast<uint32_t>(nodes.size()), 8);
  r.required_nodes.clear();
  for (NodeIndex n : nodes) {
    NodePlacement np;
    np.node = n;
    for (uint32_t g = 0; g < 8; ++g) np.gpus.push_back(g);
    np.cpus = {0, 1};
    np.ntasks = 1;
    view.nodes[n].Take(np);
    c.placement.nodes.push_back(np);
  }
  return c;
}

class PreemptionTest : public ::testing::Test {
 protected:
  // 8 nodes of 8 GPUs: node1-4 under leaf1, node5-8 under leaf2.
  ClusterView view_ = ClusterBuilder()
                          .Nodes(8, NodeShape{}, "node", 1, TwoLeaves(8))
                          .Partition("gpu")
                          .Schedulable()
                          .Build();
};

TEST_F(PreemptionTest, AGangIsPreemptedWholeOrNotAtAll) {
  std::vector<PreemptCandidate> c = {Occupy(view_, 1, {0, 1, 2, 3}, 10, 0),
                                     Occupy(view_, 2, {4, 5, 6, 7}, 10, 0)};
  auto plan = PlanPreemption(Gang(1, 8), view_, c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->victims.size(), 1u);
  EXPECT_EQ(plan->nodes.size(), 1u);
}

TEST_F(PreemptionTest, VictimsFreeTheLeafTheGangNeeds) {
  // Leaf1: two cheap single-node jobs on node1-2 and an expensive one on node3-4. Leaf2: two
  // cheap jobs on node5 and node7, an expensive one on node6 and node8. A 4-node gang under one
  // leaf must take a whole leaf: leaf1 costs the cheap pair plus job 3, leaf2 the pair plus job
  // 6: equal priorities there, so the newer work goes.
  std::vector<PreemptCandidate> c = {
      Occupy(view_, 1, {0}, 1, 100),    Occupy(view_, 2, {1}, 1, 100),
      Occupy(view_, 3, {2, 3}, 5, 100), Occupy(view_, 4, {4}, 1, 100),
      Occupy(view_, 5, {6}, 1, 100),    Occupy(view_, 6, {5, 7}, 5, 200)};
  JobRequest r = Gang(4, 8);
  r.scope = JobRequest::Scope::kLeaf;
  auto plan = PlanPreemption(r, view_, c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<JobId> v = plan->victims;
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v, (std::vector<JobId>{4, 5, 6}));
  EXPECT_EQ(plan->nodes, (std::vector<NodeIndex>{4, 5, 6, 7}));
}

TEST_F(PreemptionTest, LowerPriorityGoesFirstThenLessWorkLost) {
  std::vector<PreemptCandidate> c = {Occupy(view_, 1, {0}, 5, 0), Occupy(view_, 2, {1}, 1, 0),
                                     Occupy(view_, 3, {2}, 1, 50)};
  for (NodeIndex n = 3; n < 8; ++n) c.push_back(Occupy(view_, 10 + n, {n}, 9, 0));
  auto plan = PlanPreemption(Gang(1, 8), view_, c);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->victims, (std::vector<JobId>{3}));  // priority 1, started latest
  auto two = PlanPreemption(Gang(2, 8), view_, c);
  ASSERT_TRUE(two.ok());
  std::vector<JobId> v = two->victims;
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v, (std::vector<JobId>{2, 3}));
}

TEST_F(PreemptionTest, FreeNodesAreUsedBeforeAnyVictim) {
  std::vector<PreemptCandidate> c = {Occupy(view_, 1, {0}, 1, 0), Occupy(view_, 2, {1}, 1, 0),
                                     Occupy(view_, 3, {2}, 1, 0)};
  // node4 is free: a 2-node gang under leaf1 preempts one job, not two.
  JobRequest r = Gang(2, 8);
  r.scope = JobRequest::Scope::kLeaf;
  for (NodeIndex n = 4; n < 8; ++n) c.push_back(Occupy(view_, 10 + n, {n}, 1, 0));
  auto plan = PlanPreemption(r, view_, c);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->victims.size(), 1u);
  EXPECT_TRUE(std::find(plan->nodes.begin(), plan->nodes.end(), 3u) != plan->nodes.end());
}

TEST_F(PreemptionTest, NothingWhenNoSetOfVictimsLetsItStart) {
  // Only node1's job may be preempted; the others are not candidates.
  std::vector<PreemptCandidate> c = {Occupy(view_, 1, {0}, 1, 0)};
  for (NodeIndex n = 1; n < 8; ++n) Occupy(view_, 10 + n, {n}, 1, 0);
  auto plan = PlanPreemption(Gang(2, 8), view_, c);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  // A leaf-bound gang whose leaf cannot be freed: nothing either.
  std::vector<PreemptCandidate> split = {Occupy(view_, 1, {0}, 1, 0)};
  ClusterView v2 = ClusterBuilder()
                       .Nodes(8, NodeShape{}, "node", 1, TwoLeaves(8))
                       .Partition("gpu")
                       .Schedulable()
                       .Build();
  std::vector<PreemptCandidate> c2 = {Occupy(v2, 1, {0}, 1, 0), Occupy(v2, 2, {4}, 1, 0)};
  for (NodeIndex n : {1u, 2u, 3u, 5u, 6u, 7u}) Occupy(v2, 10 + n, {n}, 1, 0);
  JobRequest r = Gang(2, 8);
  r.scope = JobRequest::Scope::kLeaf;
  EXPECT_FALSE(PlanPreemption(r, v2, c2).ok());
}

TEST(LimitCountersTest, AJobOverALimitWaitsWithItsReasonAndOthersStillStart) {
  ClusterView view =
      ClusterBuilder().Nodes(4, NodeShape{}, "node", 1).Partition("gpu").Schedulable().Build();
  view.limits.push_back({JobReason::kAssocGrpGRES, "account a: GPUs", 8, 16});
  std::vector<PendingJob> queue;
  for (JobId id = 1; id <= 3; ++id) {
    PendingJob j = testing::Job(id, 100 - static_cast<int64_t>(id), 0, Gang(1, 8));
    if (id <= 2) j.limits.push_back({0, 8});
    queue.push_back(j);
  }
  SchedulePass pass = Schedule(view, queue, 0, SchedulerConfig{});
  std::vector<JobId> started;
  for (const auto& s : pass.starts) started.push_back(s.job);
  EXPECT_EQ(started, (std::vector<JobId>{1, 3}));
  ASSERT_EQ(pass.pending.size(), 1u);
  EXPECT_EQ(pass.pending[0].job, 2u);
  EXPECT_EQ(pass.pending[0].reason, JobReason::kAssocGrpGRES);
  EXPECT_EQ(pass.pending[0].detail,
            "account a: GPUs: 16 of 16 in use, this job needs 8; it starts "
            "when 8 more are free");
  EXPECT_TRUE(pass.reservations.empty()) << "a job held by a limit reserves nothing";
}

}  // namespace
}  // namespace muster::core
