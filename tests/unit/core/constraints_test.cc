// Node constraints and topology limits: --constraint, --nodelist, --exclude, --switches,
// --topology.
#include <gtest/gtest.h>

#include <set>

#include "cluster_builder.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

// 8 nodes: node0-3 under s1/leafA, node4-7 under s1/leafB; node0 and node4 have 4 GPUs busy.
// Nodes 0-1 and 4-5 form NVLink domain nvlA, the others have none.
ClusterView Cluster() {
  ClusterView v =
      testing::ClusterBuilder()
          .Nodes(8, {}, "node", 0, [](uint32_t k) { return k < 4 ? "s1/leafA" : "s1/leafB"; })
          .Partition("gpu")
          .Build();
  for (uint32_t i = 0; i < 8; ++i) {
    v.nodes[i].features = {i % 2 ? "ib" : "eth", i < 4 ? "a" : "b"};
    if (i == 0 || i == 1 || i == 4 || i == 5) v.nodes[i].nvlink_domain = "nvlA";
  }
  for (uint32_t g = 0; g < 4; ++g) v.nodes[0].gpu_free[g] = v.nodes[4].gpu_free[g] = false;
  return v;
}

JobRequest Gang(uint32_t nodes, uint32_t gpus) { return testing::Gang(nodes, gpus); }

std::set<NodeIndex> Nodes(const Placement& p) {
  std::set<NodeIndex> s;
  for (const auto& np : p.nodes) s.insert(np.node);
  return s;
}

TEST(ConstraintsTest, FeaturesAndOfOr) {
  ClusterView v = Cluster();
  JobRequest r = Gang(2, 8);
  r.features = {{"ib", "b"}};
  auto p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{5, 7}));
  r.features = {{"ib", "a"}, {"eth", "b"}};  // node1, node3 | node6 (node4 is half busy)
  r.nodes = 3;
  r.tasks_per_node = {1, 1, 1};
  p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{1, 3, 6}));
  r.features = {{"nosuch"}};
  EXPECT_FALSE(Place(r, v, PlaceMode::kNow).ok());
  // Submission's "can it ever run" applies the same constraints.
  auto ever = Place(r, v, PlaceMode::kEver);
  ASSERT_FALSE(ever.ok());
  EXPECT_EQ(ever.status().code(), StatusCode::kFailedPrecondition);
  r.features = {{"ib"}};
  EXPECT_TRUE(Place(r, v, PlaceMode::kEver).ok());
}

TEST(ConstraintsTest, ExcludedNodesAreNeverUsed) {
  ClusterView v = Cluster();
  // Six nodes have 8 GPUs free (node0 and node4 are half busy); without node2, five.
  JobRequest r = Gang(5, 8);
  r.excluded_nodes = {"node2"};
  auto p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{1, 3, 5, 6, 7}));
  r.nodes = 6;
  r.tasks_per_node.assign(6, 1);
  EXPECT_FALSE(Place(r, v, PlaceMode::kNow).ok());
}

TEST(ConstraintsTest, SwitchesAndTopologyScopeLimitTheGang) {
  ClusterView v = Cluster();
  JobRequest r = Gang(4, 8);  // 3 whole free nodes per leaf: needs 2 leaves
  auto any = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(any.ok());
  r.max_leaves = 1;
  auto one = Place(r, v, PlaceMode::kNow);
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().code(), StatusCode::kUnavailable);
  r.max_leaves = 0;
  r.scope = JobRequest::Scope::kLeaf;
  EXPECT_FALSE(Place(r, v, PlaceMode::kNow).ok());
  r = Gang(3, 8);
  r.scope = JobRequest::Scope::kLeaf;
  auto leaf = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(leaf.ok());
  std::set<std::string> leaves;
  for (const auto& np : leaf->nodes) leaves.insert(v.nodes[np.node].topology);
  EXPECT_EQ(leaves.size(), 1u);
  // NVLink domain nvlA holds nodes 0, 1, 4, 5; only 1 and 5 have 8 GPUs free.
  r = Gang(2, 8);
  r.scope = JobRequest::Scope::kNvlink;
  auto nvl = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(nvl.ok());
  EXPECT_EQ(Nodes(*nvl), (std::set<NodeIndex>{1, 5}));
  r.nodes = 3;
  r.tasks_per_node.assign(3, 1);
  EXPECT_FALSE(Place(r, v, PlaceMode::kNow).ok());
}

TEST(ConstraintsTest, SwitchesWaitRelaxesTheLimit) {
  ClusterView v = Cluster();
  PendingJob j;
  j.id = 1;
  j.submit_time_ms = 0;
  j.request = Gang(4, 8);
  j.request.max_leaves = 1;
  j.max_leaves_wait_ms = 60'000;
  SchedulePass waiting = Schedule(v, {j}, 30'000, {});
  EXPECT_TRUE(waiting.starts.empty()) << "still waiting for one leaf";
  ASSERT_EQ(waiting.pending.size(), 1u);
  EXPECT_EQ(waiting.pending[0].reason, JobReason::kResources)
      << "nothing is reserved for another job";
  EXPECT_NE(waiting.pending[0].detail.find("on at most 1 leaf switch"), std::string::npos)
      << waiting.pending[0].detail;
  // No single leaf can ever hold it, so the plan is for when the limit drops.
  EXPECT_EQ(waiting.pending[0].expected_start_ms, 60'000);
  ASSERT_EQ(waiting.reservations.size(), 1u);
  EXPECT_EQ(waiting.reservations[0].start_ms, 60'000);
  EXPECT_EQ(Schedule(v, {j}, 60'000, {}).starts.size(), 1u) << "the wait is over";
}

TEST(ConstraintsTest, NodeRangeTakesWhatIsFreeAndReservesTheMinimum) {
  ClusterView v = Cluster();
  JobRequest r = Gang(8, 8);  // -N 2-8: six nodes have 8 GPUs free
  r.min_nodes = 2;
  auto p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes.size(), 6u);
  r.max_leaves = 1;  // three whole nodes per leaf
  p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes.size(), 3u);
  r.max_leaves = 0;
  r.min_nodes = 7;
  EXPECT_FALSE(Place(r, v, PlaceMode::kNow).ok()) << "fewer free than the minimum";
  EXPECT_TRUE(Place(r, v, PlaceMode::kEver).ok());
  // Blocked: the reservation holds the minimum, from when enough nodes free up.
  v.running.push_back({99, 0, 5'000, 0, 4, 0});
  v.running.push_back({98, 4, 7'000, 0, 4, 0});
  r.time_limit_ms = 1'000;
  PendingJob j{1, 0, r, -1, {}, false};
  SchedulePass pass = Schedule(v, {j}, 0, {});
  ASSERT_EQ(pass.reservations.size(), 1u);
  EXPECT_EQ(pass.reservations[0].start_ms, 5'000);
  EXPECT_EQ(pass.reservations[0].nodes.size(), 7u);
  EXPECT_NE(pass.pending[0].detail.find("7-8 nodes"), std::string::npos) << pass.pending[0].detail;
}

TEST(ConstraintsTest, ScopeNoDomainCanEverHoldIsRefused) {
  ClusterView v = Cluster();
  JobRequest r = Gang(5, 1);  // 4 nodes per leaf, 4 in the NVLink domain
  r.scope = JobRequest::Scope::kLeaf;
  auto leaf = Place(r, v, PlaceMode::kEver);
  ASSERT_FALSE(leaf.ok());
  EXPECT_EQ(leaf.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(leaf.status().message().find("under one leaf switch"), std::string::npos)
      << leaf.status().message();
  r.scope = JobRequest::Scope::kNvlink;
  EXPECT_FALSE(Place(r, v, PlaceMode::kEver).ok());
  r.scope = JobRequest::Scope::kBlock;  // both leaves are under s1
  EXPECT_TRUE(Place(r, v, PlaceMode::kEver).ok());
  // Busy nodes do not matter for "ever": 4 x 8 GPUs fit one leaf when it is empty.
  r = Gang(4, 8);
  r.scope = JobRequest::Scope::kLeaf;
  EXPECT_TRUE(Place(r, v, PlaceMode::kEver).ok());
  r.max_leaves = 1;
  r.scope = JobRequest::Scope::kAny;
  r.nodes = 5;
  r.tasks_per_node.assign(5, 1);
  EXPECT_TRUE(Place(r, v, PlaceMode::kEver).ok()) << "--switches relaxes with time";
}

TEST(ConstraintsTest, RequiredNodesAreInTheGangWithTheirLeafFirst) {
  ClusterView v = Cluster();
  JobRequest r = Gang(3, 8);
  r.required_nodes = {"node7"};
  auto p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{5, 6, 7})) << "the rest from node7's own leaf";
  // node0 has 4 GPUs free: a 4-GPU pair through it stays on leafA.
  r = Gang(2, 4);
  r.required_nodes = {"node0"};
  p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(Nodes(*p).count(0));
  EXPECT_EQ(v.nodes[*Nodes(*p).rbegin()].topology, "s1/leafA");
  // Two required nodes on different leaves: the gang spans both even with one more node.
  r = Gang(3, 8);
  r.required_nodes = {"node1", "node7"};
  p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(Nodes(*p).count(1) && Nodes(*p).count(7));
  r.max_leaves = 1;
  EXPECT_FALSE(Place(r, v, PlaceMode::kNow).ok()) << "two required leaves, at most one allowed";
}

TEST(ConstraintsTest, RequiredNodeBusyWaitsForItsRelease) {
  ClusterView v = Cluster();
  v.running.push_back({99, 0, 5'000, 0, 4, 0});  // node0's 4 busy GPUs free at t=5000
  JobRequest r = Gang(2, 8);
  r.time_limit_ms = 1'000;
  r.required_nodes = {"node0"};
  auto now = Place(r, v, PlaceMode::kNow, 0);
  ASSERT_FALSE(now.ok());
  EXPECT_EQ(now.status().code(), StatusCode::kUnavailable);
  auto when = Place(r, v, PlaceMode::kWhen, 0);
  ASSERT_TRUE(when.ok()) << when.status().ToString();
  EXPECT_EQ(when->start_ms, 5'000);
  EXPECT_TRUE(Nodes(*when).count(0));

  // In a pass: the job requiring node0 reserves it; a long job may not take node0's GPUs.
  PendingJob first{1, 0, r, -1, {}, false};
  first.priority.fixed = 100;
  PendingJob second{2, 0, Gang(1, 4), -1, {}, false};
  second.priority.fixed = 1;
  second.request.time_limit_ms = 10'000;
  second.request.required_nodes = {"node0"};
  SchedulePass pass = Schedule(v, {first, second}, 0, {});
  EXPECT_TRUE(pass.starts.empty()) << "node0's free GPUs are reserved from t=5000";
  ASSERT_EQ(pass.reservations.size(), 2u);
  EXPECT_EQ(pass.reservations[0].job, 1u);
  EXPECT_EQ(pass.reservations[0].start_ms, 5'000);
  EXPECT_EQ(pass.reservations[1].job, 2u);
  EXPECT_EQ(pass.reservations[1].start_ms, 6'000) << "after the first job's limit on node0";
}

TEST(ConstraintsTest, RequiredNodesRefusedOrWaitingWithReasons) {
  ClusterView v = Cluster();
  JobRequest r = Gang(2, 8);
  r.required_nodes = {"node9"};
  auto p = Place(r, v, PlaceMode::kEver);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("node9"), std::string::npos);
  r.required_nodes = {};
  r.excluded_nodes = {"nodeX"};
  EXPECT_EQ(Place(r, v, PlaceMode::kEver).status().code(), StatusCode::kNotFound);
  r.excluded_nodes = {"node3"};
  r.required_nodes = {"node3"};
  EXPECT_EQ(Place(r, v, PlaceMode::kEver).status().code(), StatusCode::kInvalidArgument);
  r.excluded_nodes = {};
  r.required_nodes = {"node1", "node2", "node3"};
  EXPECT_EQ(Place(r, v, PlaceMode::kEver).status().code(), StatusCode::kInvalidArgument)
      << "three required nodes for a gang of two";
  // A required node without the feature can never run.
  r.required_nodes = {"node1"};
  r.features = {{"eth"}};
  auto never = Place(r, v, PlaceMode::kEver);
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(never.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(never.status().message().find("node1"), std::string::npos);
  // A drained required node: the job pends with Slurm's reason and the node named.
  r.features = {};
  v.nodes[1].schedulable = false;
  EXPECT_TRUE(Place(r, v, PlaceMode::kEver).ok());
  PendingJob j{1, 0, r, -1, {}, false};
  SchedulePass pass = Schedule(v, {j}, 0, {});
  ASSERT_EQ(pass.pending.size(), 1u);
  EXPECT_EQ(pass.pending[0].reason, JobReason::kReqNodeNotAvail);
  EXPECT_NE(pass.pending[0].detail.find("UnavailableNodes:node1"), std::string::npos)
      << pass.pending[0].detail;
}

// CPU shape: node0-1 have 2 sockets x 8 cores x 2 threads, node2-3 1 socket x 16 cores x 1
// thread, node4-7 have not reported a topology. 64 CPUs each, no GPUs.
ClusterView ShapeCluster() {
  ClusterView v =
      testing::ClusterBuilder().Nodes(8, {64, 64000, 0, ""}, "node", 0).Partition("gpu").Build();
  for (uint32_t i = 0; i < 4; ++i) {
    v.nodes[i].sockets = i < 2 ? 2 : 1;
    v.nodes[i].cores_per_socket = i < 2 ? 8 : 16;
    v.nodes[i].threads_per_core = i < 2 ? 2 : 1;
  }
  return v;
}

JobRequest Tasks(uint32_t nodes, uint32_t tasks_per_node) {
  return testing::Gang(nodes, 0, tasks_per_node);
}

TEST(ConstraintsTest, CpuShapeMinimumsChooseNodes) {
  ClusterView v = ShapeCluster();
  JobRequest r = Tasks(2, 1);
  r.min_sockets = 2;  // -B 2
  auto p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{0, 1}));
  r.min_sockets = 0;
  r.min_cores_per_socket = 12;  // --cores-per-socket=12: the one-socket nodes
  p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{2, 3}));
  r.min_cores_per_socket = 0;
  r.min_threads_per_core = 2;  // --threads-per-core=2
  p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{0, 1}));
  // -B 2:12: no node has both; the nodes without a topology are never taken now.
  r.min_threads_per_core = 0;
  r.min_sockets = 2;
  r.min_cores_per_socket = 12;
  p = Place(r, v, PlaceMode::kNow);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("at least 2 sockets, at least 12 cores per socket"),
            std::string::npos)
      << p.status().message();
  // Without a shape, any two nodes will do.
  EXPECT_TRUE(Place(Tasks(8, 1), v, PlaceMode::kNow).ok());
  JobRequest all = Tasks(8, 1);
  all.min_threads_per_core = 1;
  EXPECT_FALSE(Place(all, v, PlaceMode::kNow).ok()) << "four nodes have no known topology";
}

// --tmp: only nodes whose configured temporary disk (tmp_disk_mb) is at least the job's; a job
// no node could ever hold is told the most any node offers.
TEST(ConstraintsTest, TemporaryDiskChoosesNodes) {
  ClusterView v =
      testing::ClusterBuilder().Nodes(4, {64, 64000, 0, ""}, "node", 0).Partition("gpu").Build();
  v.nodes[1].tmp_disk_mb = 100'000;
  v.nodes[3].tmp_disk_mb = 500'000;
  JobRequest r = Tasks(2, 1);
  r.min_tmp_disk_mb = 100'000;
  auto p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{1, 3}));
  r.min_tmp_disk_mb = 200'000;
  EXPECT_FALSE(Place(r, v, PlaceMode::kNow).ok()) << "one node offers that, the job needs two";
  r.nodes = 1;
  r.tasks_per_node = {1};
  p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{3}));
  r.min_tmp_disk_mb = 600'000;
  p = Place(r, v, PlaceMode::kEver);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("asks for 600000 MB of temporary disk per node (--tmp); "
                                      "the most a node in partition gpu offers is 500000 MB"),
            std::string::npos)
      << p.status().message();
  EXPECT_NE(ShapeKey(r), ShapeKey(Tasks(1, 1))) << "answers cached per shape tell them apart";
}

TEST(ConstraintsTest, TasksPerCoreAndPerSocketBoundTheSlot) {
  ClusterView v = ShapeCluster();
  JobRequest r = Tasks(1, 16);
  r.ntasks_per_core = 1;  // 16 tasks need 16 cores: every node with a topology has them
  EXPECT_TRUE(Place(r, v, PlaceMode::kNow).ok());
  r.tasks_per_node = {17};  // 17 cores: none
  auto p = Place(r, v, PlaceMode::kNow);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("at most 1 task per core"), std::string::npos)
      << p.status().message();
  r.ntasks_per_core = 2;  // 17 tasks on 16 cores, 2 per core
  EXPECT_TRUE(Place(r, v, PlaceMode::kNow).ok());
  r.ntasks_per_core = 0;
  r.ntasks_per_socket = 4;  // 5 tasks: two sockets
  r.tasks_per_node = {5};
  p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->nodes.size(), 1u);
  EXPECT_LT(p->nodes[0].node, 2u) << "only the two-socket nodes hold 4 tasks per socket x 2";
  // The fullest node decides: 9 tasks on the first node of two, 8 on the other.
  r.tasks_per_node = {9, 8};
  r.nodes = 2;
  EXPECT_FALSE(Place(r, v, PlaceMode::kNow).ok());
  r.tasks_per_node = {8, 8};
  p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Nodes(*p), (std::set<NodeIndex>{0, 1}));
}

TEST(ConstraintsTest, CpuShapeEverAndPendingReasons) {
  ClusterView v = ShapeCluster();
  for (auto& n : v.nodes) n.schedulable = true;
  for (uint32_t i = 4; i < 8; ++i) v.nodes[i].schedulable = false;  // not registered yet
  // Four sockets: no node with a topology has them, but the four without may yet report them.
  JobRequest r = Tasks(2, 1);
  r.min_sockets = 4;
  EXPECT_TRUE(Place(r, v, PlaceMode::kEver).ok());
  PendingJob j{1, 0, r, -1, {}, false};
  SchedulePass pass = Schedule(v, {j}, 0, {});
  ASSERT_EQ(pass.pending.size(), 1u);
  EXPECT_EQ(pass.pending[0].reason, JobReason::kReqNodeNotAvail);
  EXPECT_NE(pass.pending[0].detail.find("4 more have not reported their CPU topology"),
            std::string::npos)
      << pass.pending[0].detail;
  // Up without a topology (an agent without hwloc), they never will: not waited for.
  for (uint32_t i = 4; i < 8; ++i) v.nodes[i].schedulable = true;
  pass = Schedule(v, {j}, 0, {});
  ASSERT_EQ(pass.pending.size(), 1u);
  EXPECT_NE(pass.pending[0].reason, JobReason::kReqNodeNotAvail) << pass.pending[0].detail;
  // Once every node has reported a topology, it can never run, and says why.
  for (uint32_t i = 4; i < 8; ++i) {
    v.nodes[i].sockets = 2;
    v.nodes[i].cores_per_socket = 4;
    v.nodes[i].threads_per_core = 1;
  }
  auto never = Place(r, v, PlaceMode::kEver);
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(never.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(never.status().message(),
            "asks for nodes with at least 4 sockets; 0 of 8 nodes in partition gpu have that");
  j.request = r;
  pass = Schedule(v, {j}, 0, {});
  ASSERT_EQ(pass.pending.size(), 1u);
  EXPECT_EQ(pass.pending[0].reason, JobReason::kBadConstraints);
  // Requests that differ only in their shape are not one class.
  JobRequest two = r;
  two.min_sockets = 2;
  EXPECT_NE(ShapeKey(r), ShapeKey(two));
  EXPECT_TRUE(Place(two, v, PlaceMode::kNow).ok());
  // Nor do requests of the same CPUs whose tasks per node differ, when tasks per core bound them:
  // 4 tasks of 8 CPUs fit a 16-core node at one task per core, 32 tasks of one CPU do not.
  JobRequest wide = Tasks(1, 4), narrow = Tasks(1, 32);
  wide.cpus_per_task = 8;
  wide.ntasks_per_core = narrow.ntasks_per_core = 1;
  EXPECT_NE(ShapeKey(wide), ShapeKey(narrow));
  EXPECT_TRUE(Place(wide, v, PlaceMode::kNow).ok());
  EXPECT_FALSE(Place(narrow, v, PlaceMode::kNow).ok());
}

}  // namespace
}  // namespace muster::core
