// The in-process cluster: a real controller and 4 real agents; jobs are real processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "harness/in_process_cluster.h"
#include "harness/test_util.h"
#include "muster/client/step_client.h"
#include "muster/common/procfs.h"

namespace muster::testing {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

v1::JobSpec Gang(uint32_t nodes, uint32_t gpus_per_node) {
  v1::JobSpec s;
  s.set_nodes(nodes);
  s.set_gpus_per_node(gpus_per_node);
  s.add_environment("PATH=/usr/bin:/bin");
  return s;
}

bool ProcessGone(const std::string& pid_file) {
  std::string text = Read(pid_file);
  if (text.empty()) return false;
  // A zombie (its reaper is elsewhere) is gone too.
  return !ProcessAlive(std::stoi(text));
}

// Runs a step, returning (exit code, stdout, stderr).
struct StepRun {
  Result<int> rc = 0;
  std::string out, err;
};
StepRun RunCapturing(client::ControllerClient& c, const client::StepOptions& o) {
  char* out_buf = nullptr;
  char* err_buf = nullptr;
  size_t out_len = 0, err_len = 0;
  FILE* out = open_memstream(&out_buf, &out_len);
  FILE* err = open_memstream(&err_buf, &err_len);
  StepRun r;
  r.rc = client::RunStep(c, o, out, err);
  std::fclose(out);
  std::fclose(err);
  r.out.assign(out_buf, out_len);
  r.err.assign(err_buf, err_len);
  free(out_buf);
  free(err_buf);
  return r;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = InProcessCluster::Start();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    jobs_ = cluster_->dir() + "/jobs/";
  }
  std::unique_ptr<InProcessCluster> cluster_;
  std::string jobs_;
};

TEST_F(ClusterTest, GangJobRunsOnTwoNodesWithItsGpusAndSlurmEnvironment) {
  auto id = cluster_->Submit("#!/bin/sh\nenv > " + jobs_ + "env.$SLURMD_NODENAME\necho hello\n",
                             Gang(2, 8));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::COMPLETED, 10'000);
  auto job = cluster_->Job(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->nodes_size(), 2);
  EXPECT_EQ(job->exit_code(), 0);
  EXPECT_EQ(Read(jobs_ + "slurm-" + std::to_string(*id) + ".out"), "hello\n");
  std::string env = Read(jobs_ + "env.node1");
  EXPECT_NE(env.find("SLURM_JOB_ID=" + std::to_string(*id) + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find("SLURM_JOB_NODELIST=node[1-2]\n"), std::string::npos) << env;
  EXPECT_NE(env.find("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n"), std::string::npos);
  EXPECT_NE(env.find("SLURM_JOB_NUM_NODES=2\n"), std::string::npos);
  ASSERT_EVENTUALLY(!cluster_->Job(*id)->completing(), 5'000);
  auto n = cluster_->Node("node1");
  EXPECT_EQ(n->gpus_allocated(), 0u);
}

TEST(ClusterHardwareTest, AgentsReportTheHwlocLayoutTheyFound) {
  InProcessClusterOptions o;
  o.nodes = 1;
  o.topology_xml =
      std::string(MUSTER_SOURCE_DIR) + "/tests/data/hwloc/xeon-2socket_1gpu_mlx5-ib_wholeio.v2.xml";
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto n = (*c)->Node("node1");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->topology_source(), "hwloc-xml:" + o.topology_xml);
  EXPECT_EQ(n->packages(), 2u);
  EXPECT_EQ(n->threads(), 32u);
  ASSERT_EQ(n->numa_nodes_size(), 2);
  EXPECT_EQ(n->numa_nodes(1).cpus_size(), 16);
  ASSERT_EQ(n->hcas_size(), 1);
  EXPECT_EQ(n->hcas(0).name(), "mlx5_0");
  EXPECT_EQ(n->hcas(0).numa_node(), 1);
  EXPECT_EQ(n->pci_gpus_size(), 3);
  // An unreadable topology file stops the agent with the file named.
  o.topology_xml = "/nonexistent/topo.xml";
  auto bad = InProcessCluster::Start(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/nonexistent/topo.xml"), std::string::npos)
      << bad.status().ToString();
}

TEST_F(ClusterTest, InjectedGpuFaultDrainsTheNodeAndRequeuesItsJob) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 30\n", Gang(1, 8));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  const std::string node = cluster_->Job(*id)->nodes(0);
  const std::string faults = cluster_->dir() + "/spool/" + node + "/gpu-faults";
  std::ofstream(faults) << "5 xid 13\n3 xid 79\n";
  ASSERT_EVENTUALLY(cluster_->Node(node)->drain(), 10'000);
  auto n = cluster_->Node(node);
  EXPECT_EQ(n->reason(), "gpu3: XID 79 (fallen off the bus)");
  EXPECT_EQ(n->drained_by(), "gpu_health");
  EXPECT_EQ(n->gpu_devices(3).health(), "XID 79 (fallen off the bus)");
  EXPECT_EQ(n->gpu_devices(5).health(), "") << "XID 13 is the program's fault";
  // The job lost a GPU: requeued, and it runs again on another node.
  ASSERT_EVENTUALLY(cluster_->Job(*id)->requeue_count() == 1 && cluster_->State(*id) == v1::RUNNING,
                    10'000);
  EXPECT_NE(cluster_->Job(*id)->nodes(0), node);
  // The fault cleared (the GPU was reset): the node takes work again by itself.
  std::filesystem::remove(faults);
  ASSERT_EVENTUALLY(!cluster_->Node(node)->drain(), 10'000);
}

TEST(ClusterHealthTest, HealthCheckProgramDrainsAndResumesItsNode) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("muster-hc-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string check = dir + "/check.sh";
  std::ofstream(check)
      << "#!/bin/sh\n[ -n \"$HOME$SLURM_JOB_ID\" ] && { echo leaked env; exit 1; }\n"
      << "if [ -e " << dir << "/sick.$MUSTER_NODE ]; then\n"
      << "  echo; echo 'ib0 down'; echo more; exit 1\nfi\n";
  std::filesystem::permissions(check, std::filesystem::perms::owner_all);
  InProcessClusterOptions o;
  o.nodes = 2;
  o.health_check_program = check;
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::ofstream(dir + "/sick.node2") << "";
  ASSERT_EVENTUALLY((*c)->Node("node2")->drain(), 10'000);
  EXPECT_EQ((*c)->Node("node2")->reason(), "ib0 down") << "the first line with text";
  EXPECT_EQ((*c)->Node("node2")->drained_by(), "health_check");
  EXPECT_FALSE((*c)->Node("node1")->drain());
  std::filesystem::remove(dir + "/sick.node2");
  ASSERT_EVENTUALLY(!(*c)->Node("node2")->drain(), 10'000);
  std::filesystem::remove_all(dir);
}

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

TEST(ClusterPrologTest, PrologAndEpilogRunAsTheAdminsAndTheirFailuresDrain) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("muster-pe-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto script = [&](const std::string& name, const std::string& body) {
    std::ofstream(dir + "/" + name) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(dir + "/" + name, std::filesystem::perms::owner_all);
    return dir + "/" + name;
  };
  InProcessClusterOptions o;
  o.nodes = 2;
  o.prolog = script("prolog", "env > " + dir + "/prolog.$SLURMD_NODENAME.$SLURM_JOB_ID\n" +
                                  "[ -e " + dir + "/bad-prolog.$SLURMD_NODENAME ] && " +
                                  "{ echo; echo 'no scratch space'; exit 1; }\nexit 0\n");
  o.epilog = script("epilog", "echo done > " + dir + "/epilog.$SLURMD_NODENAME.$SLURM_JOB_ID\n" +
                                  "[ -e " + dir +
                                  "/bad-epilog ] && { echo 'GPU memory not "
                                  "freed'; exit 2; }\nexit 0\n");
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  // A job on both nodes: the prolog ran on each with the job's variables and none of the user's.
  v1::JobSpec both = Gang(2, 1);
  both.add_environment("SECRET_OF_THE_USER=1");
  auto id = cluster.Submit("#!/bin/sh\ntrue\n", both);
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster.State(*id) == v1::COMPLETED, 10'000);
  const std::string tag = "." + std::to_string(*id);
  ASSERT_EVENTUALLY(std::filesystem::exists(dir + "/epilog.node1" + tag) &&
                        std::filesystem::exists(dir + "/epilog.node2" + tag),
                    10'000);
  std::string env = Read(dir + "/prolog.node2" + tag);
  EXPECT_NE(env.find("SLURM_JOB_ID=" + std::to_string(*id) + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find("SLURM_JOB_NODELIST=node[1-2]\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("SECRET_OF_THE_USER"), std::string::npos) << env;
  // Both nodes free again (their epilogs done and reported), so the next job goes to node1.
  ASSERT_EVENTUALLY(!cluster.Job(*id)->completing(), 10'000);
  // A failed prolog drains its node with the script's first line and requeues the job.
  std::ofstream(dir + "/bad-prolog.node1") << "";
  auto requeued = cluster.Submit("#!/bin/sh\ntrue\n", Gang(1, 1));
  ASSERT_TRUE(requeued.ok());
  ASSERT_EVENTUALLY(cluster.State(*requeued) == v1::COMPLETED, 10'000);
  auto n1 = cluster.Node("node1");
  EXPECT_TRUE(n1->drain());
  EXPECT_EQ(n1->reason(), "prolog failed: no scratch space");
  EXPECT_EQ(cluster.Job(*requeued)->requeue_count(), 1u);
  EXPECT_EQ(cluster.Job(*requeued)->nodes(0), "node2");
  // A failed epilog drains its node; the job's result stands.
  ASSERT_EVENTUALLY(!cluster.Job(*requeued)->completing(), 10'000);  // its epilog has run
  std::ofstream(dir + "/bad-epilog") << "";
  auto last = cluster.Submit("#!/bin/sh\nexit 0\n", Gang(1, 1));
  ASSERT_TRUE(last.ok());
  ASSERT_EVENTUALLY(cluster.Node("node2")->drain(), 10'000);
  EXPECT_EQ(cluster.Node("node2")->reason(),
            "epilog failed after job " + std::to_string(*last) + ": GPU memory not freed");
  EXPECT_EQ(cluster.State(*last), v1::COMPLETED);
  std::filesystem::remove_all(dir);
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

TEST_F(ClusterTest, WhatAStepLeavesBehindEndsWithTheStepNotTheJob) {
  if (cluster_->cgroup_root().empty()) GTEST_SKIP() << "needs a writable cgroup v2 hierarchy";
  auto id = cluster_->Submit("#!/bin/sh\nsleep 30\n", Gang(1, 1));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  client::StepOptions o;
  o.shape.set_job_id(*id);
  // The daemon keeps the step's stdout open: the step still ends when its task does.
  o.argv = {"sh", "-c", "setsid sleep 60 & echo $! > " + jobs_ + "step-daemon; exit 5"};
  o.environment = {"PATH=/usr/bin:/bin"};
  o.work_dir = "/";
  FILE* null = std::fopen("/dev/null", "w");
  auto rc = client::RunStep(*c, o, null, null);
  std::fclose(null);
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(*rc, 5);
  ASSERT_EVENTUALLY(ProcessGone(jobs_ + "step-daemon"), 5'000);
  EXPECT_EQ(cluster_->State(*id), v1::RUNNING) << "the job goes on";
}

TEST(ClusterPrologTest, JobCancelledWhileItsPrologFailsStillDrainsAndFrees) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("muster-pc-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/prolog") << "#!/bin/sh\nsleep 0.5\nexit 1\n";
  std::filesystem::permissions(dir + "/prolog", std::filesystem::perms::owner_all);
  InProcessClusterOptions o;
  o.nodes = 1;
  o.prolog = dir + "/prolog";
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  auto id = cluster.Submit("#!/bin/sh\ntrue\n", Gang(1, 1));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster.State(*id) == v1::RUNNING, 10'000);
  auto client = cluster.Client();
  v1::CancelJobRequest r;
  r.add_job_ids(*id);
  ASSERT_TRUE(client->CancelJob(r).ok());
  ASSERT_EVENTUALLY(cluster.State(*id) == v1::CANCELLED && !cluster.Job(*id)->completing(), 10'000);
  ASSERT_EVENTUALLY(cluster.Node("node1")->drain(), 10'000);
  EXPECT_EQ(cluster.Node("node1")->reason(), "prolog exited with code 1");
  EXPECT_EQ(cluster.Node("node1")->cpus_allocated(), 0u);
  std::filesystem::remove_all(dir);
}

TEST_F(ClusterTest, StepRunsOneTaskPerSlotOnEveryNode) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 30\n", [] {
    v1::JobSpec s = Gang(2, 4);
    s.set_ntasks_per_node(2);
    return s;
  }());
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  client::StepOptions o;
  o.shape.set_job_id(*id);
  o.argv = {
      "sh", "-c",
      "echo \"$SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES\"; "
      "echo err$SLURM_PROCID >&2; exit $SLURM_PROCID"};
  o.environment = {"PATH=/usr/bin:/bin"};
  o.work_dir = "/";
  StepRun run = RunCapturing(*c, o);
  const std::string& stdout_text = run.out;
  const std::string& stderr_text = run.err;
  ASSERT_TRUE(run.rc.ok()) << run.rc.status().ToString();
  EXPECT_EQ(*run.rc, 3) << "the step's exit code is the highest task exit code";
  std::multiset<std::string> lines;
  std::istringstream ss(stdout_text);
  for (std::string l; std::getline(ss, l);) lines.insert(l);
  EXPECT_EQ(lines, (std::multiset<std::string>{"0 0 0 node1 0,1,2,3", "1 1 0 node1 0,1,2,3",
                                               "2 0 1 node2 0,1,2,3", "3 1 1 node2 0,1,2,3"}))
      << stdout_text;
  EXPECT_NE(stderr_text.find("err2\n"), std::string::npos);
  // A wrong credential is refused by the agent.
  ASSERT_TRUE(c->CancelJob([&] {
                 v1::CancelJobRequest r;
                 r.add_job_ids(*id);
                 return r;
               }())
                  .ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::CANCELLED, 10'000);
}

TEST_F(ClusterTest, DrainBlocksPlacementUntilResumed) {
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  v1::UpdateNodeRequest drain;
  drain.set_nodes("node[1-3]");
  drain.set_action(v1::UpdateNodeRequest::DRAIN);
  drain.set_reason("test");
  ASSERT_TRUE(c->UpdateNode(drain).ok());
  auto id = cluster_->Submit("#!/bin/sh\ntrue\n", Gang(2, 8));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->Job(*id)->reason() == "ReqNodeNotAvail", 5'000);
  EXPECT_EQ(cluster_->State(*id), v1::PENDING);
  v1::UpdateNodeRequest resume;
  resume.set_nodes("node1");
  resume.set_action(v1::UpdateNodeRequest::RESUME);
  ASSERT_TRUE(c->UpdateNode(resume).ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::COMPLETED, 10'000);
  auto job = cluster_->Job(*id);
  EXPECT_EQ(std::set<std::string>(job->nodes().begin(), job->nodes().end()),
            (std::set<std::string>{"node1", "node4"}));
}

TEST_F(ClusterTest, CancelKillsTheWholeProcessTree) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 60 &\necho $! > " + jobs_ + "child.pid\necho $$ > " +
                                 jobs_ + "batch.pid\nwait\n",
                             Gang(1, 1));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(!Read(jobs_ + "child.pid").empty() && !Read(jobs_ + "batch.pid").empty(),
                    10'000);
  auto c = cluster_->Client();
  v1::CancelJobRequest r;
  r.add_job_ids(*id);
  auto resp = c->CancelJob(r);
  ASSERT_TRUE(resp.ok());
  ASSERT_EQ(resp->results(0).code(), 0);
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::CANCELLED, 10'000);
  ASSERT_EVENTUALLY(!cluster_->Job(*id)->completing(), 10'000);
  EXPECT_TRUE(ProcessGone(jobs_ + "batch.pid"));
  EXPECT_TRUE(ProcessGone(jobs_ + "child.pid"));
  EXPECT_EQ(cluster_->Job(*id)->exit_signal(), SIGTERM);
}

// A job's process that daemonizes (setsid, double fork, stdio closed) is still the job's: cancel
// kills it, and so does the script's normal end. With cgroups, and without (keeper as subreaper).
void DaemonizedProcessesEndWithTheJob(bool cgroups) {
  InProcessClusterOptions o;
  o.nodes = 1;
  o.cgroups = cgroups;
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  const std::string jobs = cluster.dir() + "/jobs/";
  auto daemonize = [&](const std::string& name) {
    return "setsid sh -c 'sleep 60 </dev/null >/dev/null 2>&1 & echo $! > " + jobs + name +
           "' </dev/null >/dev/null 2>&1 &\n";
  };
  auto cancelled = cluster.Submit("#!/bin/sh\n" + daemonize("d1.pid") + "sleep 60\n", Gang(1, 1));
  auto ended = cluster.Submit("#!/bin/sh\n" + daemonize("d2.pid") + "while [ ! -s " + jobs +
                                  "d2.pid ]; do sleep 0.05; done\nexit 0\n",
                              Gang(1, 1));
  ASSERT_TRUE(cancelled.ok() && ended.ok());
  ASSERT_EVENTUALLY(!Read(jobs + "d1.pid").empty() && !Read(jobs + "d2.pid").empty(), 10'000);
  auto n = cluster.Node("node1");
  if (cgroups && !cluster.cgroup_root().empty()) {
    EXPECT_EQ(n->isolation().rfind("cgroup v2 at " + cluster.cgroup_root() + "/node1", 0), 0u)
        << n->isolation();
    // The daemon is in the job's cgroup, though it left the job's session.
    std::string procs =
        Read(cluster.cgroup_root() + "/node1/job_" + std::to_string(*cancelled) + "/cgroup.procs");
    EXPECT_NE(procs.find(Read(jobs + "d1.pid").substr(0, Read(jobs + "d1.pid").size() - 1)),
              std::string::npos)
        << procs;
  } else {
    EXPECT_EQ(n->isolation().rfind("none: ", 0), 0u) << n->isolation();
  }
  ASSERT_EVENTUALLY(cluster.State(*ended) == v1::COMPLETED, 10'000);
  ASSERT_EVENTUALLY(ProcessGone(jobs + "d2.pid"), 5'000) << "left behind by a finished job";
  auto client = cluster.Client();
  v1::CancelJobRequest r;
  r.add_job_ids(*cancelled);
  ASSERT_TRUE(client->CancelJob(r).ok());
  ASSERT_EVENTUALLY(cluster.State(*cancelled) == v1::CANCELLED, 10'000);
  ASSERT_EVENTUALLY(!cluster.Job(*cancelled)->completing(), 10'000);
  EXPECT_TRUE(ProcessGone(jobs + "d1.pid")) << "escaped with setsid and survived the cancel";
  if (!cluster.cgroup_root().empty()) {
    EXPECT_FALSE(
        std::filesystem::exists(cluster.cgroup_root() + "/node1/job_" + std::to_string(*cancelled)))
        << "the job's cgroup is removed once empty";
  }
}

TEST(ClusterIsolationTest, DaemonizedProcessesEndWithTheJobInCgroups) {
  DaemonizedProcessesEndWithTheJob(true);
}

TEST(ClusterIsolationTest, DaemonizedProcessesEndWithTheJobWithoutCgroups) {
  DaemonizedProcessesEndWithTheJob(false);
}

// Device files of GPUs the job was not given cannot be opened. Fake /dev/nvidiaN nodes (major
// 195) without a driver answer ENXIO when the filter lets the open through, EPERM when it stops it.
TEST(ClusterIsolationTest, OnlyTheJobsOwnGpuDeviceFilesOpen) {
  InProcessClusterOptions o;
  o.nodes = 1;
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  auto n = cluster.Node("node1");
  if (n->isolation().find("GPU device files open only") == std::string::npos) {
    GTEST_SKIP() << "no BPF device filter here: " << n->isolation();
  }
  const std::string dev = cluster.dir() + "/dev/";
  std::filesystem::create_directories(dev);
  for (int minor : {0, 1, 2, 255}) {
    std::string path = dev + "nvidia" + std::to_string(minor);
    ASSERT_EQ(::mknod(path.c_str(), S_IFCHR | 0666, makedev(195, minor)), 0) << path;
  }
  const std::string out = cluster.dir() + "/jobs/devs";
  auto id = cluster.Submit("#!/bin/sh\necho $CUDA_VISIBLE_DEVICES > " + out + ".gpus\n" +
                               "for m in 0 1 2 255; do printf \"$m \" >> " + out + "; cat " + dev +
                               "nvidia$m 2>&1 | sed 's/.*: //' >> " + out + "; done\n",
                           Gang(1, 2));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster.State(*id) == v1::COMPLETED, 10'000);
  // Its own two GPUs open (no driver behind them: ENXIO); the other one is refused (EPERM);
  // 255 is nvidiactl, open to every job. The fixture's minor numbers are the GPU indices.
  std::string gpus = Read(out + ".gpus");
  ASSERT_EQ(gpus.size(), 4u) << gpus;  // "a,b\n"
  std::string want;
  for (char minor : {'0', '1', '2'}) {
    bool mine = gpus[0] == minor || gpus[2] == minor;
    want += std::string(1, minor) +
            (mine ? " No such device or address\n" : " Operation not permitted\n");
  }
  want += "255 No such device or address\n";
  EXPECT_EQ(Read(out), want);
}

TEST_F(ClusterTest, TimeLimitEndsTheJobAsTimeout) {
  v1::JobSpec s = Gang(1, 0);
  s.set_time_limit_ms(700);
  // The script ignores SIGTERM, so only SIGKILL after the grace period stops it.
  auto id =
      cluster_->Submit("#!/bin/sh\ntrap '' TERM\necho $$ > " + jobs_ + "t.pid\nsleep 60\n", s);
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::TIMEOUT, 10'000);
  auto job = cluster_->Job(*id);
  EXPECT_EQ(job->reason(), "TimeLimit");
  EXPECT_EQ(job->exit_signal(), SIGKILL);
  EXPECT_GE(job->end_time_ms() - job->start_time_ms(), 700 + 400);
  EXPECT_TRUE(ProcessGone(jobs_ + "t.pid"));
}

TEST_F(ClusterTest, NonZeroExitFailsAndLaunchErrorsAreReported) {
  auto failed = cluster_->Submit("#!/bin/sh\nexit 7\n", Gang(1, 0));
  ASSERT_TRUE(failed.ok());
  ASSERT_EVENTUALLY(cluster_->State(*failed) == v1::FAILED, 10'000);
  EXPECT_EQ(cluster_->Job(*failed)->exit_code(), 7);
  v1::JobSpec s = Gang(1, 0);
  s.set_stdout_pattern("/nonexistent/dir/out");
  auto bad = cluster_->Submit("#!/bin/sh\ntrue\n", s);
  ASSERT_TRUE(bad.ok());
  ASSERT_EVENTUALLY(cluster_->State(*bad) == v1::FAILED, 10'000);
  auto job = cluster_->Job(*bad);
  EXPECT_EQ(job->reason(), "JobLaunchFailure");
  EXPECT_NE(job->reason_detail().find("cannot open output file /nonexistent/dir/out"),
            std::string::npos)
      << job->reason_detail();
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

namespace muster::testing {
namespace {

TEST_F(ClusterTest, AnAllocationRunsStepsAndEndsWithItsClient) {
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = Gang(2, 1);
  spec.set_ntasks(4);
  spec.set_work_dir("/");
  client::AllocateOptions ao;
  ao.quiet = true;
  auto job = client::Allocate(*c, spec, ao, stderr);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_TRUE(job->interactive());
  client::StepOptions o;
  o.shape.set_job_id(job->id());
  o.shape.set_name("env");
  o.argv = {"sh", "-c", "echo $SLURM_PROCID $SLURM_STEP_ID $SLURM_STEP_NUM_TASKS $SLURM_NTASKS"};
  o.environment = {"PATH=/usr/bin:/bin"};
  o.work_dir = "/";
  StepRun r = RunCapturing(*c, o);
  ASSERT_TRUE(r.rc.ok()) << r.rc.status().ToString();
  EXPECT_EQ(*r.rc, 0);
  std::multiset<std::string> lines;
  std::istringstream ss(r.out);
  for (std::string l; std::getline(ss, l);) lines.insert(l);
  EXPECT_EQ(lines, (std::multiset<std::string>{"0 0 4 4", "1 0 4 4", "2 0 4 4", "3 0 4 4"}))
      << r.out;
  // A second step with a failing task: FAILED, with the task's exit code.
  o.shape.set_ntasks(1);
  o.argv = {"sh", "-c", "exit 6"};
  r = RunCapturing(*c, o);
  ASSERT_TRUE(r.rc.ok());
  EXPECT_EQ(*r.rc, 6);
  EXPECT_NE(r.err.find("task 0: Exited with exit code 6"), std::string::npos) << r.err;
  ASSERT_TRUE(c->ReleaseAllocation(job->id(), 0, 0).ok());
  ASSERT_EVENTUALLY(
      cluster_->State(job->id()) == v1::COMPLETED && !cluster_->Job(job->id())->completing(),
      10'000);
  auto done = cluster_->Job(job->id());
  ASSERT_EQ(done->steps_size(), 2);
  EXPECT_EQ(done->steps(0).state(), v1::COMPLETED);
  EXPECT_EQ(done->steps(0).name(), "env");
  EXPECT_EQ(done->steps(0).ntasks(), 4u);
  EXPECT_EQ(done->steps(1).state(), v1::FAILED);
  EXPECT_EQ(done->steps(1).exit_code(), 6);

  // A client that goes away (its process died) takes its allocation with it.
  std::optional<client::ControllerClient> dying;
  {
    auto d = cluster_->Client();
    ASSERT_TRUE(d.ok());
    dying.emplace(std::move(*d));
  }
  v1::JobSpec one = Gang(1, 1);
  one.set_work_dir("/");
  auto held = client::Allocate(*dying, one, ao, stderr);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  dying.reset();
  ASSERT_EVENTUALLY(cluster_->State(held->id()) == v1::CANCELLED, 10'000);
  EXPECT_EQ(cluster_->Job(held->id())->reason_detail(), "its srun/salloc went away");
}

TEST_F(ClusterTest, StepsWithTheirOwnGpusRunSideBySideInsideABatchJob) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 30\n", [] {
    v1::JobSpec s = Gang(1, 4);
    s.set_ntasks(4);
    return s;
  }());
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  // Four one-GPU steps at once, each holding until all four have started.
  std::vector<std::thread> threads;
  std::vector<StepRun> runs(4);
  const std::string barrier = jobs_ + "barrier";
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto c = cluster_->Client();
      if (!c.ok()) return;
      client::StepOptions o;
      o.shape.set_job_id(*id);
      o.shape.set_ntasks(1);
      o.shape.set_exact(true);
      o.shape.set_gpus_per_task(1);
      o.argv = {"sh", "-c",
                "echo $CUDA_VISIBLE_DEVICES >> " + barrier + "; while [ $(wc -l < " + barrier +
                    ") -lt 4 ]; do sleep 0.05; done; "
                    "echo $CUDA_VISIBLE_DEVICES $SLURM_STEP_GPUS"};
      o.environment = {"PATH=/usr/bin:/bin"};
      o.work_dir = "/";
      runs[static_cast<size_t>(i)] = RunCapturing(*c, o);
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> gpus;
  for (const StepRun& r : runs) {
    ASSERT_TRUE(r.rc.ok()) << r.rc.status().ToString();
    EXPECT_EQ(*r.rc, 0) << r.err;
    std::istringstream ss(r.out);
    std::string visible, step_gpus;
    ss >> visible >> step_gpus;
    EXPECT_EQ(visible, step_gpus);
    EXPECT_EQ(visible.find(','), std::string::npos) << "one GPU per step: " << visible;
    gpus.insert(visible);
  }
  EXPECT_EQ(gpus.size(), 4u) << "every step got a GPU of its own";
  auto job = cluster_->Job(*id);
  EXPECT_EQ(job->steps_size(), 4);
}

}  // namespace
}  // namespace muster::testing
