// The scheduling loop through the engine: gangs, request shapes, constraints, stale snapshots,
// backfill, the pass cadence.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

TEST_F(EngineTest, GangStartsWholeWithGpusByIndexAndLaunchesEveryNode) {
  AllUp();
  auto id = Submit(Gang(2, 8));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(Job(*id).state(), v1::PENDING);
  Pass();
  v1::JobInfo j = Job(*id);
  ASSERT_EQ(j.state(), v1::RUNNING);
  ASSERT_EQ(j.nodes_size(), 2);
  EXPECT_EQ(j.nodes(0), "node1");
  EXPECT_EQ(j.nodes(1), "node2");  // same leaf
  for (const auto& na : j.allocation().nodes()) {
    EXPECT_EQ(na.gpu_indices_size(), 8);
    EXPECT_EQ(na.gpu_indices(7), 7u);
  }
  auto l1 = Sent("node1");
  auto l2 = Sent("node2");
  ASSERT_EQ(l1.size(), 1u);
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_TRUE(l1[0].launch_job().batch_node());
  EXPECT_FALSE(l2[0].launch_job().batch_node());
  EXPECT_EQ(l2[0].launch_job().node_id(), 1u);
  EXPECT_TRUE(l2[0].launch_job().spec().script().empty()) << "only the first node gets the script";
  EXPECT_EQ(l1[0].epoch(), engine_->epoch());
  EXPECT_EQ(Node("node1").gpus_allocated(), 8u);
  EXPECT_EQ(Node("node1").state(), v1::NODE_MIXED);
  EXPECT_EQ(Node("node3").state(), v1::NODE_IDLE);
}

// --mem-per-cpu: memory per node is the per-CPU figure times the CPUs of the node's slot;
// --mincpus makes the slot at least that big (16-CPU nodes here).
TEST_F(EngineTest, MemPerCpuAndMinCpusSizeEachNodesSlot) {
  AllUp();
  v1::JobSpec s;
  s.set_nodes(2);
  s.set_ntasks(3);  // 2 + 1 tasks: every node gets the fullest node's slot
  s.set_cpus_per_task(2);
  s.set_mem_per_cpu_mb(500);
  auto id = Submit(s);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(Job(*id).mem_per_node_mb(), 2000u);  // 2 tasks x 2 CPUs x 500 MB
  s.set_min_cpus_per_node(10);
  auto big = Submit(s);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(Job(*big).mem_per_node_mb(), 5000u);  // 10 CPUs x 500 MB
  Pass();
  const v1::JobInfo j = Job(*big);
  ASSERT_EQ(j.state(), v1::RUNNING);
  for (const auto& na : j.allocation().nodes()) {
    EXPECT_EQ(na.cpu_ids_size(), 10) << na.node() << ": --mincpus holds 10 CPUs, not 4";
  }
  v1::JobSpec too_many;
  too_many.set_min_cpus_per_node(17);
  EXPECT_FALSE(Submit(too_many).ok()) << "no node has 17 CPUs";
  v1::JobSpec both;
  both.set_mem_per_cpu_mb(100);
  both.set_mem_per_node_mb(100);
  EXPECT_EQ(Submit(both).status().code(), StatusCode::kInvalidArgument);
}

// sbatch --priority: an administrator's fixed priority from the start; nobody else's.
TEST_F(EngineTest, APriorityAtSubmissionIsForAdministrators) {
  AllUp();
  v1::SubmitJobRequest req;
  req.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
  req.mutable_spec()->set_work_dir("/tmp");
  req.mutable_spec()->set_hold(true);
  req.set_priority(123456);
  auto refused = engine_->SubmitJob(Alice(), req, now_);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  auto ok = engine_->SubmitJob(Root(), req, now_);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(Job(ok->job_id()).priority(), 123456);
  req.set_priority(int64_t{1} << 33);
  EXPECT_EQ(engine_->SubmitJob(Root(), req, now_).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, NothingStartsOnNodesThatNeverRegistered) {
  Up("node1");
  auto id = Submit(Gang(2, 8));
  ASSERT_TRUE(id.ok());
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::PENDING);
  EXPECT_EQ(Job(*id).reason(), "ReqNodeNotAvail");
  Up("node2");
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::RUNNING);
}

TEST_F(EngineTest, NormalisesTasksAndGpus) {
  AllUp();
  v1::JobSpec s;
  s.set_nodes(2);
  s.set_ntasks(3);
  s.set_gpus_total(16);
  auto id = Submit(s);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  v1::JobInfo j = Job(*id);
  EXPECT_EQ(j.num_tasks(), 3u);
  EXPECT_EQ(j.gpus_per_node(), 8u);
  Pass();
  j = Job(*id);
  EXPECT_EQ(j.allocation().nodes(0).ntasks(), 2u);
  EXPECT_EQ(j.allocation().nodes(1).ntasks(), 1u);
  v1::JobSpec uneven;
  uneven.set_nodes(2);
  uneven.set_gpus_total(3);
  EXPECT_EQ(Submit(uneven).status().code(), StatusCode::kUnimplemented);
  v1::JobSpec big;
  big.set_gpus_total(16);  // no -N: spread over the fewest nodes
  auto b = Submit(big);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Job(*b).num_nodes(), 2u);
}

TEST_F(EngineTest, ABatchScriptIsReadByItsOwnerAndAdminsOnly) {
  v1::JobSpec s = Gang(1, 0);
  s.set_script("#!/bin/sh\necho secret-step\n");
  s.add_environment("TOKEN=hunter2");
  auto id = Submit(s, Alice());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  v1::GetJobRequest req;
  req.set_job_id(*id);
  req.set_with_script(true);
  req.set_with_environment(true);
  auto mine = engine_->GetJob(Alice(), req);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(mine->script(), "#!/bin/sh\necho secret-step\n");
  ASSERT_EQ(mine->environment_size(), 1);
  EXPECT_EQ(mine->environment(0), "TOKEN=hunter2");
  EXPECT_EQ(engine_->GetJob(Bob(), req).status().code(), StatusCode::kPermissionDenied)
      << "another user sees the job, never its script or environment";
  EXPECT_TRUE(engine_->GetJob(Root(), req).ok());
  v1::GetJobRequest plain;
  plain.set_job_id(*id);
  auto row = engine_->GetJob(Bob(), plain);
  ASSERT_TRUE(row.ok()) << "the job itself stays public here";
  EXPECT_TRUE(row->script().empty());
}

TEST_F(EngineTest, SpreadJobPutsItsTasksOnAsManyNodesAsThePartitionHas) {
  AllUp();
  v1::JobSpec s;
  s.set_ntasks(6);  // 6 CPUs fit one 16-CPU node...
  auto packed = Submit(s);
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(Job(*packed).num_nodes(), 1u);
  s.set_spread_job(true);  // ...spread, one per node as far as the 4 nodes go
  auto spread = Submit(s);
  ASSERT_TRUE(spread.ok()) << spread.status().ToString();
  EXPECT_EQ(Job(*spread).num_nodes(), 4u);
  s.set_ntasks(2);  // never more nodes than tasks
  EXPECT_EQ(Job(*Submit(s)).num_nodes(), 2u);
  s.set_ntasks(6);
  s.set_nodes(2);  // -N wins
  EXPECT_EQ(Job(*Submit(s)).num_nodes(), 2u);
  Pass();
  v1::JobInfo j = Job(*spread);
  ASSERT_EQ(j.state(), v1::RUNNING);
  uint32_t tasks = 0;
  for (const auto& na : j.allocation().nodes()) {
    EXPECT_GE(na.ntasks(), 1u);
    EXPECT_LE(na.ntasks(), 2u) << "evenly: 2, 2, 1, 1";
    tasks += na.ntasks();
  }
  EXPECT_EQ(tasks, 6u);
}

TEST_F(EngineTest, GpusPerTaskMemPerGpuAndNodelistShapeTheRequest) {
  AllUp();
  v1::JobSpec s;
  s.set_ntasks(6);
  s.set_gpus_per_task(2);  // 8 GPUs per node hold 4 tasks: 2 nodes x 3 tasks x 2 GPUs
  s.set_mem_per_gpu_mb(1000);
  auto id = Submit(s);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(Job(*id).num_nodes(), 2u);
  EXPECT_EQ(Job(*id).gpus_per_node(), 6u);
  EXPECT_EQ(Job(*id).mem_per_node_mb(), 6000u);
  s.set_ntasks(5);  // 3 + 2 tasks: different GPU counts per node
  EXPECT_EQ(Submit(s).status().code(), StatusCode::kUnimplemented);
  v1::JobSpec both;
  both.set_gpus_per_node(1);
  both.set_mem_per_node_mb(100);
  both.set_mem_per_gpu_mb(100);
  EXPECT_EQ(Submit(both).status().code(), StatusCode::kInvalidArgument);
  v1::JobSpec no_gpus;
  no_gpus.set_mem_per_gpu_mb(100);
  EXPECT_EQ(Submit(no_gpus).status().code(), StatusCode::kInvalidArgument);

  // Without -N the node count grows to hold every --nodelist node; with a smaller -N it is an
  // error, as is a node that does not exist.
  v1::JobSpec w;
  w.add_required_nodes("node1");
  w.add_required_nodes("node4");
  auto wid = Submit(w);
  ASSERT_TRUE(wid.ok()) << wid.status().ToString();
  EXPECT_EQ(Job(*wid).num_nodes(), 2u);
  EXPECT_EQ(Job(*wid).required_nodes(), "node[1,4]");
  w.set_nodes(1);
  EXPECT_EQ(Submit(w).status().code(), StatusCode::kInvalidArgument);
  v1::JobSpec ghost;
  ghost.add_required_nodes("node9");
  auto g = Submit(ghost);
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  EXPECT_NE(g.status().message().find("node9"), std::string::npos);
  v1::JobSpec clash;
  clash.add_required_nodes("node2");
  clash.add_excluded_nodes("node2");
  EXPECT_EQ(Submit(clash).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, ConstraintsExcludesAndTopologyDecideWhereAGangRuns) {
  AllUp();
  // Features: node3 and node4 have "ib".
  v1::JobSpec ib = Gang(2, 8);
  ib.set_constraint("ib&nvl");
  auto a = Submit(ib);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  v1::JobSpec nope = Gang(1, 1);
  nope.set_constraint("ib&fpga");
  auto n = Submit(nope);
  EXPECT_EQ(n.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(n.status().message().find("features ib&fpga"), std::string::npos)
      << n.status().message();
  nope.set_constraint("[ib|nvl]");
  EXPECT_EQ(Submit(nope).status().code(), StatusCode::kUnimplemented);
  nope.set_constraint("ib&&x");
  EXPECT_EQ(Submit(nope).status().code(), StatusCode::kInvalidArgument);
  v1::JobSpec topo = Gang(1, 1);
  topo.set_topology("rack");
  EXPECT_EQ(Submit(topo).status().code(), StatusCode::kInvalidArgument);
  // Excluding node1: a one-node job goes elsewhere.
  v1::JobSpec x = Gang(1, 8);
  x.add_excluded_nodes("node1");
  auto b = Submit(x);
  ASSERT_TRUE(b.ok());
  Pass();
  EXPECT_EQ(Job(*a).state(), v1::RUNNING);
  EXPECT_EQ(Job(*a).nodes(0), "node3");
  EXPECT_EQ(Job(*a).nodes(1), "node4");
  EXPECT_EQ(Job(*b).state(), v1::RUNNING);
  EXPECT_EQ(Job(*b).nodes(0), "node2");
  // node1 is left, and a job that excludes it waits with the constraint in its reason.
  auto c = Submit(x);
  ASSERT_TRUE(c.ok());
  Pass();
  EXPECT_EQ(Job(*c).state(), v1::PENDING);
  EXPECT_NE(Job(*c).reason_detail().find("excluding 1 node"), std::string::npos)
      << Job(*c).reason_detail();
}

TEST_F(EngineTest, CpuShapeChoosesNodesByTheTopologyTheirAgentsReported) {
  // node1-2: 2 sockets x 4 cores x 2 threads; node3: 1 socket x 8 cores x 1 thread; node4 has
  // not registered.
  auto layout = [](uint32_t packages, uint32_t cores, uint32_t threads) {
    return [=](v1::NodeInventory* inv) {
      inv->set_packages(packages);
      inv->set_cores(cores);
      inv->set_threads(threads);
    };
  };
  Up("node1", {}, "", layout(2, 8, 16));
  Up("node2", {}, "", layout(2, 8, 16));
  Up("node3", {}, "", layout(1, 8, 8));
  v1::JobSpec two = Gang(1, 0);
  two.mutable_cpu_shape()->set_sockets_per_node(2);  // -B 2
  two.mutable_cpu_shape()->set_threads_per_core(2);
  two.set_exclusive(true);
  auto a = Submit(two);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  v1::JobSpec one = Gang(1, 0);
  one.mutable_cpu_shape()->set_cores_per_socket(8);  // --cores-per-socket=8: node3 only
  auto b = Submit(one);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  // Four sockets: no registered node has them, but node4 may.
  v1::JobSpec four = Gang(1, 0);
  four.mutable_cpu_shape()->set_sockets_per_node(4);
  auto c = Submit(four);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Pass();
  EXPECT_EQ(Job(*a).state(), v1::RUNNING);
  EXPECT_EQ(Job(*a).nodes(0), "node1");
  EXPECT_EQ(Job(*b).state(), v1::RUNNING);
  EXPECT_EQ(Job(*b).nodes(0), "node3");
  EXPECT_EQ(Job(*c).state(), v1::PENDING);
  EXPECT_EQ(Job(*c).reason(), "ReqNodeNotAvail");
  EXPECT_NE(Job(*c).reason_detail().find("1 more have not reported their CPU topology"),
            std::string::npos)
      << Job(*c).reason_detail();
  // node4 reports two sockets: now no node ever will hold four, and a new submission says so.
  Up("node4", {}, "", layout(2, 8, 16));
  auto d = Submit(four);
  ASSERT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("at least 4 sockets; 0 of 4 nodes"), std::string::npos)
      << d.status().message();
  Pass();
  EXPECT_EQ(Job(*c).reason(), "BadConstraints") << Job(*c).reason_detail();

  // --hint=nomultithread: a task per core at most. 9 tasks on one node of 8 cores never fit;
  // with two per core (--ntasks-per-core=2) they do.
  v1::JobSpec hint = Gang(1, 0);
  hint.set_ntasks(9);
  hint.mutable_cpu_shape()->set_hint("nomultithread");
  auto e = Submit(hint);
  ASSERT_EQ(e.status().code(), StatusCode::kFailedPrecondition) << e.status().ToString();
  EXPECT_NE(e.status().message().find("at most 1 task per core"), std::string::npos)
      << e.status().message();
  hint.mutable_cpu_shape()->set_ntasks_per_core(2);
  EXPECT_EQ(Submit(hint).status().code(), StatusCode::kInvalidArgument)
      << "--hint and --ntasks-per-core exclude each other";
  hint.mutable_cpu_shape()->clear_hint();
  auto f = Submit(hint);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Pass();
  EXPECT_EQ(Job(*f).state(), v1::RUNNING) << Job(*f).reason_detail();
  hint.mutable_cpu_shape()->set_hint("hyperthreads");
  EXPECT_EQ(Submit(hint).status().code(), StatusCode::kInvalidArgument);
}

// --gpus-per-socket=2 --sockets-per-node=2 on nodes whose 8 GPUs are four on each socket (as
// their agents reported): two from each socket, and no start while one socket has fewer than two
// free, however many GPUs the node has free in all.
TEST_F(EngineTest, GpusPerSocketTakesThemFromEachSocket) {
  auto layout = [](v1::NodeInventory* inv) {
    inv->set_packages(2);
    inv->set_cores(16);
    inv->set_threads(16);
    for (auto& g : *inv->mutable_gpus()) g.set_socket(g.index() < 4 ? 0 : 1);
  };
  Up("node1", {}, "", layout);
  auto gpus_of = [&](uint64_t id) {
    const auto& ids = Job(id).allocation().nodes(0).gpu_indices();
    return std::vector<uint32_t>(ids.begin(), ids.end());
  };
  auto per_socket = [](uint32_t n, uint32_t sockets) {
    v1::JobSpec s = Gang(1, 0);
    s.set_gpus_per_socket(n);
    s.mutable_cpu_shape()->set_sockets_per_node(sockets);
    return s;
  };
  // Three GPUs of socket 0 taken: five are free, but only one of them on socket 0.
  auto three = Submit(Gang(1, 3));
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  Pass();
  Run(*three);
  ASSERT_EQ(gpus_of(*three), (std::vector<uint32_t>{0, 1, 2}));
  auto a = Submit(per_socket(2, 2));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(Job(*a).gpus_per_node(), 4u) << "2 on each of 2 sockets";
  Pass();
  EXPECT_EQ(Job(*a).state(), v1::PENDING);
  EXPECT_EQ(Job(*a).reason(), "Resources") << Job(*a).reason_detail();
  EXPECT_NE(Job(*a).reason_detail().find("2 GPUs on each of 2 sockets"), std::string::npos)
      << Job(*a).reason_detail();
  // Socket 0's GPUs come back: two from each socket.
  Exited(*three, "node1", 0);
  CleanUp(*three, 0);
  Pass();
  ASSERT_EQ(Job(*a).state(), v1::RUNNING) << Job(*a).reason_detail();
  EXPECT_EQ(gpus_of(*a), (std::vector<uint32_t>{0, 1, 4, 5}));
  auto b = Submit(per_socket(2, 2));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Pass();
  ASSERT_EQ(Job(*b).state(), v1::RUNNING) << Job(*b).reason_detail();
  EXPECT_EQ(gpus_of(*b), (std::vector<uint32_t>{2, 3, 6, 7}));

  // What Slurm refuses is refused: no --sockets-per-node; a --gpus-per-node or --gpus that says
  // otherwise; --gpus-per-task beside it.
  auto no_sockets = Submit(per_socket(2, 0));
  ASSERT_EQ(no_sockets.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_sockets.status().message().find("--gpus-per-socket=2 needs --sockets-per-node"),
            std::string::npos)
      << no_sockets.status().message();
  v1::JobSpec contradicts = per_socket(2, 2);
  contradicts.set_gpus_per_node(3);
  auto c = Submit(contradicts);
  ASSERT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "--gpus-per-node (--gres=gpu:N) of 3 contradicts --gpus-per-socket=2 on "
            "--sockets-per-node=2 (4 GPUs per node)");
  contradicts.set_gpus_per_node(4);
  EXPECT_TRUE(Submit(contradicts).ok()) << "the same count twice";
  v1::JobSpec total = per_socket(2, 2);
  total.set_nodes(0);
  total.set_gpus_total(6);
  auto six = Submit(total);
  ASSERT_EQ(six.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(six.status().message(),
            "--gpus=6 is not a multiple of the GPUs per node of --gpus-per-socket=2 on "
            "--sockets-per-node=2 (4 GPUs per node)");
  total.set_gpus_total(8);
  auto two_nodes = Submit(total);
  ASSERT_TRUE(two_nodes.ok()) << two_nodes.status().ToString();
  EXPECT_EQ(Job(*two_nodes).num_nodes(), 2u);
  EXPECT_EQ(Job(*two_nodes).gpus_per_node(), 4u);
  total.set_nodes(3);
  EXPECT_EQ(Submit(total).status().code(), StatusCode::kInvalidArgument) << "-N 3 holds 12";
  v1::JobSpec per_task = per_socket(1, 2);
  per_task.set_ntasks(2);
  per_task.set_gpus_per_task(1);
  EXPECT_EQ(Submit(per_task).status().code(), StatusCode::kInvalidArgument);
}

// Nodes whose GPUs are six on one socket and two on the other: three on each of two sockets is
// refused at submission once every node has reported; two on each come from the fuller socket
// and the two of the other.
TEST_F(EngineTest, GpusPerSocketNoNodeHoldsIsRefusedAtSubmission) {
  for (const char* n : {"node1", "node2", "node3", "node4"}) {
    Up(n, {}, "", [](v1::NodeInventory* inv) {
      inv->set_packages(2);
      inv->set_cores(16);
      inv->set_threads(16);
      for (auto& g : *inv->mutable_gpus()) g.set_socket(g.index() < 6 ? 0 : 1);
    });
  }
  v1::JobSpec spec = Gang(1, 0);
  spec.set_gpus_per_socket(3);
  spec.mutable_cpu_shape()->set_sockets_per_node(2);
  auto never = Submit(spec);
  ASSERT_EQ(never.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(never.status().message(),
            "job can never run: asks for nodes with at least 2 sockets, 3 GPUs on each of 2 "
            "sockets; 0 of 4 nodes in partition gpu have that");
  spec.set_gpus_per_socket(2);
  auto fits = Submit(spec);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  Pass();
  const v1::JobInfo job = Job(*fits);
  ASSERT_EQ(job.state(), v1::RUNNING) << job.reason_detail();
  const auto& gpus = job.allocation().nodes(0).gpu_indices();
  EXPECT_EQ(std::vector<uint32_t>(gpus.begin(), gpus.end()), (std::vector<uint32_t>{0, 1, 6, 7}));
}

// -S/--core-spec, --thread-spec: the job holds its nodes whole (charged for every CPU), and
// only nodes with room for its tasks besides the set-aside cores take it; one no node could
// ever hold is refused at submission.
TEST_F(EngineTest, CoreSpecHoldsWholeNodesWithRoomBesidesTheSetAsideCores) {
  // 2 sockets x 4 cores x 2 threads = 16 CPUs on every node.
  for (const char* n : {"node1", "node2", "node3", "node4"}) {
    Up(n, {}, "", [](v1::NodeInventory* inv) {
      inv->set_packages(2);
      inv->set_cores(8);
      inv->set_threads(16);
    });
  }
  v1::JobSpec spec = Gang(1, 0);
  spec.set_ntasks(2);
  spec.set_core_spec(1);
  auto a = Submit(spec);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Pass();
  const v1::JobInfo job = Job(*a);
  ASSERT_EQ(job.state(), v1::RUNNING) << job.reason_detail();
  EXPECT_EQ(job.cpus_total(), 16u) << "the whole node, charged";
  EXPECT_EQ(job.allocation().nodes(0).cpu_ids_size(), 16);
  EXPECT_EQ(Node(job.nodes(0)).cpus_allocated(), 16u);
  EXPECT_EQ(Node(job.nodes(0)).gpus_allocated(), 8u) << "nothing of it left to others";
  // A one-CPU job goes elsewhere: the node is the core-spec job's alone.
  auto small = Submit(Gang(1, 0));
  ASSERT_TRUE(small.ok());
  Pass();
  ASSERT_EQ(Job(*small).state(), v1::RUNNING);
  EXPECT_NE(Job(*small).nodes(0), job.nodes(0));

  // 15 tasks: 16 CPUs less a core's 2 threads leave 14, on every node: never.
  v1::JobSpec big = Gang(1, 0);
  big.set_ntasks(15);
  big.set_core_spec(1);
  auto never = Submit(big);
  ASSERT_EQ(never.status().code(), StatusCode::kFailedPrecondition) << never.status().ToString();
  EXPECT_NE(never.status().message().find(
                "15 CPUs besides the 1 core set aside (--core-spec=1); 0 of 4 nodes"),
            std::string::npos)
      << never.status().message();
  // One thread set aside leaves 15: it runs.
  big.set_core_spec(0);
  big.set_thread_spec(1);
  auto fits = Submit(big);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  Pass();
  EXPECT_EQ(Job(*fits).state(), v1::RUNNING) << Job(*fits).reason_detail();
  EXPECT_EQ(Job(*fits).cpus_total(), 16u);
  // Every core set aside leaves the job nothing; both counts at once are refused.
  v1::JobSpec all = Gang(1, 0);
  all.set_core_spec(8);
  auto none = Submit(all);
  ASSERT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("8 cores set aside (--core-spec=8)"), std::string::npos)
      << none.status().message();
  all.set_core_spec(1);
  all.set_thread_spec(1);
  auto both = Submit(all);
  ASSERT_EQ(both.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(both.status().message().find("--core-spec and --thread-spec cannot be used together"),
            std::string::npos);
}

// A node whose agent reported no CPU topology never takes a core-spec job: which cores to set
// aside is the machine's to say. One that reports it does.
TEST_F(EngineTest, CoreSpecRunsOnlyOnNodesThatReportedTheirTopology) {
  AllUp();  // no topology reported
  v1::JobSpec spec = Gang(1, 0);
  spec.set_core_spec(1);
  auto id = Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::PENDING);
  EXPECT_NE(Job(*id).reason_detail().find("1 CPUs besides the 1 core set aside (--core-spec=1)"),
            std::string::npos)
      << Job(*id).reason_detail();
  Up("node3", {}, "", [](v1::NodeInventory* inv) {
    inv->set_packages(1);
    inv->set_cores(16);
    inv->set_threads(16);
  });
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::RUNNING) << Job(*id).reason_detail();
  EXPECT_EQ(Job(*id).nodes(0), "node3");
}

TEST_F(EngineTest, SwitchesWaitThenRelaxAfterTheConfiguredCap) {
  AllUp();
  v1::JobSpec s = Gang(3, 8);  // two nodes per leaf: three need two leaves
  s.set_max_switches(1);
  s.set_switches_wait_ms(3'600'000);  // capped by max_switch_wait_ms (300 s by default)
  auto id = Submit(s);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::PENDING);
  EXPECT_NE(Job(*id).reason_detail().find("at most 1 leaf switch"), std::string::npos)
      << Job(*id).reason_detail();
  now_ += 299'000;
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::PENDING);
  now_ += 1'000;
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::RUNNING) << "the wait is over: any leaves";
  EXPECT_EQ(Job(*id).max_switches(), 1u);

  // --topology=nvlink has no time limit: only node3-4 share an NVLink domain, and the gang
  // above holds one of them.
  v1::JobSpec t = Gang(2, 0);
  t.set_exclusive(true);
  t.set_topology("nvlink");
  auto tid = Submit(t);
  ASSERT_TRUE(tid.ok());
  Pass();
  EXPECT_EQ(Job(*tid).state(), v1::PENDING);
  EXPECT_NE(Job(*tid).reason_detail().find("in one NVLink domain"), std::string::npos);
}

TEST_F(EngineTest, NodeRangeStartsWithWhatIsFree) {
  AllUp();
  auto busy = Submit(Gang(2, 8));
  ASSERT_TRUE(busy.ok());
  Pass();
  v1::JobSpec s = Gang(4, 8);
  s.set_min_nodes(1);
  s.set_ntasks_per_node(2);
  auto id = Submit(s);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(Job(*id).min_nodes(), 1u);
  EXPECT_EQ(Job(*id).num_nodes(), 4u);
  Pass();
  v1::JobInfo j = Job(*id);
  ASSERT_EQ(j.state(), v1::RUNNING);
  EXPECT_EQ(j.num_nodes(), 2u) << "two nodes were free";
  EXPECT_EQ(j.num_tasks(), 4u);
  EXPECT_EQ(j.min_nodes(), 0u);
  v1::JobSpec bad = Gang(4, 1);
  bad.set_min_nodes(2);
  bad.set_ntasks(5);
  EXPECT_EQ(Submit(bad).status().code(), StatusCode::kUnimplemented);
}

TEST_F(EngineTest, PassComputedOnAStaleSnapshotAppliesOnlyWhatStillFits) {
  AllUp();
  v1::JobSpec busy = Gang(2, 8);
  busy.set_time_limit_ms(3'600'000);
  ASSERT_TRUE(Submit(busy).ok());
  Pass();
  v1::JobSpec small = Gang(1, 8);
  small.set_time_limit_ms(600'000);
  auto a = *Submit(small);
  auto b = *Submit(small);
  auto c = *Submit(Gang(4, 8));  // blocked: gets a reason and a reservation; a and b backfill
  auto in = engine_->PreparePass(now_);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->queue.size(), 3u);
  core::SchedulePass pass = Engine::ComputePass(*in);
  ASSERT_EQ(pass.starts.size(), 2u);
  // While the pass computed: jobs a and c were cancelled and the node planned for b drained.
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(a);
  cancel.add_job_ids(c);
  ASSERT_TRUE(engine_->CancelJob(Root(), cancel, now_).ok());
  const std::string b_node = "node" + std::to_string(pass.starts[1].placement.nodes[0].node + 1);
  ASSERT_EQ(pass.starts[1].job, b);
  v1::UpdateNodeRequest drain;
  drain.set_nodes(b_node);
  drain.set_action(v1::UpdateNodeRequest::DRAIN);
  drain.set_reason("maintenance");
  ASSERT_TRUE(engine_->UpdateNode(Root(), drain, now_).ok());
  const std::string c_reason = Job(c).reason();
  engine_->ApplyPass(pass, now_);
  ASSERT_TRUE(engine_->CheckInvariantsForTest().ok());
  EXPECT_EQ(Job(a).state(), v1::CANCELLED);
  EXPECT_EQ(Job(b).state(), v1::PENDING) << "its node was drained after the snapshot";
  EXPECT_TRUE(engine_->schedule_requested()) << "a dropped start asks for another pass";
  EXPECT_EQ(Job(c).state(), v1::CANCELLED);
  EXPECT_EQ(Job(c).reason(), c_reason) << "no stale pending reason over the cancellation";
  EXPECT_EQ(Job(c).expected_start_ms(), 0);
  Pass();
  EXPECT_EQ(Job(b).state(), v1::RUNNING);
  EXPECT_NE(Job(b).nodes(0), b_node);
}

TEST_F(EngineTest, BackfillReservesForTheBlockedGangAndShowsExpectedStarts) {
  AllUp();
  constexpr TimeMs kHour = 3'600'000;
  v1::JobSpec running = Gang(3, 8);
  running.set_time_limit_ms(kHour);
  auto big = Submit(running);
  ASSERT_TRUE(big.ok());
  Pass();
  ASSERT_EQ(Job(*big).state(), v1::RUNNING);
  const v1::JobInfo started = Job(*big);
  for (const auto& n : started.nodes()) Started(*big, n);

  now_ += 1000;
  v1::JobSpec wide = Gang(4, 8);  // must wait for job `big`: reserved from its end
  wide.set_time_limit_ms(kHour);
  auto gang = Submit(wide);
  v1::JobSpec short_spec = Gang(1, 8);
  short_spec.set_time_limit_ms(kHour / 2);  // ends before the reservation: backfills
  v1::JobSpec long_spec = Gang(1, 8);
  long_spec.set_time_limit_ms(2 * kHour);  // would delay the reservation: waits
  auto long_job = Submit(long_spec);
  auto short_job = Submit(short_spec);
  ASSERT_TRUE(gang.ok() && short_job.ok() && long_job.ok());
  Pass();

  v1::JobInfo g = Job(*gang);
  EXPECT_EQ(g.state(), v1::PENDING);
  EXPECT_EQ(g.reason(), "Resources");
  const TimeMs big_end = Job(*big).start_time_ms() + kHour;
  EXPECT_EQ(g.expected_start_ms(), big_end);
  EXPECT_NE(g.reason_detail().find("reserved for this job"), std::string::npos)
      << g.reason_detail();
  EXPECT_GT(g.priority(), 0);
  EXPECT_GT(g.priority_factors().size(), 0.0);

  EXPECT_EQ(Job(*short_job).state(), v1::RUNNING) << Job(*short_job).reason_detail();
  v1::JobInfo l = Job(*long_job);
  EXPECT_EQ(l.state(), v1::PENDING);
  EXPECT_EQ(l.reason(), "Priority");
  EXPECT_GE(l.expected_start_ms(), big_end + kHour);

  // The reservation is carried into the next pass (the core test covers a higher-priority
  // arrival; here the engine must pass `had_reservation` on).
  v1::JobSpec urgent = Gang(4, 8);
  urgent.set_time_limit_ms(kHour);
  auto hot = Submit(urgent);
  ASSERT_TRUE(hot.ok());
  now_ += 1000;
  Pass();
  EXPECT_EQ(Job(*gang).expected_start_ms(), big_end);
  EXPECT_GE(Job(*hot).expected_start_ms(), big_end + kHour);
}

TEST_F(EngineTest, PendingWorkGetsAPassAtLeastEveryMaxInterval) {
  AllUp();
  auto id = Submit(Gang(8, 8));  // more nodes than the partition has: pends forever
  ASSERT_TRUE(id.ok());
  Pass();
  EXPECT_FALSE(engine_->schedule_requested());
  now_ += config_.scheduling.sched_max_interval_ms;
  engine_->Tick(now_);
  EXPECT_TRUE(engine_->schedule_requested());
}

}  // namespace
}  // namespace muster::controller
