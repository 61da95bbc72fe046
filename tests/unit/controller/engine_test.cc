#include "muster/controller/engine.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <functional>

#include "job_spec.h"

namespace muster::controller {
namespace {

constexpr const char* kConfig = R"(
cluster_name = "t"
admins = ["ops"]
[scheduling]
heartbeat_interval_ms = 1000
node_not_responding_ms = 3000
node_down_ms = 10000
kill_grace_ms = 100
finished_job_retention_ms = 60000
[[nodes]]
names = "node[1-2]"
cpus = 16
memory_mb = 64000
gpus = 8
gpu_type = "h100"
topology = "spine1/leaf1"
[[nodes]]
names = "node[3-4]"
cpus = 16
memory_mb = 64000
gpus = 8
gpu_type = "h100"
topology = "spine1/leaf2"
features = ["ib", "nvl"]
nvlink_domain = "rack2"
[[partition]]
name = "gpu"
nodes = "node[1-4]"
default = true
)";

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    auto c = ParseConfig(kConfig, "test.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    Restart();
  }

  void Restart() {
    engine_.reset();
    EngineOptions o;
    o.config = config_;
    o.make_credential = [this] { return "cred" + std::to_string(++creds_); };
    auto e = Engine::Create(o, &store_, now_);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
  }

  // Registers and attaches a node, optionally reporting jobs it holds.
  void Up(const std::string& node, std::vector<uint64_t> jobs = {}, std::string instance = "",
          const std::function<void(v1::NodeInventory*)>& tweak = nullptr) {
    v1::RegisterRequest r;
    r.mutable_inventory()->set_name(node);
    r.mutable_inventory()->set_step_address("127.0.0.1:1");
    // The hardware the config promises (less drains the node; see the reconciliation tests).
    if (const NodeConfig* c = config_.FindNode(node)) {
      r.mutable_inventory()->set_cpus(c->cpus);
      r.mutable_inventory()->set_memory_mb(c->memory_mb);
      for (uint32_t i = 0; i < c->gpus; ++i) {
        v1::GpuDevice* g = r.mutable_inventory()->add_gpus();
        g->set_index(i);
        g->set_type(c->gpu_type);
      }
    }
    if (tweak) tweak(r.mutable_inventory());
    if (instance.empty()) instance = node + "-i" + std::to_string(engine_->epoch());
    r.set_instance_id(instance);
    for (auto id : jobs) r.add_running_job_ids(id);
    ASSERT_TRUE(engine_->RegisterNode(r, now_).ok());
    v1::Hello h;
    h.set_node(node);
    h.set_instance_id(instance);
    ASSERT_TRUE(engine_->AttachSession(h, now_).ok());
  }

  void AllUp() {
    for (const char* n : {"node1", "node2", "node3", "node4"}) Up(n);
  }

  Result<uint64_t> Submit(v1::JobSpec spec, Caller who = Root()) {
    if (spec.script().empty() && !spec.interactive()) spec.set_script("#!/bin/sh\ntrue\n");
    if (spec.work_dir().empty()) spec.set_work_dir("/tmp");
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    auto r = engine_->SubmitJob(who, req, now_);
    if (!r.ok()) return r.status();
    return r->job_id();
  }

  static v1::JobSpec Gang(uint32_t nodes, uint32_t gpus) {
    v1::JobSpec s;
    s.set_nodes(nodes);
    s.set_gpus_per_node(gpus);
    return s;
  }

  static Caller Root() { return {0, 0, "root", true}; }
  static Caller Alice() { return {1000, 1000, "alice", false}; }
  static Caller Bob() { return {1001, 1001, "bob", false}; }

  v1::JobInfo Job(uint64_t id) {
    v1::GetJobRequest r;
    r.set_job_id(id);
    auto j = engine_->GetJob(r);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? j->job() : v1::JobInfo();
  }

  v1::NodeInfo Node(const std::string& name) {
    auto r = engine_->ListNodes(v1::ListNodesRequest(), now_);
    for (const auto& n : r->nodes()) {
      if (n.name() == name) return n;
    }
    ADD_FAILURE() << "no node " << name;
    return {};
  }

  void Pass() {
    engine_->RunSchedulePass(now_);
    ASSERT_TRUE(engine_->CheckInvariantsForTest().ok())
        << engine_->CheckInvariantsForTest().ToString();
  }

  void Agent(const std::string& node, v1::AgentMessage m) {
    engine_->OnAgentMessage(node, m, now_);
    ASSERT_TRUE(engine_->CheckInvariantsForTest().ok())
        << engine_->CheckInvariantsForTest().ToString();
  }

  void Exited(uint64_t id, const std::string& node, int code, int sig = 0, bool timeout = false) {
    v1::AgentMessage m;
    m.mutable_batch_exited()->set_job_id(id);
    m.mutable_batch_exited()->set_exit_code(code);
    m.mutable_batch_exited()->set_signal(sig);
    m.mutable_batch_exited()->set_timed_out(timeout);
    m.mutable_batch_exited()->set_run(Job(id).requeue_count());
    Agent(node, m);
  }

  void Cleaned(uint64_t id, const std::string& node, uint32_t run = 0) {
    v1::AgentMessage m;
    m.mutable_job_cleaned()->set_job_id(id);
    m.mutable_job_cleaned()->set_run(run);
    Agent(node, m);
  }

  void Started(uint64_t id, const std::string& node) {
    v1::AgentMessage m;
    m.mutable_job_started()->set_job_id(id);
    m.mutable_job_started()->set_run(Job(id).requeue_count());
    Agent(node, m);
  }

  void Flush() {
    engine_->TakeOutgoing();
    outbox_.clear();
  }

  // Commands sent to `node` since the last call.
  std::vector<v1::ControllerMessage> Sent(const std::string& node) {
    for (auto& o : engine_->TakeOutgoing()) outbox_.push_back(std::move(o));
    std::vector<v1::ControllerMessage> out;
    auto it = std::stable_partition(outbox_.begin(), outbox_.end(),
                                    [&](const Outgoing& o) { return o.node != node; });
    for (auto i = it; i != outbox_.end(); ++i) {
      if (!i->close_session) out.push_back(i->message);
    }
    outbox_.erase(it, outbox_.end());
    return out;
  }

  Config config_;
  store::InMemoryStateStore store_;
  std::unique_ptr<Engine> engine_;
  TimeMs now_ = 1'700'000'000'000;
  int creds_ = 0;
  std::vector<Outgoing> outbox_;
};

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

TEST_F(EngineTest, RefusesWhatCanNeverRunAndPersistsNothing) {
  size_t commits = store_.commits();
  auto id = Submit(Gang(1, 9));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(id.status().message().find(
                "asks for 9 GPUs per node; the largest node in partition gpu has 8"),
            std::string::npos);
  v1::JobSpec bad;
  bad.add_partitions("nosuch");
  EXPECT_EQ(Submit(bad).status().code(), StatusCode::kNotFound);
  v1::JobSpec noshebang;
  noshebang.set_script("echo hi\n");
  EXPECT_EQ(Submit(noshebang).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.commits(), commits);
  EXPECT_EQ(*Submit(v1::JobSpec()), 1u) << "refused submissions use no job id";
}

TEST_F(EngineTest, FailedCommitRefusesTheSubmission) {
  store_.FailNextCommitsForTest(1);
  auto id = Submit(Gang(1, 1));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kInternal);
  v1::ListJobsRequest all;
  all.set_include_finished(true);
  EXPECT_EQ(engine_->ListJobs(all)->jobs_size(), 0);
  EXPECT_EQ(*Submit(Gang(1, 1)), 1u);
}

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

TEST_F(EngineTest, CompletesFailsAndHoldsResourcesUntilEveryNodeIsClean) {
  AllUp();
  auto ok = *Submit(Gang(2, 8));
  auto bad = *Submit(Gang(2, 8));
  Pass();
  Flush();
  Exited(ok, "node1", 0);
  v1::JobInfo j = Job(ok);
  EXPECT_EQ(j.state(), v1::COMPLETED);
  EXPECT_TRUE(j.completing());
  // Every node of the job is told to clean up.
  auto t1 = Sent("node1");
  auto t2 = Sent("node2");
  ASSERT_EQ(t1.size(), 1u);
  ASSERT_EQ(t2.size(), 1u);
  EXPECT_TRUE(t2[0].has_terminate_job());
  // A third job needing node1/node2 cannot start before both are clean.
  auto next = *Submit(Gang(4, 8));
  Pass();
  EXPECT_EQ(Job(next).state(), v1::PENDING);
  Cleaned(ok, "node1");
  Pass();
  EXPECT_EQ(Job(next).state(), v1::PENDING);
  Cleaned(ok, "node2");
  EXPECT_FALSE(Job(ok).completing());
  Exited(bad, "node3", 3);
  EXPECT_EQ(Job(bad).state(), v1::FAILED);
  EXPECT_EQ(Job(bad).exit_code(), 3);
  EXPECT_EQ(Job(bad).reason(), "NonZeroExitCode");
  Cleaned(bad, "node3");
  Cleaned(bad, "node4");
  Pass();
  EXPECT_EQ(Job(next).state(), v1::RUNNING);
}

TEST_F(EngineTest, ExitFromTheWrongNodeOrAnOldRunIsIgnored) {
  AllUp();
  auto id = *Submit(Gang(2, 1));
  Pass();
  Exited(id, "node2", 0);  // not the batch node
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  v1::AgentMessage m;
  m.mutable_batch_exited()->set_job_id(id);
  m.mutable_batch_exited()->set_run(5);
  Agent("node1", m);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(EngineTest, TimeoutAndSignals) {
  AllUp();
  auto a = *Submit(Gang(1, 1));
  auto b = *Submit(Gang(1, 1));
  Pass();
  Exited(a, Job(a).nodes(0), 0, 15, true);
  EXPECT_EQ(Job(a).state(), v1::TIMEOUT);
  EXPECT_EQ(Job(a).exit_signal(), 15);
  Exited(b, Job(b).nodes(0), 0, 9);
  EXPECT_EQ(Job(b).state(), v1::FAILED);
}

TEST_F(EngineTest, CancelPendingRunningAndOthersJobs) {
  AllUp();
  auto running = *Submit(Gang(4, 8), Alice());
  auto pending = *Submit(Gang(1, 1), Alice());
  Pass();
  Flush();
  v1::CancelJobRequest byBob;
  byBob.add_job_ids(running);
  auto r = engine_->CancelJob(Bob(), byBob, now_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->results(0).code(), static_cast<int>(StatusCode::kPermissionDenied));
  EXPECT_EQ(Job(running).state(), v1::RUNNING);

  v1::CancelJobRequest req;
  req.add_job_ids(pending);
  req.add_job_ids(running);
  req.add_job_ids(999);
  r = engine_->CancelJob(Alice(), req, now_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->results(0).code(), 0);
  EXPECT_EQ(r->results(1).code(), 0);
  EXPECT_EQ(r->results(2).code(), static_cast<int>(StatusCode::kNotFound));
  EXPECT_EQ(Job(pending).state(), v1::CANCELLED);
  // Running: still running until the batch script is gone, and every node was told.
  EXPECT_EQ(Job(running).state(), v1::RUNNING);
  for (const char* n : {"node1", "node2", "node3", "node4"}) {
    auto s = Sent(n);
    ASSERT_EQ(s.size(), 1u) << n;
    EXPECT_EQ(s[0].terminate_job().reason(), "cancelled");
  }
  Exited(running, "node1", 0, 15);
  EXPECT_EQ(Job(running).state(), v1::CANCELLED);
  // An admin may cancel anyone's job.
  auto other = *Submit(Gang(1, 1), Bob());
  v1::CancelJobRequest ops;
  ops.add_job_ids(other);
  r = engine_->CancelJob({5, 5, "ops", true}, ops, now_);
  EXPECT_EQ(r->results(0).code(), 0);
}

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
  Pass();
  j = Job(id);
  EXPECT_EQ(j.state(), v1::RUNNING);
  EXPECT_EQ(j.nodes(0), "node3");  // node1's leaf has only one node left
  auto l = Sent("node3");
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].launch_job().requeue_count(), 1u);
  // node2 comes back still running the old run: it is terminated there before node2 takes work.
  Up("node2", {id}, "node2-new");
  auto stale = Sent("node2");
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_TRUE(stale[0].has_terminate_job());
  auto other = *Submit(Gang(2, 8));
  Pass();
  EXPECT_EQ(Job(other).state(), v1::PENDING);
  Cleaned(id, "node2", 0);
  Pass();
  EXPECT_EQ(Job(other).state(), v1::RUNNING);
}

TEST_F(EngineTest, NoRequeueJobEndsNodeFail) {
  AllUp();
  v1::JobSpec s = Gang(2, 8);
  s.set_no_requeue(true);
  auto id = *Submit(s);
  Pass();
  for (int i = 0; i < 12; ++i) {
    now_ += 1000;
    v1::AgentMessage hb;
    hb.mutable_heartbeat();
    for (const char* n : {"node1", "node3", "node4"}) engine_->OnAgentMessage(n, hb, now_);
    engine_->Tick(now_);
  }
  EXPECT_EQ(Job(id).state(), v1::NODE_FAIL);
  ASSERT_TRUE(engine_->CheckInvariantsForTest().ok());
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
  EXPECT_EQ(Job(2).state(), v1::PENDING);
  EXPECT_EQ(*Submit(Gang(1, 1)), 3u);
}

TEST_F(EngineTest, FinishedJobsAreArchivedAfterRetention) {
  AllUp();
  auto id = *Submit(Gang(1, 1));
  Pass();
  std::string n = Job(id).nodes(0);
  Exited(id, n, 0);
  Cleaned(id, n);
  now_ += 59'000;
  engine_->Tick(now_);
  EXPECT_EQ(Job(id).state(), v1::COMPLETED);
  now_ += 2'000;
  AllUp();
  engine_->Tick(now_);
  v1::GetJobRequest g;
  g.set_job_id(id);
  EXPECT_EQ(engine_->GetJob(g).status().code(), StatusCode::kNotFound);
  auto h = store_.ReadHistory(10);
  ASSERT_EQ(h->size(), 1u);
  EXPECT_EQ((*h)[0].id(), id);
  // squeue's flat walk order lost the archived job with the map.
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok())
      << engine_->CheckInvariantsForTest().ToString();
  EXPECT_EQ(engine_->ListJobs(v1::ListJobsRequest())->jobs_size(), 0);
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

TEST_F(EngineTest, MigSlicesShardsAndCountedGresAreAllocatedByUnit) {
  config_.nodes[0].gres = {{"gpu", "1g.10gb", 7}, {"nvme", "", 2}};
  config_.nodes[1].shards_per_gpu = 4;
  Restart();
  AllUp();
  EXPECT_EQ(Node("node1").gres(), "gpu:1g.10gb:7,nvme:2");
  EXPECT_EQ(Node("node2").gres(), "shard:32");
  v1::JobSpec mig;
  mig.set_gpus_per_node(2);
  mig.set_gpu_type("1G.10GB");
  auto m = Submit(mig);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Job(*m).gres(), "gpu:1g.10gb:2") << "a MIG profile as GPU type asks for slices";
  EXPECT_EQ(Job(*m).gpus_per_node(), 0u);
  v1::JobSpec shards;
  auto* g = shards.add_gres();
  g->set_name("shard");
  g->set_count(3);
  auto sh = Submit(shards);
  ASSERT_TRUE(sh.ok()) << sh.status().ToString();
  v1::JobSpec disks;
  g = disks.add_gres();
  g->set_name("nvme");
  g->set_count(3);
  auto d = Submit(disks);
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("asks for 3 nvme per node"), std::string::npos)
      << d.status().message();
  Pass();
  v1::JobInfo mj = Job(*m);
  ASSERT_EQ(mj.state(), v1::RUNNING);
  EXPECT_EQ(mj.nodes(0), "node1");
  ASSERT_EQ(mj.allocation().nodes(0).gres_size(), 1);
  EXPECT_EQ(mj.allocation().nodes(0).gres(0).units_size(), 2);
  v1::JobInfo sj = Job(*sh);
  ASSERT_EQ(sj.state(), v1::RUNNING);
  EXPECT_EQ(sj.nodes(0), "node2");
  ASSERT_EQ(sj.allocation().nodes(0).gres(0).on_gpu_size(), 3);
  EXPECT_EQ(Node("node2").gres_used(), "shard:3");
  EXPECT_EQ(Node("node2").gpus_allocated(), 1u) << "the shards' GPU is not free whole";
  EXPECT_EQ(Node("node1").gres_used(), "gpu:1g.10gb:2,nvme:0");
  // Held units survive a controller restart.
  Restart();
  Up("node1", {*m});
  Up("node2", {*sh});
  Up("node3");
  Up("node4");
  Pass();
  EXPECT_EQ(Node("node2").gres_used(), "shard:3");
  EXPECT_EQ(Node("node1").gres_used(), "gpu:1g.10gb:2,nvme:0");
  // And are free again once the job has left the node.
  Started(*sh, "node2");
  Exited(*sh, "node2", 0);
  Cleaned(*sh, "node2");
  EXPECT_EQ(Node("node2").gres_used(), "shard:0");
  EXPECT_EQ(Node("node2").gpus_allocated(), 0u);
}

TEST_F(EngineTest, StepsOnlyForTheOwnerOfARunningJob) {
  AllUp();
  auto id = *Submit(Gang(2, 8), Alice());
  v1::CreateStepRequest r;
  r.set_job_id(id);
  // Pending, then running with nodes not yet started: the client waits and retries.
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kUnavailable);
  Pass();
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kUnavailable);
  Started(id, "node1");
  Started(id, "node2");
  EXPECT_EQ(engine_->CreateStep(Bob(), r, now_).status().code(), StatusCode::kPermissionDenied);
  auto s = engine_->CreateStep(Alice(), r, now_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->step_id(), 0u);
  EXPECT_EQ(s->nodes_size(), 2);
  EXPECT_EQ(s->nodes(1).first_task(), 1u);
  EXPECT_EQ(s->credential(), Sent("node1")[0].launch_job().credential());
  // The first step holds every CPU of the job: a second one waits, unless it overlaps.
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kUnavailable);
  r.set_overlap(true);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_)->step_id(), 1u);
  Exited(id, "node1", 0);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kFailedPrecondition);
}

// Reports a step's end on a node, as the agent does once its tasks there are gone.
v1::AgentMessage StepEnd(uint64_t job, uint32_t step, int code = 0, int sig = 0,
                         bool killed = false) {
  v1::AgentMessage m;
  auto* e = m.mutable_step_ended();
  e->set_job_id(job);
  e->set_step_id(step);
  e->set_exit_code(code);
  e->set_signal(sig);
  e->set_killed(killed);
  return m;
}

TEST_F(EngineTest, StepsLayOutTasksLikeSrunAndShareCpusOnlyWhenAllowed) {
  AllUp();
  v1::JobSpec spec = Gang(2, 0);
  spec.set_ntasks(4);
  spec.set_cpus_per_task(2);
  auto id = *Submit(spec, Alice());
  Pass();
  Started(id, "node1");
  Started(id, "node2");
  auto step = [&](std::function<void(v1::CreateStepRequest&)> f) {
    v1::CreateStepRequest r;
    r.set_job_id(id);
    f(r);
    return engine_->CreateStep(Alice(), r, now_);
  };
  auto tasks = [](const v1::CreateStepResponse& s) {
    std::string out;
    for (const auto& n : s.nodes()) out += n.node() + ":" + std::to_string(n.ntasks()) + " ";
    return out;
  };
  // The job's own layout: 2 tasks on each node, every CPU of the job held.
  auto all = step([](auto&) {});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(tasks(*all), "node1:2 node2:2 ");
  EXPECT_EQ(all->nodes(0).cpu_ids_size(), 4);
  EXPECT_EQ(all->cpus_per_task(), 2u);
  EXPECT_EQ(step([](auto& r) { r.set_ntasks(1); }).status().message(), "Requested nodes are busy");
  Agent("node1", StepEnd(id, 0));
  Agent("node2", StepEnd(id, 0));
  EXPECT_EQ(Job(id).steps(0).state(), v1::COMPLETED);
  // --exact: only what the tasks need, so steps run side by side.
  auto a = step([](auto& r) {
    r.set_ntasks(1);
    r.set_exact(true);
  });
  auto b = step([](auto& r) {
    r.set_ntasks(1);
    r.set_exact(true);
  });
  auto c = step([](auto& r) {
    r.set_ntasks(1);
    r.set_exact(true);
  });
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(tasks(*a), "node1:1 ");
  EXPECT_EQ(tasks(*b), "node1:1 ");
  EXPECT_EQ(tasks(*c), "node2:1 ") << "node1's 4 CPUs are held by the two steps before";
  EXPECT_NE(a->nodes(0).cpu_ids(0), b->nodes(0).cpu_ids(0));
  EXPECT_EQ(a->step_id(), 1u);
  // -N2 -n3 is 2 + 1 (block); more than the job holds can never run.
  Agent("node1", StepEnd(id, 1));
  Agent("node1", StepEnd(id, 2));
  Agent("node2", StepEnd(id, 3));
  auto d = step([](auto& r) {
    r.set_nodes(2);
    r.set_ntasks(3);
  });
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(tasks(*d), "node1:2 node2:1 ");
  EXPECT_EQ(d->nodes(1).first_task(), 2u);
  Agent("node1", StepEnd(id, 4));
  Agent("node2", StepEnd(id, 4));
  EXPECT_EQ(step([](auto& r) { r.set_nodes(3); }).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(step([](auto& r) { r.set_ntasks(5); }).status().code(), StatusCode::kFailedPrecondition)
      << "5 tasks x 2 CPUs is more than the job's 8";
  auto n = step([](auto& r) { r.set_nodes(2); });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(tasks(*n), "node1:1 node2:1 ") << "srun -N without -n: one task per node";
  EXPECT_EQ(step([](auto& r) { r.add_nodelist("node3"); }).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, StepsWithGpusGetTheirOwnAndWaitWhenNoneAreLeft) {
  AllUp();
  v1::JobSpec spec = Gang(1, 4);
  spec.set_ntasks(4);
  auto id = *Submit(spec, Alice());
  Pass();
  Started(id, "node1");
  std::set<uint32_t> seen;
  for (int i = 0; i < 4; ++i) {
    v1::CreateStepRequest r;
    r.set_job_id(id);
    r.set_ntasks(1);
    r.set_exact(true);
    r.set_gpus_per_task(1);
    auto s = engine_->CreateStep(Alice(), r, now_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_TRUE(s->gpus_given());
    ASSERT_EQ(s->nodes(0).gpu_indices_size(), 1);
    EXPECT_TRUE(seen.insert(s->nodes(0).gpu_indices(0)).second) << "a GPU given twice";
  }
  v1::CreateStepRequest r;
  r.set_job_id(id);
  r.set_ntasks(1);
  r.set_exact(true);
  r.set_gpus_per_task(1);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kUnavailable);
  Agent("node1", StepEnd(id, 2, 1));
  EXPECT_EQ(Job(id).steps(2).state(), v1::FAILED);
  EXPECT_EQ(Job(id).steps(2).exit_code(), 1);
  auto again = engine_->CreateStep(Alice(), r, now_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->nodes(0).gpu_indices(0), Job(id).steps(2).nodes(0).gpu_indices(0));
  r.set_gpus_per_task(5);
  r.set_overlap(true);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(EngineTest, StepStatesFollowTheirTasksTheAgentAndTheJob) {
  AllUp();
  auto id = *Submit(Gang(2, 1), Alice());
  Pass();
  Started(id, "node1");
  Started(id, "node2");
  v1::CreateStepRequest r;
  r.set_job_id(id);
  r.set_overlap(true);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine_->CreateStep(Alice(), r, now_).ok());
  // Killed on one node (its client went away): CANCELLED once both nodes reported.
  Agent("node1", StepEnd(id, 0, 0, 9, true));
  EXPECT_EQ(Job(id).steps(0).state(), v1::RUNNING);
  Agent("node2", StepEnd(id, 0, 0, 9, true));
  EXPECT_EQ(Job(id).steps(0).state(), v1::CANCELLED);
  EXPECT_EQ(Job(id).steps(0).exit_signal(), 9);
  // A node's agent restarted: its step tasks ended with it.
  Up("node2", {id}, "node2-new");
  Agent("node1", StepEnd(id, 1));
  EXPECT_EQ(Job(id).steps(1).state(), v1::NODE_FAIL);
  // A duplicate or foreign report changes nothing.
  Agent("node1", StepEnd(id, 1, 7));
  Agent("node3", StepEnd(id, 2, 7));
  EXPECT_EQ(Job(id).steps(2).state(), v1::RUNNING);
  // The job ends: what still runs is cancelled with it, and survives the archive.
  now_ += 1000;
  Exited(id, "node1", 0);
  EXPECT_EQ(Job(id).steps(2).state(), v1::RUNNING) << "until its nodes say how it ended";
  Agent("node1", StepEnd(id, 2, 0, 15, true));
  Cleaned(id, "node1");
  Cleaned(id, "node2");
  EXPECT_EQ(Job(id).steps(2).state(), v1::NODE_FAIL) << "it had tasks on the restarted node2";
  EXPECT_EQ(Job(id).steps(2).exit_signal(), 15);
  EXPECT_EQ(Job(id).steps(3).end_time_ms(), now_);
  now_ += 120'000;
  engine_->Tick(now_);
  v1::ListAccountingRequest q;
  q.add_job_ids(id);
  auto acct = engine_->ListAccounting(q, now_);
  ASSERT_TRUE(acct.ok());
  ASSERT_EQ(acct->jobs_size(), 1);
  EXPECT_EQ(acct->jobs(0).steps_size(), 4);
  EXPECT_EQ(acct->jobs(0).steps(0).state(), v1::CANCELLED);
  EXPECT_EQ(acct->jobs(0).state(), v1::COMPLETED);
}

TEST_F(EngineTest, InteractiveAllocationsEndWithTheirClient) {
  AllUp();
  v1::JobSpec spec = Gang(2, 1);
  spec.set_interactive(true);
  spec.set_script("#!/bin/sh\n");
  EXPECT_EQ(Submit(spec, Alice()).status().code(), StatusCode::kInvalidArgument);
  spec.clear_script();
  auto id = *Submit(spec, Alice());
  v1::AttachAllocationRequest at;
  at.set_job_id(id);
  EXPECT_EQ(engine_->AttachAllocation(Bob(), at).status().code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(engine_->AttachAllocation(Alice(), at).ok());
  Pass();
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_TRUE(Job(id).interactive());
  for (const char* n : {"node1", "node2"}) {
    auto sent = Sent(n);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_FALSE(sent[0].launch_job().batch_node()) << "an allocation runs no script";
  }
  // The client reports how it ended.
  v1::ReleaseAllocationRequest rel;
  rel.set_job_id(id);
  rel.set_exit_code(3);
  EXPECT_EQ(engine_->ReleaseAllocation(Bob(), rel, now_).status().code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(engine_->ReleaseAllocation(Alice(), rel, now_).ok());
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).exit_code(), 3);
  EXPECT_FALSE(Sent("node1").empty()) << "its nodes are told to clean up";
  // A client that dies: its connection closes and the allocation ends.
  auto id2 = *Submit(spec, Alice());
  ASSERT_TRUE(engine_
                  ->AttachAllocation(Alice(),
                                     [&] {
                                       v1::AttachAllocationRequest a;
                                       a.set_job_id(id2);
                                       return a;
                                     }())
                  .ok());
  Pass();
  ASSERT_EQ(Job(id2).state(), v1::RUNNING);
  engine_->AllocationClientGone(id2, now_);
  EXPECT_EQ(Job(id2).state(), v1::CANCELLED);
  // One that never attaches ends after the grace; cancel and the time limit end one at once.
  auto id3 = *Submit(spec, Alice());
  now_ += 59'000;
  engine_->Tick(now_);
  EXPECT_EQ(Job(id3).state(), v1::PENDING);
  now_ += 2'000;
  engine_->Tick(now_);
  EXPECT_EQ(Job(id3).state(), v1::CANCELLED);
  AllUp();  // they went silent while the clock jumped
  v1::JobSpec limited = spec;
  limited.set_time_limit_ms(60'000);
  auto id4 = *Submit(limited, Alice());
  ASSERT_TRUE(engine_
                  ->AttachAllocation(Alice(),
                                     [&] {
                                       v1::AttachAllocationRequest a;
                                       a.set_job_id(id4);
                                       return a;
                                     }())
                  .ok());
  Pass();
  ASSERT_EQ(Job(id4).state(), v1::RUNNING);
  now_ += 60'000;
  AllUp();  // alive (heartbeats) while the clock jumps
  engine_->Tick(now_);
  EXPECT_EQ(Job(id4).state(), v1::TIMEOUT);
  // A batch job cannot be released by its client.
  auto batch = *Submit(Gang(1, 1), Alice());
  rel.set_job_id(batch);
  EXPECT_EQ(engine_->ReleaseAllocation(Alice(), rel, now_).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(EngineTest, AccountingFiltersLiveAndArchivedJobsAndForgetsAfterTheRetention) {
  config_.scheduling.accounting_retention_days = 2;
  Restart();
  AllUp();
  auto a = *Submit(Gang(1, 1), Alice());
  auto b = *Submit(Gang(1, 1), Bob());
  Pass();
  Started(a, Job(a).nodes(0));
  Exited(a, Job(a).nodes(0), 0);
  Cleaned(a, Job(a).nodes(0));
  now_ += 120'000;
  engine_->Tick(now_);  // a is archived
  auto c = *Submit(Gang(1, 1), Alice());
  auto ids = [&](v1::ListAccountingRequest q) {
    std::vector<uint64_t> out;
    auto r = engine_->ListAccounting(q, now_);
    EXPECT_TRUE(r.ok());
    for (const auto& j : r->jobs()) out.push_back(j.id());
    return out;
  };
  EXPECT_EQ(ids({}), (std::vector<uint64_t>{a, b, c}));
  v1::ListAccountingRequest q;
  q.add_users("alice");
  EXPECT_EQ(ids(q), (std::vector<uint64_t>{a, c}));
  q.add_states(v1::COMPLETED);
  EXPECT_EQ(ids(q), (std::vector<uint64_t>{a}));
  v1::ListAccountingRequest window;
  window.set_start_ms(now_ - 1000);  // a ended before the window
  EXPECT_EQ(ids(window), (std::vector<uint64_t>{b, c}));
  window.set_start_ms(0);
  window.set_end_ms(now_ - 200'000);  // before anything was submitted
  EXPECT_TRUE(ids(window).empty());
  // After the retention, the archived record is gone; live jobs stay.
  now_ += 3LL * 86'400'000;
  engine_->Tick(now_);
  v1::ListAccountingRequest byid;
  byid.add_job_ids(a);
  EXPECT_TRUE(ids(byid).empty());
  EXPECT_EQ(ids({}), (std::vector<uint64_t>{b, c}));
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

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

namespace muster::controller {
namespace {

TEST_F(EngineTest, ScriptLivesOutsideTheRecordAndIsReadBackAtLaunch) {
  AllUp();
  v1::JobSpec spec = Gang(1, 1);
  spec.set_script("#!/bin/sh\necho payload\n");
  spec.add_environment("FOO=bar");
  auto id = Submit(spec);
  ASSERT_TRUE(id.ok());
  auto loaded = store_.LoadAll();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->jobs.size(), 1u);
  EXPECT_TRUE(loaded->jobs[0].spec().script().empty()) << "the record must stay small";
  Pass();
  auto sent = Sent(Job(*id).nodes(0));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].launch_job().spec().script(), "#!/bin/sh\necho payload\n");
  ASSERT_EQ(sent[0].launch_job().spec().environment_size(), 1);

  // A payload that cannot be read back is launched without a script (the agent refuses it and
  // reports the failure) rather than with something else.
  auto second = Submit(spec);
  ASSERT_TRUE(second.ok());
  store_.CorruptForTest(store::Family::kJobPayload, store::Mutation::JobKey(*second));
  Pass();
  sent = Sent(Job(*second).nodes(0));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].launch_job().spec().script().empty());
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

TEST_F(EngineTest, HoldReleaseAndRequeueLikeScontrol) {
  AllUp();
  auto update = [&](Caller who, uint64_t id, v1::UpdateJobRequest::Action a) {
    v1::UpdateJobRequest r;
    r.add_job_ids(id);
    r.set_action(a);
    auto resp = engine_->UpdateJob(who, r, now_);
    EXPECT_TRUE(resp.ok());
    return resp->results(0).code();
  };
  auto id = *Submit(Gang(1, 8), Alice());
  EXPECT_EQ(update(Bob(), id, v1::UpdateJobRequest::HOLD),
            static_cast<int>(StatusCode::kPermissionDenied));
  EXPECT_EQ(update(Alice(), id, v1::UpdateJobRequest::HOLD), 0);
  Pass();
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_EQ(Job(id).reason(), "JobHeldUser");
  EXPECT_EQ(update(Alice(), id, v1::UpdateJobRequest::RELEASE), 0);
  Pass();
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  const std::string node = Job(id).nodes(0);
  EXPECT_EQ(update(Alice(), id, v1::UpdateJobRequest::HOLD),
            static_cast<int>(StatusCode::kFailedPrecondition));
  Started(id, node);
  Flush();
  EXPECT_EQ(update(Alice(), id, v1::UpdateJobRequest::REQUEUE), 0);
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_EQ(Job(id).requeue_count(), 1u);
  EXPECT_TRUE(Sent(node).at(0).has_terminate_job());
  // An admin's hold is the admin's to release.
  auto held = *Submit(Gang(1, 1), Alice());
  EXPECT_EQ(update(Root(), held, v1::UpdateJobRequest::HOLD), 0);
  EXPECT_EQ(Job(held).reason(), "JobHeldAdmin");
  EXPECT_EQ(update(Alice(), held, v1::UpdateJobRequest::RELEASE),
            static_cast<int>(StatusCode::kPermissionDenied));
  v1::JobSpec no = Gang(1, 1);
  no.set_no_requeue(true);
  auto fixed = *Submit(no, Alice());
  Pass();
  EXPECT_EQ(update(Alice(), fixed, v1::UpdateJobRequest::REQUEUE),
            static_cast<int>(StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

TEST_F(EngineTest, ASignalReachesEveryNodeAndLeavesTheJobRunning) {
  AllUp();
  auto id = *Submit(Gang(2, 8), Alice());
  Pass();
  auto pending = *Submit(Gang(4, 8), Alice());
  Pass();
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  Flush();
  v1::CancelJobRequest r;
  r.add_job_ids(id);
  r.add_job_ids(pending);
  r.set_signal(SIGUSR1);
  r.set_batch_only(true);
  auto resp = engine_->CancelJob(Alice(), r, now_);
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(resp->results(0).code(), 0);
  EXPECT_EQ(resp->results(1).message(), "Job is pending execution");
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_FALSE(Job(id).completing());
  const auto first = Sent(Job(id).nodes(0));
  const auto second = Sent(Job(id).nodes(1));
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0].signal_job().signal(), SIGUSR1);
  EXPECT_TRUE(first[0].signal_job().batch()) << "the batch script runs on the first node";
  EXPECT_FALSE(second[0].signal_job().batch());
  EXPECT_FALSE(first[0].signal_job().steps()) << "--batch: not the steps";
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

TEST_F(EngineTest, ABriefListCarriesWhatSqueueShowsAndNothingHeavy) {
  AllUp();
  v1::JobSpec spec = Gang(2, 4);
  spec.set_name("train");
  spec.set_ntasks(8);
  auto id = *Submit(spec, Alice());
  Pass();
  v1::ListJobsRequest req;
  req.set_brief(true);
  auto brief = engine_->ListJobs(req);
  ASSERT_TRUE(brief.ok());
  ASSERT_EQ(brief->jobs_size(), 1);
  const v1::JobInfo& b = brief->jobs(0);
  const v1::JobInfo full = Job(id);
  EXPECT_EQ(b.name(), "train");
  EXPECT_EQ(b.user(), "alice");
  EXPECT_EQ(b.state(), v1::RUNNING);
  EXPECT_EQ(b.nodes_size(), 2);
  EXPECT_EQ(b.num_nodes(), full.num_nodes());
  EXPECT_EQ(b.num_tasks(), full.num_tasks());
  EXPECT_EQ(b.cpus_total(), full.cpus_total());
  EXPECT_EQ(b.gpus_per_node(), 4u);
  EXPECT_EQ(b.priority(), full.priority());
  EXPECT_EQ(b.start_time_ms(), full.start_time_ms());
  EXPECT_FALSE(full.stdout_path().empty());
  EXPECT_TRUE(b.stdout_path().empty()) << "no output paths in a brief list";
  EXPECT_EQ(b.allocation().nodes_size(), 0) << "no allocation details in a brief list";
  EXPECT_EQ(b.partition(), full.partition());

  // A pending job's row: the cached spec part and the live part agree with the full view.
  v1::JobSpec held = Gang(3, 2);
  held.set_hold(true);
  held.set_ntasks(6);
  held.set_cpus_per_task(2);
  auto held_id = *Submit(held, Alice());
  req.add_job_ids(held_id);
  auto pending = engine_->ListJobs(req);
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->jobs_size(), 1);
  const v1::JobInfo& p = pending->jobs(0);
  const v1::JobInfo pfull = Job(held_id);
  EXPECT_EQ(p.id(), held_id);
  EXPECT_EQ(p.state(), v1::PENDING);
  EXPECT_EQ(p.reason(), "JobHeldUser");
  EXPECT_EQ(p.partition(), "gpu");
  EXPECT_EQ(p.nodes_size(), 0);
  EXPECT_EQ(p.num_nodes(), 3u);
  EXPECT_EQ(p.num_tasks(), pfull.num_tasks());
  EXPECT_EQ(p.cpus_total(), 12u);
  EXPECT_EQ(p.cpus_total(), pfull.cpus_total());
  EXPECT_EQ(p.submit_time_ms(), pfull.submit_time_ms());
  EXPECT_EQ(p.time_limit_ms(), pfull.time_limit_ms());
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

// Counts in a step request come from the client: a bogus one is refused, never trusted.
TEST_F(EngineTest, ABogusStepRequestIsRefusedNotTrusted) {
  AllUp();
  auto id = *Submit(Gang(1, 2), Alice());
  Pass();
  Started(id, "node1");
  v1::CreateStepRequest r;
  r.set_job_id(id);
  r.set_ntasks(1u << 30);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kInvalidArgument);
  // 2^20 tasks x 2^20 CPUs wraps to 0 in 32 bits: it must still be "more than the job holds".
  r.set_ntasks(1u << 20);
  r.set_cpus_per_task(1u << 20);
  r.set_exact(true);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kFailedPrecondition);
  r.clear_cpus_per_task();
  r.set_ntasks(1u << 16);
  r.set_gpus_per_task(1u << 16);
  EXPECT_EQ(engine_->CreateStep(Alice(), r, now_).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok());
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

constexpr int64_t kMin = 60'000;

class ExplainTest : public EngineTest {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    // A second partition over node3-4, for "it would start now in partition gpu".
    auto c = ParseConfig(std::string(kConfig) +
                             "[[partition]]\nname = \"small\"\n"
                             "nodes = \"node[3-4]\"\n",
                         "test.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    Restart();
    AllUp();
  }
  v1::JobExplanation Explain(uint64_t id) {
    v1::ExplainJobRequest r;
    r.set_job_id(id);
    auto x = engine_->ExplainJob(r, now_);
    EXPECT_TRUE(x.ok()) << x.status().ToString();
    return x.ok() ? x->explanation() : v1::JobExplanation();
  }
  static v1::JobSpec Timed(uint32_t nodes, uint32_t gpus, int64_t limit_ms) {
    v1::JobSpec s = Gang(nodes, gpus);
    s.set_time_limit_ms(limit_ms);
    return s;
  }
};

TEST_F(ExplainTest, TellsWhatHoldsAJobBackAndWhatWouldStartIt) {
  v1::JobSpec a = Timed(2, 8, 30 * kMin);
  a.add_required_nodes("node3");
  a.add_required_nodes("node4");
  auto running = *Submit(a, Bob());
  Pass();
  ASSERT_EQ(Job(running).state(), v1::RUNNING);
  auto wide = *Submit(Timed(4, 8, 10 * kMin), Alice());   // waits for node3-4: a reservation
  auto small = *Submit(Timed(1, 4, 60 * kMin), Alice());  // fits now, but not before `wide`
  Pass();
  ASSERT_EQ(Job(small).state(), v1::PENDING);

  v1::JobExplanation w = Explain(wide);
  EXPECT_EQ(w.state(), v1::PENDING);
  EXPECT_EQ(w.rank(), 1u);
  EXPECT_EQ(w.pending_total(), 2u);
  EXPECT_TRUE(w.reserved());
  EXPECT_EQ(w.expected_start_ms(), now_ + 30 * kMin) << "when the running job's limit ends";
  ASSERT_EQ(w.partitions_size(), 1);
  const v1::PartitionExplanation& p = w.partitions(0);
  EXPECT_EQ(p.name(), "gpu");
  EXPECT_EQ(p.needed(), 4u);
  EXPECT_EQ(p.fit_now(), 2u);
  ASSERT_GE(p.groups_size(), 2);
  EXPECT_EQ(p.groups(0).verdict(), "fits_now");
  EXPECT_EQ(p.groups(0).nodes(), "node[1-2]");
  EXPECT_EQ(p.groups(1).verdict(), "busy");
  EXPECT_EQ(p.groups(1).nodes(), "node[3-4]");
  EXPECT_FALSE(p.gang_now().empty());
  EXPECT_TRUE(p.never().empty());
  ASSERT_EQ(w.holding_size(), 1);
  EXPECT_EQ(w.holding(0).job_id(), running);
  EXPECT_EQ(w.holding(0).user(), "bob");
  EXPECT_EQ(w.holding(0).end_ms(), now_ + 30 * kMin);
  EXPECT_EQ(w.reservations_ahead_total(), 0u) << "its own reservation is not ahead of it";

  v1::JobExplanation s = Explain(small);
  EXPECT_EQ(s.rank(), 2u);
  ASSERT_EQ(s.reservations_ahead_size(), 1);
  EXPECT_EQ(s.reservations_ahead(0).job_id(), wide);
  EXPECT_EQ(s.reservations_ahead(0).nodes(), "node[1-4]");
  EXPECT_EQ(s.partitions(0).gang_now(), "") << "it fits the free nodes";
  bool time_hint = false;
  for (const auto& c : s.changes())
    time_hint |= c.find("a time limit of at most 30:00 (--time)") == 0;
  EXPECT_TRUE(time_hint) << (s.changes_size() ? s.changes(0) : s.summary());
  EXPECT_NE(s.summary().find("1 reservation ahead"), std::string::npos) << s.summary();

  // Following the advice starts it.
  auto fits = *Submit(Timed(1, 4, 20 * kMin), Alice());
  Pass();
  EXPECT_EQ(Job(fits).state(), v1::RUNNING);
}

TEST_F(ExplainTest, SuggestsOtherPartitionsAndReleasesAndSaysWhatCanNeverRun) {
  v1::JobSpec a = Timed(2, 8, 30 * kMin);
  a.add_partitions("small");
  auto running = *Submit(a);
  Pass();
  ASSERT_EQ(Job(running).state(), v1::RUNNING);
  v1::JobSpec b = Timed(1, 8, 5 * kMin);
  b.add_partitions("small");
  auto waiting = *Submit(b, Alice());
  Pass();
  v1::JobExplanation x = Explain(waiting);
  bool other = false;
  for (const auto& c : x.changes()) other |= c == "it would start now in partition gpu (-p gpu)";
  EXPECT_TRUE(other) << (x.changes_size() ? x.changes(0) : x.summary());

  v1::JobSpec h = Gang(1, 1);
  h.set_hold(true);
  auto held = *Submit(h, Alice());
  x = Explain(held);
  EXPECT_EQ(x.rank(), 0u) << "a held job is not in the queue";
  ASSERT_GE(x.changes_size(), 1);
  EXPECT_EQ(x.changes(0),
            "it is held: release it with `scontrol release " + std::to_string(held) + "`");

  v1::JobSpec spec = Gang(3, 1);
  spec.add_partitions("small");
  auto never = *Submit(spec, Alice());
  Pass();
  x = Explain(never);
  EXPECT_EQ(x.reason(), "PartitionNodeLimit");
  EXPECT_EQ(x.partitions(0).never(), "asks for 3 nodes; partition small has 2");
  EXPECT_EQ(x.summary(), "can never run as asked: asks for 3 nodes; partition small has 2");
  bool could = false;
  for (const auto& c : x.changes()) could |= c.find("partition gpu (-p gpu)") != std::string::npos;
  EXPECT_TRUE(could) << (x.changes_size() ? x.changes(0) : x.summary());

  x = Explain(running);
  EXPECT_EQ(x.state(), v1::RUNNING);
  EXPECT_NE(x.summary().find("running since"), std::string::npos);
  v1::ExplainJobRequest r;
  r.set_job_id(9999);
  EXPECT_EQ(engine_->ExplainJob(r, now_).status().code(), StatusCode::kNotFound);
}

TEST_F(ExplainTest, TestOnlyForecastsWithoutSubmitting) {
  v1::JobSpec a = Timed(2, 8, 30 * kMin);
  a.add_required_nodes("node3");
  a.add_required_nodes("node4");
  auto running = *Submit(a);
  Pass();
  ASSERT_EQ(Job(running).state(), v1::RUNNING);
  auto test = [&](v1::JobSpec s) {
    s.set_script("#!/bin/sh\ntrue\n");
    s.set_work_dir("/tmp");
    v1::SubmitJobRequest req;
    *req.mutable_spec() = s;
    req.set_test_only(true);
    auto r = engine_->SubmitJob(Alice(), req, now_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : v1::SubmitJobResponse();
  };
  v1::SubmitJobResponse now = test(Timed(2, 8, 5 * kMin));
  EXPECT_TRUE(now.test_only().starts_now());
  EXPECT_EQ(now.test_only().start_ms(), now_);
  EXPECT_EQ(now.test_only().partition(), "gpu");
  EXPECT_EQ(now.test_only().nodes_size(), 2);
  EXPECT_EQ(now.test_only().nodes(0), "node1");
  v1::SubmitJobResponse later = test(Timed(4, 8, 5 * kMin));
  EXPECT_FALSE(later.test_only().starts_now());
  EXPECT_EQ(later.test_only().start_ms(), now_ + 30 * kMin);
  EXPECT_EQ(later.test_only().nodes_size(), 4);
  EXPECT_EQ(later.test_only().reason(), "Resources");
  // Nothing was accepted: the queue is as it was, and the id is still free.
  v1::ListJobsRequest all;
  EXPECT_EQ(engine_->ListJobs(all)->jobs_size(), 1);
  auto real = *Submit(Gang(1, 1));
  EXPECT_EQ(real, later.job_id());
  EXPECT_EQ(now.job_id(), later.job_id());
  // A job that can never run is refused as a real submission would be.
  v1::SubmitJobRequest bad;
  *bad.mutable_spec() = Gang(1, 16);
  bad.mutable_spec()->set_script("#!/bin/sh\n");
  bad.mutable_spec()->set_work_dir("/tmp");
  bad.set_test_only(true);
  EXPECT_EQ(engine_->SubmitJob(Alice(), bad, now_).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

TEST(ArraySpecTest, ParsesSlurmsForms) {
  v1::ArrayTask a;
  auto t = ParseArraySpec("0-15:4%2", 1001, &a);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, (std::vector<uint32_t>{0, 4, 8, 12}));
  EXPECT_EQ(a.count(), 4u);
  EXPECT_EQ(a.min(), 0u);
  EXPECT_EQ(a.max(), 12u);
  EXPECT_EQ(a.step(), 4u);
  EXPECT_EQ(a.max_running(), 2u);
  EXPECT_EQ(a.spec(), "0-15:4%2");
  t = ParseArraySpec("5,1-3,3", 1001, &a);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (std::vector<uint32_t>{1, 2, 3, 5}));
  EXPECT_EQ(a.step(), 1u);
  EXPECT_EQ(a.max_running(), 0u);
  for (const char* bad : {"", "5-3", "1-2000", "a-b", "1-3%0", "1-3:0", "1,,x", "-1", "1-3%"}) {
    EXPECT_EQ(ParseArraySpec(bad, 1001, &a).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(EngineTest, AJobArrayIsOneJobPerTaskThrottledByItsLimit) {
  AllUp();
  v1::JobSpec spec = Gang(1, 1);
  spec.set_array("1-5%2");
  auto id = *Submit(spec, Alice());
  v1::ListJobsRequest req;
  req.add_job_ids(id);  // the array's id lists every task
  auto list = engine_->ListJobs(req);
  ASSERT_EQ(list->jobs_size(), 5);
  for (int k = 0; k < 5; ++k) {
    const v1::JobInfo& j = list->jobs(k);
    EXPECT_EQ(j.id(), id + static_cast<uint64_t>(k));
    EXPECT_EQ(j.array().array_job_id(), id);
    EXPECT_EQ(j.array().task_id(), static_cast<uint32_t>(k + 1));
    EXPECT_EQ(j.array().count(), 5u);
  }
  EXPECT_EQ(*Submit(Gang(1, 1)), id + 5) << "the next job's id follows the array's";
  Pass();
  int running = 0;
  for (int k = 0; k < 5; ++k) running += Job(id + static_cast<uint64_t>(k)).state() == v1::RUNNING;
  EXPECT_EQ(running, 2) << "%2: two tasks at a time, though everything fits";
  EXPECT_EQ(Job(id + 2).reason(), "JobArrayTaskLimit");
  // The launch carries the array for SLURM_ARRAY_* and %A/%a.
  bool launched = false;
  for (const auto& o : engine_->TakeOutgoing()) {
    if (o.message.has_launch_job() && o.message.launch_job().job_id() == id + 1) {
      launched = true;
      EXPECT_EQ(o.message.launch_job().array().task_id(), 2u);
      EXPECT_EQ(o.message.launch_job().array().array_job_id(), id);
    }
  }
  EXPECT_TRUE(launched);
  // One ends: the next task starts.
  Started(id, "node1");
  const std::string node = Job(id).nodes(0);
  Exited(id, node, 0);
  Cleaned(id, node);
  Pass();
  EXPECT_EQ(Job(id + 2).state(), v1::RUNNING);
  EXPECT_EQ(Job(id + 3).state(), v1::PENDING);
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok());
}

TEST_F(EngineTest, CancellingAnArrayIdCancelsEveryTaskButASingleIdOnlyItself) {
  v1::JobSpec spec = Gang(1, 1);
  spec.set_array("0-3");
  auto id = *Submit(spec, Alice());
  v1::CancelJobRequest one;
  one.add_single_job_ids(id);  // task 0, whose job id is the array's
  ASSERT_TRUE(engine_->CancelJob(Alice(), one, now_).ok());
  EXPECT_EQ(Job(id).state(), v1::CANCELLED);
  EXPECT_EQ(Job(id + 1).state(), v1::PENDING);
  v1::CancelJobRequest all;
  all.add_job_ids(id);
  auto r = engine_->CancelJob(Alice(), all, now_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->results_size(), 4);
  for (uint64_t k = 1; k < 4; ++k) EXPECT_EQ(Job(id + k).state(), v1::CANCELLED);
  // Accounting lists the array's tasks by its id.
  v1::ListAccountingRequest acct;
  acct.add_job_ids(id);
  auto a = engine_->ListAccounting(acct, now_);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->jobs_size(), 4);
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

// sacct's two parts: the live jobs read on the strand, the archive scanned later on another
// thread. A job archived in between is listed once, as it was when the query began.
TEST_F(EngineTest, AccountingScanLaterListsAJobArchivedMeanwhileOnce) {
  AllUp();
  auto old_job = *Submit(Gang(1, 1));
  auto id = *Submit(Gang(1, 1));
  Pass();
  for (uint64_t j : {old_job, id}) {
    const std::string n = Job(j).nodes(0);
    Exited(j, n, j == id ? 3 : 0);
    Cleaned(j, n);
  }
  now_ += 61'000;  // past finished_job_retention_ms: both are archived ...
  AllUp();
  engine_->Tick(now_);
  auto young = *Submit(Gang(1, 1));  // ... and one live job
  v1::ListAccountingRequest req;
  req.set_start_ms(now_ - 3'600'000);
  Engine::AccountingQuery q = engine_->PrepareAccounting(req, now_);
  EXPECT_EQ(q.live.size(), 1u);
  EXPECT_TRUE(q.live.count(young));
  // The live job ends and is archived before the scan runs.
  v1::CancelJobRequest c;
  c.add_job_ids(young);
  ASSERT_TRUE(engine_->CancelJob(Root(), c, now_).ok());
  now_ += 61'000;
  AllUp();
  engine_->Tick(now_);
  auto resp = Engine::ScanAccounting(q);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  ASSERT_EQ(resp->jobs_size(), 3);
  EXPECT_EQ(resp->jobs(0).id(), old_job);
  EXPECT_EQ(resp->jobs(1).id(), id);
  EXPECT_EQ(resp->jobs(1).exit_code(), 3);
  EXPECT_EQ(resp->jobs(2).id(), young);
  EXPECT_EQ(resp->jobs(2).state(), v1::PENDING) << "as it was when the query began";
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

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

}  // namespace
}  // namespace muster::controller
