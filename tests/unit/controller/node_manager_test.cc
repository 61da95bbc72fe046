// The node manager through the engine: drains, liveness, hardware reconciliation, GPU health and
// the admin's health check.
#include "node_manager.h"

#include "engine_context.h"
#include "engine_fixture.h"

namespace muster::controller {
namespace {

TEST_F(EngineTest, DrainBlocksPlacementAndNeedsAnAdminAndAReason) {
  AllUp();
  v1::UpdateNodeRequest drain;
  drain.set_nodes("node[1-3]");
  drain.set_action(v1::UpdateNodeRequest::DRAIN);
  EXPECT_EQ(engine_->UpdateNode(Alice(), drain, now_).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(engine_->UpdateNode(Root(), drain, now_).status().code(), StatusCode::kInvalidArgument);
  drain.set_reason("maintenance");
  ASSERT_TRUE(engine_->UpdateNode(Root(), drain, now_).ok());
  EXPECT_TRUE(Node("node2").drain());
  EXPECT_EQ(Node("node2").reason(), "maintenance");
  auto id = *Submit(Gang(2, 1));
  Pass();
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_EQ(Job(id).reason(), "ReqNodeNotAvail");
  auto one = *Submit(Gang(1, 1));
  Pass();
  EXPECT_EQ(Job(one).nodes(0), "node4");

  v1::UpdateNodeRequest resume;
  resume.set_nodes("node4");
  resume.set_action(v1::UpdateNodeRequest::RESUME);
  EXPECT_EQ(engine_->UpdateNode(Root(), resume, now_).status().code(),
            StatusCode::kInvalidArgument);
  resume.set_nodes("node9");
  EXPECT_EQ(engine_->UpdateNode(Root(), resume, now_).status().code(), StatusCode::kNotFound);
  resume.set_nodes("node1");
  ASSERT_TRUE(engine_->UpdateNode({7, 7, "ops", true}, resume, now_).ok());
  Pass();
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  // The drain survives a restart.
  Restart();
  AllUp();
  EXPECT_TRUE(Node("node2").drain());
  EXPECT_FALSE(Node("node1").drain());
}

TEST_F(EngineTest, SilentNodeGoesNotRespondingThenDownAndItsGangIsRequeued) {
  AllUp();
  auto id = *Submit(Gang(2, 8));
  Pass();
  Started(id, "node1");
  Started(id, "node2");
  Sent("node1");
  Sent("node2");
  // node1, node3 and node4 keep talking; node2 goes silent.
  auto beat = [&](TimeMs dt) {
    now_ += dt;
    v1::AgentMessage hb;
    hb.mutable_heartbeat()->set_seq(1);
    for (const char* n : {"node1", "node3", "node4"}) engine_->OnAgentMessage(n, hb, now_);
    engine_->Tick(now_);
  };
  beat(2000);
  EXPECT_EQ(Node("node2").state(), v1::NODE_MIXED);
  beat(2000);
  EXPECT_EQ(Node("node2").state(), v1::NODE_NOT_RESPONDING);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  for (int i = 0; i < 4; ++i) beat(2000);
  EXPECT_EQ(Node("node2").state(), v1::NODE_DOWN);
  v1::JobInfo j = Job(id);
  EXPECT_EQ(j.state(), v1::PENDING);
  EXPECT_EQ(j.reason(), "NodeFail");
  EXPECT_EQ(j.requeue_count(), 1u);
  // Killed on its surviving node; the gang waits until that node is clean.
  auto t = Sent("node1");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].terminate_job().run(), 0u);
  Pass();
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  Cleaned(id, "node1", 0);
  // node1, node3 and node4 are free, but node2 is cut off, not known to be off: it may still run
  // the old run, so the gang does not start anywhere (no job on two sets of nodes at once).
  for (int i = 0; i < 3; ++i) beat(1000);
  Pass();
  j = Job(id);
  EXPECT_EQ(j.state(), v1::PENDING);
  ASSERT_EQ(j.unconfirmed_nodes_size(), 1);
  EXPECT_EQ(j.unconfirmed_nodes(0), "node2");
  EXPECT_NE(j.reason_detail().find("muster node confirm-down node2"), std::string::npos)
      << j.reason_detail();
  // node2 comes back still running the old run: it is terminated there before node2 takes work,
  // and the gang waits for it to be gone.
  Up("node2", {id}, "node2-new");
  auto stale = Sent("node2");
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_TRUE(stale[0].has_terminate_job());
  Pass();
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  Cleaned(id, "node2", 0);
  Pass();
  j = Job(id);
  EXPECT_EQ(j.state(), v1::RUNNING);
  EXPECT_EQ(j.unconfirmed_nodes_size(), 0);
  auto l = Sent(j.nodes(0));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].launch_job().requeue_count(), 1u);
}

// The gang of the test above, requeued from node2, which went silent while it ran there.
class LostNodeTest : public EngineTest {
 protected:
  uint64_t RequeueFromSilentNode2() {
    AllUp();
    const uint64_t id = *Submit(Gang(2, 8));
    Pass();
    Run(id);
    OnlyOthersTalkFor(12);
    EXPECT_EQ(Node("node2").state(), v1::NODE_DOWN);
    Cleaned(id, "node1", 0);
    Pass();
    EXPECT_EQ(Job(id).state(), v1::PENDING);
    return id;
  }
  // node1, node3 and node4 heartbeat every second for `seconds`; node2 is silent.
  void OnlyOthersTalkFor(int seconds) {
    for (int i = 0; i < seconds; ++i) {
      now_ += 1000;
      v1::AgentMessage hb;
      hb.mutable_heartbeat();
      for (const char* n : {"node1", "node3", "node4"}) engine_->OnAgentMessage(n, hb, now_);
      engine_->Tick(now_);
    }
  }
  // Every node but `silent` heartbeats every second for `seconds`.
  void SilentFor(const std::string& silent, int seconds) {
    for (int i = 0; i < seconds; ++i) {
      now_ += 1000;
      v1::AgentMessage hb;
      hb.mutable_heartbeat();
      for (const char* n : {"node1", "node2", "node3", "node4"}) {
        if (n != silent) engine_->OnAgentMessage(n, hb, now_);
      }
      engine_->Tick(now_);
    }
  }
  Result<v1::UpdateNodeResponse> ConfirmDown(const std::string& nodes, Caller who = Root()) {
    v1::UpdateNodeRequest req;
    req.set_nodes(nodes);
    req.set_action(v1::UpdateNodeRequest::CONFIRM_DOWN);
    return engine_->UpdateNode(who, req, now_);
  }
};

TEST_F(LostNodeTest, NoRequeueJobEndsNodeFail) {
  AllUp();
  v1::JobSpec s = Gang(2, 8);
  s.set_no_requeue(true);
  auto id = *Submit(s);
  Pass();
  OnlyOthersTalkFor(12);
  EXPECT_EQ(Job(id).state(), v1::NODE_FAIL);
  EXPECT_EQ(Job(id).unconfirmed_nodes_size(), 0) << "nothing will run it again: nothing waits";
  ASSERT_TRUE(engine_->CheckInvariantsForTest().ok());
}

TEST_F(LostNodeTest, NoKillJobGoesOnWithoutTheLostNodeAndItsShareIsFreed) {
  AllUp();
  v1::JobSpec s = Gang(3, 8);
  s.set_no_kill(true);
  const uint64_t id = *Submit(s);
  Pass();
  Run(id);
  const v1::JobInfo before = Job(id);
  ASSERT_EQ(before.nodes_size(), 3);
  const std::string lost = before.nodes(1);  // not the batch script's node
  SilentFor(lost, 12);
  EXPECT_EQ(Node(lost).state(), v1::NODE_DOWN);
  v1::JobInfo j = Job(id);
  EXPECT_EQ(j.state(), v1::RUNNING) << j.reason_detail();
  EXPECT_EQ(j.requeue_count(), 0u);
  ASSERT_EQ(j.nodes_size(), 2);
  EXPECT_EQ(j.nodes(0), before.nodes(0));
  EXPECT_EQ(j.nodes(1), before.nodes(2));
  for (const auto& n : j.nodes()) {
    for (const auto& msg : Sent(n)) EXPECT_FALSE(msg.has_terminate_job()) << "ended on " << n;
  }
  ASSERT_TRUE(engine_->CheckInvariantsForTest().ok());
  // Recorded: after a restart it still runs on the two nodes it has left.
  Restart();
  for (const auto& n : j.nodes()) Up(n, {id});
  for (const char* n : {"node1", "node2", "node3", "node4"}) {
    if (n != lost && n != j.nodes(0) && n != j.nodes(1)) Up(n);
  }
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_EQ(Job(id).nodes_size(), 2);
  // The lost node comes back still running its part: that is stale there and terminated.
  Up(lost, {id}, lost + "-new");
  int terminated = 0;
  for (const auto& msg : Sent(lost)) terminated += msg.has_terminate_job();
  EXPECT_EQ(terminated, 1);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  // What it still says of that run changes nothing: it is no longer the job's node.
  v1::AgentMessage failed;
  failed.mutable_job_launch_failed()->set_job_id(id);
  failed.mutable_job_launch_failed()->set_message("late");
  engine_->OnAgentMessage(lost, failed, now_);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  ASSERT_TRUE(engine_->CheckInvariantsForTest().ok());
}

TEST_F(LostNodeTest, NoKillDoesNotOutliveTheBatchHostOrTheLastNode) {
  AllUp();
  v1::JobSpec s = Gang(2, 8);
  s.set_no_kill(true);
  s.set_no_requeue(true);
  const uint64_t id = *Submit(s);
  Pass();
  Run(id);
  const std::string batch_host = Job(id).nodes(0);
  SilentFor(batch_host, 12);
  EXPECT_EQ(Job(id).state(), v1::NODE_FAIL) << "its batch script is gone with " << batch_host;

  v1::JobSpec one = Gang(1, 8);
  one.set_no_kill(true);
  one.set_no_requeue(true);
  const uint64_t single = *Submit(one);
  Pass();
  Run(single);
  SilentFor(Job(single).nodes(0), 12);
  EXPECT_EQ(Job(single).state(), v1::NODE_FAIL) << "no node left to go on with";
}

TEST_F(LostNodeTest, ANodeBackWithoutTheOldRunLetsTheRequeuedJobStart) {
  const uint64_t id = RequeueFromSilentNode2();
  Up("node2", {}, "node2-rebooted");  // it rebooted: nothing of the old run is left
  Pass();
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_EQ(Job(id).unconfirmed_nodes_size(), 0);
}

TEST_F(LostNodeTest, TheWaitSurvivesARestartAndEndsWhenAnAdminConfirmsTheNodeDown) {
  const uint64_t id = RequeueFromSilentNode2();
  Restart();
  for (const char* n : {"node1", "node3", "node4"}) Up(n);
  Pass();
  EXPECT_EQ(Job(id).state(), v1::PENDING) << "the restart forgot that node2 may still run it";

  auto refused = ConfirmDown("node2", Alice());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  auto connected = ConfirmDown("node1");
  EXPECT_EQ(connected.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(connected.status().message().find("node1 is connected"), std::string::npos);
  EXPECT_EQ(ConfirmDown("node9").status().code(), StatusCode::kNotFound);
  Pass();
  EXPECT_EQ(Job(id).state(), v1::PENDING);

  auto ok = ConfirmDown("node2");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->updated_size(), 1);
  Pass();
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  // Recorded: a restart does not bring the wait back.
  Restart();
  EXPECT_EQ(Job(id).unconfirmed_nodes_size(), 0);
}

TEST_F(EngineTest, NodeWithLessHardwareThanConfiguredIsDrainedWithWhatIsMissing) {
  AllUp();
  Up("node1", {}, "node1-short", [](v1::NodeInventory* inv) {
    inv->set_cpus(12);
    inv->mutable_gpus()->RemoveLast();
    inv->mutable_gpus(2)->set_type("a100");
  });
  v1::NodeInfo n = Node("node1");
  EXPECT_TRUE(n.drain());
  EXPECT_EQ(n.drained_by(), "hardware");
  EXPECT_EQ(n.reason(),
            "Low CPUs: 12 of 16 configured; GPUs: 6 h100 of 8 configured (found 1 a100)");
  // Nothing new lands there.
  v1::JobSpec one = Gang(1, 8);
  one.add_required_nodes("node1");
  auto id = Submit(one);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::PENDING);
  // Memory too, and more than configured is fine (the configured amount is scheduled).
  Up("node2", {}, "node2-mem", [](v1::NodeInventory* inv) {
    inv->set_memory_mb(32000);
    inv->set_cpus(64);
  });
  EXPECT_EQ(Node("node2").reason(), "Low memory: 32000 of 64000 MB configured");
  Up("node3", {}, "node3-big", [](v1::NodeInventory* inv) { inv->set_cpus(128); });
  EXPECT_FALSE(Node("node3").drain());
  // Fixed hardware lifts the drain by itself; the job runs.
  Up("node1", {}, "node1-fixed");
  EXPECT_FALSE(Node("node1").drain());
  EXPECT_EQ(Node("node1").drained_by(), "");
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::RUNNING);
  // An admin's drain is never replaced or lifted by the check.
  v1::UpdateNodeRequest drain;
  drain.set_nodes("node4");
  drain.set_action(v1::UpdateNodeRequest::DRAIN);
  drain.set_reason("bios update");
  ASSERT_TRUE(engine_->UpdateNode(Root(), drain, now_).ok());
  Up("node4", {}, "node4-short", [](v1::NodeInventory* inv) { inv->set_cpus(2); });
  EXPECT_EQ(Node("node4").reason(), "bios update");
  Up("node4", {}, "node4-fixed");
  EXPECT_TRUE(Node("node4").drain());
  EXPECT_EQ(Node("node4").reason(), "bios update");
}

TEST_F(EngineTest, MigSlicesAreReconciledWhenTheAgentReportsMig) {
  config_.nodes[0].gres = {{"gpu", "1g.10gb", 7}};
  config_.nodes[0].gpus = 7;
  Restart();
  Up("node1", {}, "", [](v1::NodeInventory* inv) {
    inv->add_gpus()->set_mig_enabled(true);  // the 8th GPU, split
    for (uint32_t i = 0; i < 6; ++i)
      inv->mutable_gpus(7)->add_mig_devices()->set_profile("1g.10gb");
  });
  EXPECT_EQ(Node("node1").reason(), "Low MIG 1g.10gb: 6 of 7 configured");
}

TEST_F(EngineTest, UnhealthyGpuDrainsTheNodeAndRequeuesTheJobUsingIt) {
  AllUp();
  auto a = Submit(Gang(1, 4));
  v1::JobSpec other = Gang(1, 4);
  other.set_no_requeue(true);
  auto b = Submit(other);
  ASSERT_TRUE(a.ok() && b.ok());
  Pass();
  ASSERT_EQ(Job(*a).state(), v1::RUNNING);
  ASSERT_EQ(Job(*b).nodes(0), Job(*a).nodes(0)) << "best fit packs both on one node";
  const std::string node = Job(*a).nodes(0);
  Started(*a, node);
  Started(*b, node);
  Flush();
  uint32_t bad = Job(*a).allocation().nodes(0).gpu_indices(1);
  v1::AgentMessage m;
  m.mutable_gpu_health()->set_index(bad);
  m.mutable_gpu_health()->set_health("XID 79 (fallen off the bus)");
  Agent(node, m);
  v1::NodeInfo n = Node(node);
  EXPECT_TRUE(n.drain());
  EXPECT_EQ(n.drained_by(), "gpu_health");
  EXPECT_EQ(n.reason(), "gpu" + std::to_string(bad) + ": XID 79 (fallen off the bus)");
  EXPECT_EQ(n.gpu_devices(static_cast<int>(bad)).health(), "XID 79 (fallen off the bus)");
  v1::JobInfo ja = Job(*a);
  EXPECT_EQ(ja.state(), v1::PENDING);
  EXPECT_EQ(ja.reason(), "GpuFail");
  EXPECT_EQ(ja.requeue_count(), 1u);
  EXPECT_NE(ja.reason_detail().find("XID 79"), std::string::npos) << ja.reason_detail();
  EXPECT_EQ(Job(*b).state(), v1::RUNNING) << "the other job's GPUs are fine";
  auto sent = Sent(node);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].terminate_job().job_id(), *a);
  // A GPU of the --no-requeue job fails too: that one ends as NODE_FAIL.
  m.mutable_gpu_health()->set_index(Job(*b).allocation().nodes(0).gpu_indices(0));
  m.mutable_gpu_health()->set_health("2 uncorrectable ECC error(s)");
  Agent(node, m);
  EXPECT_EQ(Job(*b).state(), v1::NODE_FAIL);
  // The requeued job runs elsewhere, never on the drained node.
  Cleaned(*a, node, 0);
  Pass();
  ASSERT_EQ(Job(*a).state(), v1::RUNNING);
  EXPECT_NE(Job(*a).nodes(0), node);
  // Resume is refused while a GPU is still reported bad; healthy again lifts the drain.
  v1::UpdateNodeRequest resume;
  resume.set_nodes(node);
  resume.set_action(v1::UpdateNodeRequest::RESUME);
  EXPECT_EQ(engine_->UpdateNode(Root(), resume, now_).status().code(),
            StatusCode::kFailedPrecondition);
  for (uint32_t g : {bad, Job(*b).allocation().nodes(0).gpu_indices(0)}) {
    m.mutable_gpu_health()->set_index(g);
    m.mutable_gpu_health()->set_health("");
    Agent(node, m);
  }
  EXPECT_FALSE(Node(node).drain());
  // A GPU reported bad at registration drains the node too.
  Up("node4", {}, "node4-sick", [](v1::NodeInventory* inv) {
    inv->mutable_gpus(5)->set_health("row remapping pending (the GPU needs a reset)");
  });
  EXPECT_EQ(Node("node4").reason(), "gpu5: row remapping pending (the GPU needs a reset)");
}

TEST_F(EngineTest, HealthCheckProgramDrainsAndResumesOnlyItsOwnDrain) {
  AllUp();
  v1::AgentMessage m;
  m.mutable_node_health()->set_ok(false);
  m.mutable_node_health()->set_reason("ib0 down");
  Agent("node2", m);
  EXPECT_TRUE(Node("node2").drain());
  EXPECT_EQ(Node("node2").reason(), "ib0 down");
  EXPECT_EQ(Node("node2").drained_by(), "health_check");
  m.mutable_node_health()->set_ok(true);
  Agent("node2", m);
  EXPECT_FALSE(Node("node2").drain());
  // An admin drain stays when the check passes.
  v1::UpdateNodeRequest drain;
  drain.set_nodes("node2");
  drain.set_action(v1::UpdateNodeRequest::DRAIN);
  drain.set_reason("maintenance");
  ASSERT_TRUE(engine_->UpdateNode(Root(), drain, now_).ok());
  Agent("node2", m);
  EXPECT_TRUE(Node("node2").drain());
  EXPECT_EQ(Node("node2").reason(), "maintenance");
  // The drain survives a controller restart.
  m.mutable_node_health()->set_ok(false);
  Agent("node3", m);
  Restart();
  EXPECT_EQ(Node("node3").drained_by(), "health_check");
  EXPECT_EQ(Node("node3").reason(), "ib0 down");
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

// Liveness on its own: the sweep is pure logic over the times it is given.
TEST(NodeLivenessTest, SilenceMakesANodeNotRespondingThenLost) {
  auto c = ParseConfig(kConfig, "test.toml");  // not responding after 3 s, down after 10 s
  ASSERT_TRUE(c.ok());
  store::InMemoryStateStore store;
  EngineOptions o;
  o.config = *c;
  EngineContext ctx(o, &store);
  NodeManager nodes(ctx);
  nodes.StartLiveness(0);
  v1::RegisterRequest r;
  r.set_instance_id("i1");
  r.mutable_inventory()->set_name("node1");
  store::Mutation m;
  bool restarted = false;
  ASSERT_TRUE(nodes.Register(r, 0, m, &restarted).ok());
  v1::Hello h;
  h.set_node("node1");
  h.set_instance_id("i1");
  ASSERT_TRUE(nodes.AttachSession(h, 0).ok());

  EXPECT_TRUE(nodes.Sweep(3000).empty());
  EXPECT_FALSE(nodes.Find("node1")->not_responding);
  EXPECT_TRUE(nodes.Sweep(3001).empty());
  EXPECT_TRUE(nodes.Find("node1")->not_responding);
  EXPECT_FALSE(nodes.Schedulable(*nodes.Find("node1")));
  ASSERT_NE(nodes.Heard("node1", 5000), nullptr);
  EXPECT_FALSE(nodes.Find("node1")->not_responding) << "a message brings it back";

  // node2-4 never registered: lost once node_down_ms has passed since the start.
  auto lost = nodes.Sweep(10'001);
  ASSERT_EQ(lost.size(), 3u);
  EXPECT_EQ(lost[0].first->name(), "node2");
  EXPECT_NE(lost[0].second.find("did not register"), std::string::npos);
  lost = nodes.Sweep(15'001);
  ASSERT_EQ(lost.size(), 4u);
  EXPECT_EQ(lost[0].first->name(), "node1");
  EXPECT_EQ(lost[0].second, "not responding for 10.0s");
  nodes.MarkDown(*lost[0].first);
  EXPECT_EQ(nodes.Heard("node1", 16'000), nullptr) << "a lost node must register again";
  EXPECT_EQ(nodes.WhyUnschedulable(*nodes.Find("node1")), "down");
}

}  // namespace
}  // namespace muster::controller
