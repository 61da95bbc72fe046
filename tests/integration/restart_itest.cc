// Restarts and losses: agents re-adopting their jobs and steps, a stale controller fenced off,
// lost nodes, controller restarts.
#include <map>
#include <numeric>
#include <sstream>
#include <thread>

#include "harness/cluster_test.h"

namespace muster::testing {
namespace {

TEST_F(ClusterTest, AgentRestartReadoptsRunningBatchJobs) {
  // Job 1 outlives the agent's downtime; job 2 ends while the agent is away.
  auto id = cluster_->Submit("#!/bin/sh\necho $$ > " + jobs_ + "pid\nwhile [ ! -e " + jobs_ +
                                 "go ]; do sleep 0.05; done\necho done\nexit 3\n",
                             Gang(1, 8));
  auto quick = cluster_->Submit(
      "#!/bin/sh\nwhile [ ! -e " + jobs_ + "go2 ]; do sleep 0.05; done\nexit 7\n", Gang(1, 8));
  ASSERT_TRUE(id.ok() && quick.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING && cluster_->State(*quick) == v1::RUNNING,
                    10'000);
  const std::string node = cluster_->Job(*id)->nodes(0);
  ASSERT_EQ(cluster_->Job(*quick)->nodes(0), node == "node1" ? "node2" : "node1")
      << "the test needs the two jobs on node1 and node2";
  ASSERT_EVENTUALLY(!Read(jobs_ + "pid").empty(), 5'000);
  const pid_t script = std::stoi(Read(jobs_ + "pid"));
  for (int i : {0, 1}) cluster_->DetachAgent(i);
  EXPECT_EQ(::kill(script, 0), 0) << "the batch script must survive its agent";
  std::ofstream(jobs_ + "go2") << "";
  ASSERT_EVENTUALLY(
      std::filesystem::exists(cluster_->dir() + "/spool/" + cluster_->Job(*quick)->nodes(0) +
                              "/job" + std::to_string(*quick) + "/exit"),
      5'000);
  for (int i : {0, 1}) ASSERT_TRUE(cluster_->StartAgent(i).ok());
  // Re-adopted: still running, not requeued; the one that ended meanwhile has its exit code.
  ASSERT_EVENTUALLY(cluster_->State(*quick) == v1::FAILED, 10'000);
  EXPECT_EQ(cluster_->Job(*quick)->exit_code(), 7);
  EXPECT_EQ(cluster_->Job(*quick)->requeue_count(), 0u);
  EXPECT_EQ(cluster_->State(*id), v1::RUNNING);
  std::ofstream(jobs_ + "go") << "";
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::FAILED, 10'000);
  auto job = cluster_->Job(*id);
  EXPECT_EQ(job->exit_code(), 3);
  EXPECT_EQ(job->requeue_count(), 0u);
  EXPECT_EQ(Read(jobs_ + "slurm-" + std::to_string(*id) + ".out"), "done\n");
  ASSERT_EVENTUALLY(!cluster_->Job(*id)->completing(), 5'000);
  EXPECT_EQ(cluster_->Node(node)->gpus_allocated(), 0u);
}

// A 2-node step streaming numbered lines while both agents restart twice: its supervisors hold
// the tasks and the client's connections, so every line arrives once and in order per task, the
// exit code is right, and the controller accounts the step once.
TEST_F(ClusterTest, AStepOutlivesRestartsOfItsAgents) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 60\n", Gang(2, 1));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  client::StepOptions o;
  o.shape.set_job_id(*id);
  o.shape.set_ntasks(2);
  o.argv = {"sh", "-c",
            "for i in $(seq 1 80); do echo \"$SLURM_PROCID $i\"; sleep 0.025; done; "
            "exit $((SLURM_PROCID + 4))"};
  o.environment = {"PATH=/usr/bin:/bin"};
  o.work_dir = "/";
  StepRun run;
  std::thread client([&] { run = RunCapturing(*c, o); });
  ::usleep(300'000);
  for (int round = 0; round < 2; ++round) {
    for (int i : {0, 1}) cluster_->DetachAgent(i);
    ::usleep(200'000);
    for (int i : {0, 1}) ASSERT_TRUE(cluster_->StartAgent(i).ok());
    ::usleep(300'000);
  }
  client.join();
  ASSERT_TRUE(run.rc.ok()) << run.rc.status().ToString() << "\n" << run.err;
  EXPECT_EQ(*run.rc, 5);
  std::map<int, std::vector<int>> seen;
  std::istringstream lines(run.out);
  for (int task, n; lines >> task >> n;) seen[task].push_back(n);
  std::vector<int> all(80);
  std::iota(all.begin(), all.end(), 1);
  EXPECT_EQ(seen[0], all) << run.out;
  EXPECT_EQ(seen[1], all) << run.out;
  // The controller heard the step end once, from both nodes, as the tasks ended it.
  ASSERT_EVENTUALLY(
      cluster_->Job(*id)->steps_size() > 0 && cluster_->Job(*id)->steps(0).state() != v1::RUNNING,
      10'000);
  const v1::JobInfo job = *cluster_->Job(*id);
  EXPECT_EQ(job.steps(0).state(), v1::FAILED) << "a task exited 5";
  EXPECT_EQ(job.steps(0).exit_code(), 5);
  EXPECT_EQ(cluster_->State(*id), v1::RUNNING) << "the job itself ran on";
}

TEST_F(ClusterTest, JobsCancelledOrLostWhileTheAgentIsAwayAreSettledWhenItReturns) {
  auto cancelled = cluster_->Submit("#!/bin/sh\nexec sleep 60\n", Gang(1, 8));
  auto lost =
      cluster_->Submit("#!/bin/sh\necho $$ > " + jobs_ + "lost.pid\nexec sleep 60\n", Gang(1, 8));
  ASSERT_TRUE(cancelled.ok() && lost.ok());
  ASSERT_EVENTUALLY(
      cluster_->State(*cancelled) == v1::RUNNING && cluster_->State(*lost) == v1::RUNNING, 10'000);
  ASSERT_EVENTUALLY(!Read(jobs_ + "lost.pid").empty(), 5'000);
  const std::string n1 = cluster_->Job(*cancelled)->nodes(0), n2 = cluster_->Job(*lost)->nodes(0);
  const int a1 = std::stoi(n1.substr(4)) - 1, a2 = std::stoi(n2.substr(4)) - 1;
  cluster_->DetachAgent(a1);
  cluster_->DetachAgent(a2);
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(*cancelled);
  ASSERT_TRUE(c->CancelJob(cancel).ok());
  // The other agent's state file is damaged while it is away.
  const std::string state =
      cluster_->dir() + "/spool/" + n2 + "/job" + std::to_string(*lost) + "/state";
  std::ofstream(state, std::ios::trunc) << "not a protobuf \xff\xff\xff";
  ASSERT_TRUE(cluster_->StartAgent(a1).ok());
  ASSERT_TRUE(cluster_->StartAgent(a2).ok());
  ASSERT_EVENTUALLY(cluster_->State(*cancelled) == v1::CANCELLED, 10'000);
  ASSERT_EVENTUALLY(!cluster_->Job(*cancelled)->completing(), 10'000);
  ASSERT_EVENTUALLY(cluster_->State(*lost) == v1::FAILED, 10'000);
  EXPECT_NE(cluster_->Job(*lost)->reason_detail().find("no longer runs it"), std::string::npos)
      << cluster_->Job(*lost)->reason_detail();
  EXPECT_TRUE(std::filesystem::exists(cluster_->dir() + "/spool/" + n2 + "/job" +
                                      std::to_string(*lost) + ".corrupt"))
      << "the damaged state is kept for the admin";
  ::kill(std::stoi(Read(jobs_ + "lost.pid")), SIGKILL);  // unknown to the agent now
}

TEST_F(ClusterTest, AgentsRefuseCommandsFromAControllerOlderThanOneTheyObeyed) {
  namespace fs = std::filesystem;
  const std::string state = cluster_->dir() + "/state";
  cluster_->StopController();
  fs::copy(state, state + ".old", fs::copy_options::recursive);  // epoch 1
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(cluster_->RestartController().ok());
    ASSERT_TRUE(cluster_->WaitForNodesUp(30'000).ok());
  }
  // Registered is not yet obeyed: each agent records the epoch once its session is up.
  auto obeys = [&](const std::string& node) {
    return Read(cluster_->dir() + "/spool/" + node + "/controller-epoch") == "3\n";
  };
  for (const char* n : {"node1", "node2", "node3", "node4"}) ASSERT_EVENTUALLY(obeys(n), 30'000);
  // The old controller comes back from its old state: epoch 2, older than 3.
  cluster_->StopController();
  fs::remove_all(state);
  fs::rename(state + ".old", state);
  ASSERT_TRUE(cluster_->RestartController().ok());
  ASSERT_TRUE(cluster_->WaitForNodesUp(10'000).ok());
  auto id = cluster_->Submit("#!/bin/sh\ntouch " + jobs_ + "ran\n", Gang(1, 1));
  ASSERT_TRUE(id.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(fs::exists(jobs_ + "ran")) << "a fenced-off controller started a job";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(cluster_->agent(i)->num_jobs(), 0u);
}

TEST_F(ClusterTest, LostAgentRequeuesTheWholeGang) {
  auto id = cluster_->Submit(
      "#!/bin/sh\necho run $SLURM_RESTART_COUNT >> " + jobs_ + "runs\nsleep 60\n", Gang(2, 8));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  auto first = cluster_->Job(*id);
  ASSERT_EQ(first->nodes(1), "node2");
  cluster_->SilenceAgent(1, true);  // node2 stops talking
  ASSERT_EVENTUALLY(cluster_->Node("node2")->state() == v1::NODE_DOWN, 10'000);
  ASSERT_EVENTUALLY(cluster_->Job(*id)->requeue_count() == 1 && cluster_->State(*id) == v1::RUNNING,
                    10'000);
  auto second = cluster_->Job(*id);
  EXPECT_EQ(std::set<std::string>(second->nodes().begin(), second->nodes().end()),
            (std::set<std::string>{"node3", "node4"}));
  ASSERT_EVENTUALLY(Read(jobs_ + "runs") == "run 0\nrun 1\n", 5'000);
  // node2 comes back still holding the old run: it is terminated there, then node2 is usable.
  cluster_->SilenceAgent(1, false);
  ASSERT_EVENTUALLY(cluster_->Node("node2")->state() == v1::NODE_IDLE, 10'000);
  ASSERT_EVENTUALLY(cluster_->agent(1)->num_jobs() == 0, 10'000);
}

TEST_F(ClusterTest, ControllerRestartLosesNoAcknowledgedJob) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) {
    auto id = cluster_->Submit("#!/bin/sh\nsleep 0.5\n", Gang(2, 8));
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  ASSERT_EVENTUALLY(cluster_->State(ids[0]) == v1::RUNNING, 10'000);
  ASSERT_TRUE(cluster_->RestartController().ok());
  for (uint64_t id : ids) {
    ASSERT_EVENTUALLY(cluster_->State(id) == v1::COMPLETED, 20'000) << "job " << id;
  }
  auto next = cluster_->Submit("#!/bin/sh\ntrue\n", Gang(1, 0));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, ids.back() + 1);
}

TEST_F(ClusterTest, JobsFinishedWhileTheControllerWasDownAreReported) {
  // The job waits for the controller to be gone, then ends: its result must not be lost.
  const std::string go = jobs_ + "go", done = jobs_ + "done";
  auto id = cluster_->Submit(
      "#!/bin/sh\nwhile [ ! -e " + go + " ]; do sleep 0.05; done\ntouch " + done + "\nexit 4\n",
      Gang(1, 0));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  cluster_->StopController();
  std::ofstream(go).put('\n');
  ASSERT_EVENTUALLY(std::filesystem::exists(done), 10'000);
  ASSERT_TRUE(cluster_->RestartController().ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::FAILED, 10'000);
  EXPECT_EQ(cluster_->Job(*id)->exit_code(), 4);
}

}  // namespace
}  // namespace muster::testing
