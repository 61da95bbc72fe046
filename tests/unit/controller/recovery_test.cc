// Restarts and reconnects: ids and epochs, what recovery keeps, what agents report when they come
// back.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

TEST_F(EngineTest, JobIdsAreNeverReusedAndEpochGrowsAcrossRestarts) {
  uint64_t epoch = engine_->epoch();
  ASSERT_EQ(*Submit(Gang(1, 1)), 1u);
  ASSERT_EQ(*Submit(Gang(1, 1)), 2u);
  Restart();
  EXPECT_EQ(engine_->epoch(), epoch + 1);
  EXPECT_EQ(Job(1).state(), v1::PENDING);
  EXPECT_EQ(Job(2).state(), v1::PENDING);
  EXPECT_EQ(*Submit(Gang(1, 1)), 3u);
}

TEST_F(EngineTest, NodeStepKeysSurviveRestarts) {
  Up("node1");
  const std::string key = registered_["node1"].step_key();
  EXPECT_EQ(key.size(), 32u);
  Restart();
  Up("node1");
  EXPECT_EQ(registered_["node1"].step_key(), key)
      << "credentials made before a restart still open on the node afterwards";
}

TEST_F(EngineTest, RecoveryKeepsRunningJobsAndReconcilesWhatAgentsReport) {
  AllUp();
  auto kept = *Submit(Gang(2, 8));
  auto lost = *Submit(Gang(2, 8));
  auto queued = *Submit(Gang(1, 1));
  Pass();
  for (const char* n : {"node1", "node2"}) Started(kept, n);
  for (const char* n : {"node3", "node4"}) Started(lost, n);
  Restart();  // the controller dies and comes back with the same store
  // Resources of running jobs are held from the start: nothing else lands there.
  EXPECT_EQ(Job(kept).state(), v1::RUNNING);
  EXPECT_EQ(Node("node1").gpus_allocated(), 8u);
  EXPECT_EQ(Job(queued).state(), v1::PENDING);
  // node1 and node2 still run `kept`; node3's agent restarted and lost `lost`.
  Up("node1", {kept});
  Up("node2", {kept});
  Up("node3", {});
  Up("node4", {lost});
  EXPECT_EQ(Job(kept).state(), v1::RUNNING);
  // How `lost` ended is unknowable: it fails, saying why, and its other node is told to stop.
  EXPECT_EQ(Job(lost).state(), v1::FAILED);
  EXPECT_EQ(Job(lost).requeue_count(), 0u);
  EXPECT_NE(Job(lost).reason_detail().find("node3 restarted and no longer runs it"),
            std::string::npos)
      << Job(lost).reason_detail();
  auto sent = Sent("node4");
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent.back().terminate_job().job_id(), lost);
  Pass();
  ASSERT_TRUE(engine_->CheckInvariantsForTest().ok());
}

// Found by the crash harness: a gang's node reported clean, a new job started on it, and the
// controller died before the gang's other node was clean. Recovery must not give the gang the
// node back (the new job runs there): the partial clean is recorded before the node is reused.
TEST_F(EngineTest, ANodeAGangLeftIsNotHeldForItAgainAfterACrash) {
  AllUp();
  auto gang = *Submit(Gang(2, 8));
  Pass();
  Run(gang);
  ASSERT_EQ(Job(gang).nodes(0), "node1");
  Exited(gang, "node1", 0);
  Cleaned(gang, "node1");  // node2 is still cleaning up
  ASSERT_TRUE(Job(gang).completing());
  ASSERT_EQ(Job(gang).completing_nodes_size(), 1);
  EXPECT_EQ(Job(gang).completing_nodes(0), "node2");
  v1::JobSpec on_node1 = Gang(1, 8);
  on_node1.add_required_nodes("node1");
  auto next = *Submit(on_node1);
  Pass();
  ASSERT_EQ(Job(next).state(), v1::RUNNING);
  ASSERT_EQ(Job(next).nodes(0), "node1");
  Run(next);
  Restart();
  // node1's GPUs are the new job's alone; the gang still waits for node2 only.
  EXPECT_EQ(Node("node1").gpus_allocated(), 8u);
  EXPECT_EQ(Job(gang).state(), v1::COMPLETED);
  Up("node1", {next});
  Up("node2", {gang});
  Up("node3");
  Up("node4");
  auto third = *Submit(on_node1);
  Pass();
  EXPECT_EQ(Job(third).state(), v1::PENDING) << "node1's GPUs handed out twice";
  EXPECT_EQ(Node("node1").gpus_allocated(), 8u);
  ASSERT_TRUE(engine_->CheckInvariantsForTest().ok())
      << engine_->CheckInvariantsForTest().ToString();
}

TEST_F(EngineTest, RunningJobOnANodeRemovedFromTheConfigIsRequeuedAtRecovery) {
  AllUp();
  auto id = *Submit(Gang(2, 8));
  Pass();
  ASSERT_EQ(Job(id).nodes(0), "node1");
  // node2 disappears from the configuration while the job runs; the controller restarts.
  std::string text = kConfig;
  text.replace(text.find("names = \"node[1-2]\""), 19, "names = \"node1\"");
  text.replace(text.find("nodes = \"node[1-4]\""), 19, "nodes = \"node1,node[3-4]\"");
  auto c = ParseConfig(text, "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  config_ = *c;
  Restart();
  v1::JobInfo j = Job(id);
  EXPECT_EQ(j.state(), v1::PENDING);
  EXPECT_EQ(j.requeue_count(), 1u);
  EXPECT_NE(j.reason_detail().find("node2 is no longer in the configuration"), std::string::npos);
  // It still waits for node1 to clean up its old run, then runs on the nodes that remain.
  Up("node1", {id});
  Up("node3");
  Up("node4");
  Cleaned(id, "node1", 0);
  Pass();
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(EngineTest, LaunchNeverAcknowledgedIsSentAgainOnReconnect) {
  AllUp();
  auto id = *Submit(Gang(1, 1));
  Pass();
  std::string node = Job(id).nodes(0);
  Sent(node);  // pretend it was lost on the wire
  engine_->DetachSession(node, node + "-i" + std::to_string(engine_->epoch()));
  Up(node, {}, node + "-again");
  auto again = Sent(node);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].has_launch_job());
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(EngineTest, CorruptRecordIsReportedAndTheRestRecovers) {
  ASSERT_TRUE(Submit(Gang(1, 1)).ok());
  ASSERT_TRUE(Submit(Gang(1, 1)).ok());
  store_.CorruptForTest(store::Family::kJobs, store::Mutation::JobKey(1));
  Restart();
  ASSERT_EQ(engine_->recovery_problems().size(), 1u);
  v1::DiagnosticsResponse diag;
  engine_->FillDiagnostics(Root(), &diag);
  EXPECT_EQ(diag.records_quarantined(), 1u) << "sdiag counts what recovery set aside";
  EXPECT_EQ(Job(2).state(), v1::PENDING);
  EXPECT_EQ(*Submit(Gang(1, 1)), 3u);
}

// An agent restarts before its JobStarted reached the controller. Without state for the job, the
// launch is sent again (it may never have arrived); when the agent says the job had started and
// its state is lost, the job fails instead of running its script a second time.
TEST_F(EngineTest, AJobWhoseStartWasNotHeardIsLaunchedAgainUnlessTheAgentLostIt) {
  AllUp();
  auto resent = *Submit(Gang(1, 8));
  auto lost = *Submit(Gang(1, 8));
  Pass();
  const std::string n1 = Job(resent).nodes(0), n2 = Job(lost).nodes(0);
  ASSERT_NE(n1, n2);
  Sent(n1);
  Sent(n2);
  Up(n1, {}, n1 + "-again");
  bool launched = false;
  for (const auto& m : Sent(n1))
    launched |= m.has_launch_job() && m.launch_job().job_id() == resent;
  EXPECT_TRUE(launched) << "the launch may have been lost: sent again";
  EXPECT_EQ(Job(resent).state(), v1::RUNNING);
  // The same, with the agent reporting the job among those whose state it lost.
  v1::RegisterRequest r;
  r.mutable_inventory()->set_name(n2);
  r.mutable_inventory()->set_step_address("127.0.0.1:1");
  const NodeConfig* c = config_.FindNode(n2);
  r.mutable_inventory()->set_cpus(c->cpus);
  r.mutable_inventory()->set_memory_mb(c->memory_mb);
  for (uint32_t i = 0; i < c->gpus; ++i) r.mutable_inventory()->add_gpus()->set_type(c->gpu_type);
  r.set_instance_id(n2 + "-again");
  r.add_lost_job_ids(lost);
  ASSERT_TRUE(engine_->RegisterNode(r, now_).ok());
  v1::Hello h;
  h.set_node(n2);
  h.set_instance_id(r.instance_id());
  Sent(n2);
  ASSERT_TRUE(engine_->AttachSession(h, now_).ok());
  for (const auto& m : Sent(n2)) EXPECT_FALSE(m.has_launch_job()) << "never a second run";
  EXPECT_EQ(Job(lost).state(), v1::FAILED);
  EXPECT_NE(Job(lost).reason_detail().find("no longer runs it"), std::string::npos);
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok());
}

// A restarted agent vouches for the jobs it re-adopted with what its spool says about them. A
// spool state that does not match the controller's record (another user, another credential,
// another run) is never trusted: the job is ended there and fails, and it is not launched again.
TEST_F(EngineTest, AReadoptedJobRunsOnlyIfItsSpoolStateMatchesTheControllersRecord) {
  AllUp();
  auto honest = *Submit(Gang(1, 8), Alice());
  auto forged_uid = *Submit(Gang(1, 8), Alice());
  auto forged_cred = *Submit(Gang(1, 8), Alice());
  Pass();
  std::map<uint64_t, std::string> node_of, credential_of;
  for (uint64_t id : {honest, forged_uid, forged_cred}) {
    ASSERT_EQ(Job(id).state(), v1::RUNNING);
    node_of[id] = Job(id).nodes(0);
    for (const auto& m : Sent(node_of[id])) {
      if (m.has_launch_job()) credential_of[m.launch_job().job_id()] = m.launch_job().credential();
    }
  }
  auto readopt = [&](uint64_t id, uint32_t uid, const std::string& credential) {
    Up(node_of[id], {id}, node_of[id] + "-restarted", nullptr, [&](v1::RegisterRequest* r) {
      v1::AdoptedJob* a = r->add_adopted_jobs();
      a->set_job_id(id);
      a->set_run(0);
      a->set_uid(uid);
      a->set_credential(credential);
    });
  };
  ASSERT_FALSE(credential_of[honest].empty());
  readopt(honest, 1000, credential_of[honest]);
  for (const auto& m : Sent(node_of[honest])) {
    EXPECT_FALSE(m.has_terminate_job()) << "what the controller launched keeps running";
  }
  EXPECT_EQ(Job(honest).state(), v1::RUNNING);

  readopt(forged_uid, 0, credential_of[forged_uid]);  // "root's job"
  bool ended = false;
  for (const auto& m : Sent(node_of[forged_uid])) {
    ended |= m.has_terminate_job() && m.terminate_job().job_id() == forged_uid;
    EXPECT_FALSE(m.has_launch_job()) << "never a second run";
  }
  EXPECT_TRUE(ended);
  EXPECT_EQ(Job(forged_uid).state(), v1::FAILED);
  EXPECT_NE(Job(forged_uid).reason_detail().find("does not match"), std::string::npos)
      << Job(forged_uid).reason_detail();

  readopt(forged_cred, 1000, "a credential the job chose itself");
  ended = false;
  for (const auto& m : Sent(node_of[forged_cred])) {
    ended |= m.has_terminate_job() && m.terminate_job().job_id() == forged_cred;
  }
  EXPECT_TRUE(ended);
  EXPECT_EQ(Job(forged_cred).state(), v1::FAILED);
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok());
}

}  // namespace
}  // namespace muster::controller
