// --gpus-per-socket: a node takes the job only with N free GPUs on each of S of its sockets
// (GPUs of an unknown socket count for none), and the job gets N from each of S sockets.
#include <gtest/gtest.h>

#include <set>

#include "cluster_builder.h"
#include "muster/core/explain.h"
#include "muster/core/preemption.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

constexpr uint32_t kU = kUnknownSocket;

// `count` nodes of 16 CPUs (2 sockets x 8 cores) and 8 GPUs, four on each socket.
ClusterView Cluster(uint32_t count) {
  ClusterView v = testing::ClusterBuilder()
                      .Nodes(count, {16, 64000, 8, "h100"}, "node", 0)
                      .Partition("gpu")
                      .Schedulable()
                      .Build();
  for (NodeView& n : v.nodes) {
    n.sockets = 2;
    n.cores_per_socket = 8;
    n.threads_per_core = 1;
    n.gpu_socket = {0, 0, 0, 0, 1, 1, 1, 1};
  }
  return v;
}

// N GPUs on each of S sockets of every one of `nodes` nodes (the controller makes gpus_per_node
// N x S).
JobRequest PerSocket(uint32_t nodes, uint32_t per_socket, uint32_t sockets) {
  JobRequest r = testing::Gang(nodes, per_socket * sockets);
  r.gpus_per_socket = per_socket;
  r.min_sockets = sockets;
  return r;
}

void Busy(NodeView& n, std::initializer_list<uint32_t> gpus) {
  for (uint32_t g : gpus) n.gpu_free[g] = false;
}

TEST(GpusPerSocketTest, TakesTheGpusFromEachSocket) {
  ClusterView v = Cluster(1);
  auto p = Place(PerSocket(1, 2, 2), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->nodes.size(), 1u);
  EXPECT_EQ(p->nodes[0].gpus, (std::vector<uint32_t>{0, 1, 4, 5}));
  // One socket of the two.
  p = Place(PerSocket(1, 3, 1), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes[0].gpus, (std::vector<uint32_t>{0, 1, 2}));
}

TEST(GpusPerSocketTest, FiveFreeGpusOnOneSocketAndOneOnTheOtherDoNotFit) {
  ClusterView v = Cluster(1);
  Busy(v.nodes[0], {0, 1, 2});  // socket 0: one free; socket 1: four
  auto p = Place(PerSocket(1, 2, 2), v, PlaceMode::kNow);
  ASSERT_FALSE(p.ok()) << "five GPUs are free, but not two on each socket";
  EXPECT_EQ(p.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find("Resources"), std::string::npos) << p.status().message();
  EXPECT_TRUE(Place(PerSocket(1, 2, 2), v, PlaceMode::kEver).ok()) << "an empty node would";
  // The same four GPUs without a socket to come from fit.
  EXPECT_TRUE(Place(testing::Gang(1, 4), v, PlaceMode::kNow).ok());
  // Two from one socket do.
  p = Place(PerSocket(1, 2, 1), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes[0].gpus, (std::vector<uint32_t>{4, 5}));
  // muster explain says which nodes are busy, and why.
  auto out = ExplainPlacement(PerSocket(1, 2, 2), v, 0);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_FALSE(out[0].groups.empty());
  EXPECT_EQ(out[0].groups[0].verdict, NodeVerdict::kBusy);
  EXPECT_EQ(out[0].groups[0].cause, "too few free GPUs on its sockets (needs 2 on each of 2)");
}

// Of the sockets that hold the GPUs, the fullest stay whole: the ones with the fewest free GPUs
// are taken first, the lower socket on ties.
TEST(GpusPerSocketTest, BestFittingSocketsFirst) {
  ClusterView v = Cluster(1);
  NodeView& n = v.nodes[0];
  n.sockets = 3;
  n.gpu_socket = {0, 0, 0, 0, 1, 1, 2, 2};
  auto p = Place(PerSocket(1, 2, 2), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes[0].gpus, (std::vector<uint32_t>{4, 5, 6, 7}));
  Busy(n, {6});  // socket 2 has one left: sockets 1 and 0
  p = Place(PerSocket(1, 2, 2), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes[0].gpus, (std::vector<uint32_t>{0, 1, 4, 5}));
}

// Inside a socket the GPUs come as PickGpus takes them: one link group when one holds them.
TEST(GpusPerSocketTest, InsideASocketOneLinkGroup) {
  ClusterView v = Cluster(1);
  v.nodes[0].gpu_link_group = {0, 0, 1, 1, 2, 2, 3, 3};
  Busy(v.nodes[0], {0, 5});  // groups 0 and 2 have one free each
  auto p = Place(PerSocket(1, 2, 2), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes[0].gpus, (std::vector<uint32_t>{2, 3, 6, 7}));
}

TEST(GpusPerSocketTest, GpusOfAnUnknownSocketNeverCount) {
  ClusterView v = Cluster(2);
  v.nodes[0].gpu_socket = {0, 0, kU, kU, 1, 1, kU, kU};
  v.nodes[1].gpu_socket.clear();  // its agent reported no socket for any GPU
  auto p = Place(PerSocket(1, 2, 2), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes[0].node, 0u);
  EXPECT_EQ(p->nodes[0].gpus, (std::vector<uint32_t>{0, 1, 4, 5}));
  // Three on each of two sockets: no node will ever have them.
  p = Place(PerSocket(1, 3, 2), v, PlaceMode::kEver);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(p.status().message(),
            "asks for nodes with at least 2 sockets, 3 GPUs on each of 2 sockets; 0 of 2 nodes "
            "in partition gpu have that");
  auto out = ExplainPlacement(PerSocket(1, 3, 2), v, 0);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].groups.size(), 1u);
  EXPECT_EQ(out[0].groups[0].verdict, NodeVerdict::kTooSmall);
  EXPECT_EQ(out[0].groups[0].cause, "has fewer than 2 sockets with 3 GPUs each");
  // A node that has not reported its topology yet may: the job is not refused for it.
  v.nodes[1].sockets = v.nodes[1].cores_per_socket = v.nodes[1].threads_per_core = 0;
  EXPECT_TRUE(Place(PerSocket(1, 3, 2), v, PlaceMode::kEver).ok());
}

// A gang: every node must have the GPUs on its sockets; a node whose free GPUs are all on one
// socket is passed over.
TEST(GpusPerSocketTest, GangPassesOverNodesWithTheGpusOnOneSocket) {
  ClusterView v = Cluster(3);
  Busy(v.nodes[1], {4, 5, 6, 7});
  auto p = Place(PerSocket(2, 1, 2), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::set<NodeIndex> nodes;
  for (const NodePlacement& np : p->nodes) {
    nodes.insert(np.node);
    EXPECT_EQ(np.gpus, (std::vector<uint32_t>{0, 4}));
  }
  EXPECT_EQ(nodes, (std::set<NodeIndex>{0, 2}));
  // The scheduling pass: the first job starts, the second waits for the sockets to free up.
  v = Cluster(1);
  Busy(v.nodes[0], {0, 1, 2});
  SchedulePass pass = Schedule(v, {testing::Job(1, 0, 0, PerSocket(1, 2, 2))}, 0, {});
  EXPECT_TRUE(pass.starts.empty());
  ASSERT_EQ(pass.pending.size(), 1u);
  EXPECT_EQ(pass.pending[0].reason, JobReason::kResources);
  EXPECT_NE(pass.pending[0].detail.find("2 GPUs on each of 2 sockets"), std::string::npos)
      << pass.pending[0].detail;
}

TEST(GpusPerSocketTest, RequestsThatDifferOnlyInIt) {
  JobRequest plain = testing::Gang(1, 4);
  plain.min_sockets = 2;
  JobRequest per = PerSocket(1, 2, 2);
  EXPECT_NE(ShapeKey(plain), ShapeKey(per)) << "answers cached per shape tell them apart";
  EXPECT_TRUE(per.AsksForCpuShape());
}

// Preemption frees what the slot needs on the sockets, not just a count of GPUs.
TEST(GpusPerSocketTest, PreemptionFreesGpusOnTheSockets) {
  ClusterView v = Cluster(1);
  // Job 10 holds GPUs 0-2 (socket 0), job 11 GPUs 4-5 (socket 1): three are free, one of them
  // on socket 0. Ending job 11, the cheaper, would leave five free but still one on socket 0:
  // job 10 is the one to end.
  NodePlacement a{0, {0}, 0, {0, 1, 2}, 1, {}};
  NodePlacement b{0, {1}, 0, {4, 5}, 1, {}};
  Allocate(Placement{"gpu", 0, {a}}, v);
  Allocate(Placement{"gpu", 0, {b}}, v);
  PreemptCandidate cheap{11, Placement{"gpu", 0, {b}}, 0, 0};
  PreemptCandidate dear{10, Placement{"gpu", 0, {a}}, 1, 0};
  auto plan = PlanPreemption(PerSocket(1, 2, 2), v, {cheap, dear});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->victims, (std::vector<JobId>{10}));
}

}  // namespace
}  // namespace muster::core
