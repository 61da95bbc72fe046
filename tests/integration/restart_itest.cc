// Restarts and losses: agents re-adopting their jobs and steps, a stale controller fenced off,
// lost nodes, controller restarts.
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>

#include "harness/cluster_test.h"
#include "muster/rpc/controller_server.h"

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
// exit code is right, and the controller accounts the step once. The tasks stream until the test
// says stop, so the restarts are sure to fall inside the step.
TEST_F(ClusterTest, AStepOutlivesRestartsOfItsAgents) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 60\n", Gang(2, 1));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  client::StepOptions o;
  o.shape.set_job_id(*id);
  o.shape.set_ntasks(2);
  const std::string stop = jobs_ + "stop-streaming";
  // Each task says it runs (the step is RUNNING at the controller from its creation, before the
  // client has reached the nodes), and prints at least 30 lines whenever the stop comes.
  o.argv = {"sh", "-c",
            "touch " + jobs_ + "started.$SLURM_PROCID; i=0; while [ ! -e " + stop +
                " ] || [ $i -lt 30 ]; do i=$((i+1)); echo \"$SLURM_PROCID $i\"; echo $i > " +
                jobs_ + "tick.$SLURM_PROCID; sleep 0.01; done; exit $((SLURM_PROCID + 4))"};
  o.environment = {"PATH=/usr/bin:/bin"};
  o.work_dir = "/";
  StepRun run;
  std::thread client([&] { run = RunCapturing(*c, o); });
  auto step_running = [&] {
    auto j = cluster_->Job(*id);
    return j.ok() && j->steps_size() == 1 && j->steps(0).state() == v1::RUNNING &&
           j->steps(0).running_nodes_size() == 2;
  };
  auto tasks_started = [&] {
    return std::filesystem::exists(jobs_ + "started.0") &&
           std::filesystem::exists(jobs_ + "started.1");
  };
  bool restarted = WaitFor([&] { return step_running() && tasks_started(); }, 10'000);
  for (int round = 0; round < 2 && restarted; ++round) {
    for (int i : {0, 1}) cluster_->DetachAgent(i);
    // The agents stay away while both tasks print 10 more lines.
    auto tick = [&](int task) {
      const std::string t = Read(jobs_ + "tick." + std::to_string(task));
      return t.empty() ? 0 : std::atoi(t.c_str());
    };
    const int from[] = {tick(0), tick(1)};
    restarted =
        WaitFor([&] { return tick(0) >= from[0] + 10 && tick(1) >= from[1] + 10; }, 10'000) &&
        restarted;
    for (int i : {0, 1}) restarted = cluster_->StartAgent(i).ok() && restarted;
  }
  const bool ran_through = restarted && step_running();
  std::ofstream(stop) << "";
  client.join();
  ASSERT_TRUE(restarted) << "the step did not start, or an agent did not come back";
  EXPECT_TRUE(ran_through) << "the controller must keep the step running across the restarts";
  ASSERT_TRUE(run.rc.ok()) << run.rc.status().ToString() << "\n" << run.err;
  EXPECT_EQ(*run.rc, 5);
  std::map<int, std::vector<int>> seen;
  std::istringstream lines(run.out);
  for (int task, n; lines >> task >> n;) seen[task].push_back(n);
  for (int task : {0, 1}) {
    std::vector<int> expected(seen[task].size());
    std::iota(expected.begin(), expected.end(), 1);
    EXPECT_GT(seen[task].size(), 20u) << "task " << task;
    EXPECT_EQ(seen[task], expected) << "task " << task << ": each line once, in order\n" << run.out;
  }
  // The controller heard the step end once, from both nodes, as the tasks ended it.
  ASSERT_EVENTUALLY(cluster_->Job(*id)->steps(0).state() != v1::RUNNING, 10'000);
  const v1::JobInfo job = *cluster_->Job(*id);
  EXPECT_EQ(job.steps(0).state(), v1::FAILED) << "a task exited 5";
  EXPECT_EQ(job.steps(0).exit_code(), 5);
  EXPECT_EQ(cluster_->State(*id), v1::RUNNING) << "the job itself ran on";
}

// Reaps this process's muster-stepd children that have exited; returns how many still run.
int ReapExitedStepSupervisors() {
  int running = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const size_t close = stat.rfind(')');
    if (stat.find("(muster-stepd)") == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != ::getpid()) continue;
    if (state == 'Z') {
      ::waitpid(std::stoi(name), nullptr, 0);
    } else {
      ++running;
    }
  }
  return running;
}

// A step that ends while its agents are away: its supervisors record the end, the client hears
// it at once, and the controller gets it from the returning agents (not a loss).
TEST_F(ClusterTest, AStepThatEndsWhileItsAgentsAreAwayIsAccountedWhenTheyReturn) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 60\n", Gang(2, 1));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  client::StepOptions o;
  o.shape.set_job_id(*id);
  o.shape.set_ntasks(2);
  const std::string go = jobs_ + "finish";
  o.argv = {"sh", "-c",
            "touch " + jobs_ + "started.$SLURM_PROCID; while [ ! -e " + go +
                " ]; do sleep 0.01; done; exit 3"};
  o.environment = {"PATH=/usr/bin:/bin"};
  o.work_dir = "/";
  StepRun run;
  std::thread client([&] { run = RunCapturing(*c, o); });
  const bool started = WaitFor(
      [&] {
        auto j = cluster_->Job(*id);
        return j.ok() && j->steps_size() == 1 && j->steps(0).running_nodes_size() == 2 &&
               std::filesystem::exists(jobs_ + "started.0") &&
               std::filesystem::exists(jobs_ + "started.1");
      },
      10'000);
  for (int i : {0, 1}) cluster_->DetachAgent(i);
  std::ofstream(go) << "";
  client.join();  // the supervisors answer the client with no agent running
  ASSERT_TRUE(started);
  // Gone for good before the agents return (on a node init reaps them; here they are this
  // process's children): the new agents find only the records they left.
  ASSERT_EVENTUALLY(ReapExitedStepSupervisors() == 0, 10'000);
  ASSERT_TRUE(run.rc.ok()) << run.rc.status().ToString() << "\n" << run.err;
  EXPECT_EQ(*run.rc, 3);
  EXPECT_EQ(cluster_->Job(*id)->steps(0).state(), v1::RUNNING) << "nobody told the controller yet";
  for (int i : {0, 1}) ASSERT_TRUE(cluster_->StartAgent(i).ok());
  ASSERT_EVENTUALLY(cluster_->Job(*id)->steps(0).state() != v1::RUNNING, 10'000);
  const v1::JobInfo job = *cluster_->Job(*id);
  EXPECT_EQ(job.steps(0).state(), v1::FAILED) << "ended with exit 3, not lost with the agents";
  EXPECT_EQ(job.steps(0).exit_code(), 3);
  EXPECT_FALSE(job.steps(0).node_lost());
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
  auto refused = [&] {
    uint64_t n = 0;
    for (int i = 0; i < 4; ++i) n += cluster_->agent(i)->refused_commands();
    return n;
  };
  const uint64_t refused_before = refused();
  auto id = cluster_->Submit("#!/bin/sh\ntouch " + jobs_ + "ran\n", Gang(1, 1));
  ASSERT_TRUE(id.ok());
  // The stale controller places the job and sends its launch, which its node refuses.
  ASSERT_EVENTUALLY(refused() > refused_before, 10'000);
  EXPECT_FALSE(fs::exists(jobs_ + "ran")) << "a fenced-off controller started a job";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(cluster_->agent(i)->num_jobs(), 0u);
}

// A backup restored the supported way (musterctld --after-restore, then a start): its epoch is
// past the agents' and its job ids past those issued since the copy.
TEST_F(ClusterTest, ARestoredBackupIsObeyedAndReusesNoJobId) {
  namespace fs = std::filesystem;
  const std::string state = cluster_->dir() + "/state";
  cluster_->StopController();
  fs::copy(state, state + ".backup", fs::copy_options::recursive);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(cluster_->RestartController().ok());
    ASSERT_TRUE(cluster_->WaitForNodesUp(30'000).ok());
  }
  auto after = cluster_->Submit("#!/bin/sh\ntrue\n", Gang(1, 1));  // after the backup
  ASSERT_TRUE(after.ok());
  ASSERT_EVENTUALLY(cluster_->State(*after) == v1::COMPLETED, 10'000);
  // The disk is lost; the backup comes back, prepared, and the controller starts on it.
  cluster_->StopController();
  fs::remove_all(state);
  fs::rename(state + ".backup", state);
  const std::string said = cluster_->dir() + "/after-restore.txt";
  std::FILE* out = std::fopen(said.c_str(), "w");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(rpc::AfterRestoreCommand(cluster_->config(), 1000, out), 0);
  std::fclose(out);
  EXPECT_NE(Read(said).find("epoch 1 -> 1000001"), std::string::npos) << Read(said);
  ASSERT_TRUE(cluster_->RestartController().ok());
  ASSERT_TRUE(cluster_->WaitForNodesUp(10'000).ok());
  uint64_t refused = 0;
  for (int i = 0; i < 4; ++i) refused += cluster_->agent(i)->refused_commands();
  auto id = cluster_->Submit("#!/bin/sh\ntouch " + jobs_ + "ran\n", Gang(1, 1));
  ASSERT_TRUE(id.ok());
  EXPECT_GE(*id, *after + 1000) << "ids issued after the backup are not handed out again";
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::COMPLETED, 10'000);
  EXPECT_TRUE(fs::exists(jobs_ + "ran")) << "the agents obey the restored controller";
  uint64_t refused_now = 0;
  for (int i = 0; i < 4; ++i) refused_now += cluster_->agent(i)->refused_commands();
  EXPECT_EQ(refused_now, refused);
  // A running controller's store is not touched.
  out = std::fopen(said.c_str(), "w");
  EXPECT_EQ(rpc::AfterRestoreCommand(cluster_->config(), 1000, out), 1);
  std::fclose(out);
}

TEST_F(ClusterTest, LostAgentRequeuesTheWholeGang) {
  auto id = cluster_->Submit(
      "#!/bin/sh\necho run $SLURM_RESTART_COUNT >> " + jobs_ + "runs\nsleep 60\n", Gang(2, 8));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  auto first = cluster_->Job(*id);
  ASSERT_EQ(first->nodes(1), "node2");
  // RUNNING is the controller's word once it sent the launch: node2 must have it before it is
  // cut off, or it has nothing to run on (1 run in 15 under load).
  ASSERT_EVENTUALLY(cluster_->agent(1)->num_jobs() == 1, 5'000);
  cluster_->SilenceAgent(1, true);  // node2 stops talking
  ASSERT_EVENTUALLY(cluster_->Node("node2")->state() == v1::NODE_DOWN, 10'000);
  ASSERT_EVENTUALLY(cluster_->Job(*id)->requeue_count() == 1, 10'000);
  // node3 and node4 are free, but node2 may still run the old run: the gang waits for it, also
  // through the pass that starts (and ends) a small job after it.
  auto requeued = cluster_->Job(*id);
  ASSERT_TRUE(requeued.ok());
  ASSERT_EQ(requeued->unconfirmed_nodes_size(), 1);
  EXPECT_EQ(requeued->unconfirmed_nodes(0), "node2");
  auto probe = cluster_->Submit("#!/bin/sh\ntrue\n", Gang(1, 0));
  ASSERT_TRUE(probe.ok());
  ASSERT_EVENTUALLY(cluster_->State(*probe) == v1::COMPLETED, 10'000);
  EXPECT_EQ(cluster_->State(*id), v1::PENDING);
  EXPECT_EQ(Read(jobs_ + "runs"), "run 0\n");
  EXPECT_EQ(cluster_->agent(1)->num_jobs(), 1u) << "the cut-off node runs the old run on";
  // node2 comes back still holding the old run: it is terminated there, then the gang runs again.
  cluster_->SilenceAgent(1, false);
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  ASSERT_EVENTUALLY(Read(jobs_ + "runs") == "run 0\nrun 1\n", 5'000);
  EXPECT_EQ(cluster_->Job(*id)->requeue_count(), 1u);
}

TEST_F(ClusterTest, ANoKillJobGoesOnWithoutItsLostNode) {
  const std::string go = jobs_ + "go";
  v1::JobSpec spec = Gang(2, 8);
  spec.set_no_kill(true);
  auto id = cluster_->Submit("#!/bin/sh\necho run $SLURM_RESTART_COUNT >> " + jobs_ +
                                 "runs\nwhile [ ! -e " + go + " ]; do sleep 0.05; done\n",
                             spec);
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  ASSERT_EQ(cluster_->Job(*id)->nodes(1), "node2");
  ASSERT_EVENTUALLY(cluster_->agent(1)->num_jobs() == 1, 5'000);
  cluster_->SilenceAgent(1, true);  // node2 stops talking
  ASSERT_EVENTUALLY(cluster_->Node("node2")->state() == v1::NODE_DOWN, 10'000);
  ASSERT_EVENTUALLY(cluster_->Job(*id)->nodes_size() == 1, 5'000);
  auto j = cluster_->Job(*id);
  EXPECT_EQ(j->state(), v1::RUNNING);
  EXPECT_EQ(j->nodes(0), "node1");
  EXPECT_EQ(j->requeue_count(), 0u);
  EXPECT_EQ(cluster_->agent(0)->num_jobs(), 1u) << "the batch script runs on";
  // node2 comes back still running its part, which no longer holds anything there: ended.
  cluster_->SilenceAgent(1, false);
  ASSERT_EVENTUALLY(cluster_->agent(1)->num_jobs() == 0, 10'000);
  EXPECT_EQ(cluster_->State(*id), v1::RUNNING);
  std::ofstream(go).put('\n');
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::COMPLETED, 10'000);
  EXPECT_EQ(Read(jobs_ + "runs"), "run 0\n") << "never requeued";
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
