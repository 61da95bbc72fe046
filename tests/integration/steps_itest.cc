// Steps and allocations: tasks per slot, srun/salloc allocations, steps with GPUs of their own.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "harness/cluster_test.h"
#include "muster/common/framing.h"

namespace muster::testing {
namespace {

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
  ASSERT_TRUE(c->CancelJob([&] {
                 v1::CancelJobRequest r;
                 r.add_job_ids(*id);
                 return r;
               }())
                  .ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::CANCELLED, 10'000);
}

// Shuts down this process's connections to `address` (srun's to a node's step service): srun
// reads the end of the stream, as when that node dies. Returns how many.
int CutConnectionsOf(const std::string& address) {
  int cut = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::atoi(e.path().filename().c_str());
    sockaddr_storage me{}, peer{};
    socklen_t me_len = sizeof me, peer_len = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &me_len) != 0 ||
        me.ss_family != AF_INET ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
      continue;  // not a connected IPv4 socket
    }
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    char ip[INET_ADDRSTRLEN] = {0};
    ::inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    if (std::string(ip) + ":" + std::to_string(ntohs(in->sin_port)) != address) continue;
    ::shutdown(fd, SHUT_RDWR);
    ++cut;
  }
  return cut;
}

// A node lost under a running step: srun ends the whole step, as Slurm; with -k (no_kill) the
// tasks of the other nodes run on to their end.
TEST_F(ClusterTest, ALostNodeEndsTheStepUnlessSrunKeepsTheOthersGoing) {
  for (const bool no_kill : {false, true}) {
    SCOPED_TRACE(no_kill ? "srun -k" : "srun");
    const std::string mark = jobs_ + (no_kill ? "k" : "plain");
    v1::JobSpec spec = Gang(2, 1);
    spec.set_no_kill(true);  // the job outlives node2 either way; only the step differs
    auto id = cluster_->Submit("#!/bin/sh\nsleep 30\n", spec);
    ASSERT_TRUE(id.ok());
    ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
    auto c = cluster_->Client();
    ASSERT_TRUE(c.ok());
    client::StepOptions o;
    o.shape.set_job_id(*id);
    o.no_kill = no_kill;
    // Each task says it started; node1's then lives 3 s longer and says it got to its end.
    o.argv = {"sh", "-c",
              "touch " + mark + ".$SLURM_NODEID; if [ $SLURM_NODEID = 0 ]; then sleep 3; touch " +
                  mark + ".end; else sleep 30; fi"};
    o.environment = {"PATH=/usr/bin:/bin"};
    o.work_dir = "/";
    StepRun run;
    std::thread srun([&] { run = RunCapturing(*c, o); });
    ASSERT_EVENTUALLY(std::filesystem::exists(mark + ".0") && std::filesystem::exists(mark + ".1"),
                      10'000);
    // srun's connection to node2 ends with task 1 still running there.
    const std::string node2 = cluster_->agent(1)->step_address();
    ASSERT_EQ(CutConnectionsOf(node2), 1) << node2;
    srun.join();
    ASSERT_TRUE(run.rc.ok()) << run.rc.status().ToString();
    EXPECT_NE(*run.rc, 0) << "a task was lost";
    EXPECT_NE(run.err.find("lost node"), std::string::npos) << run.err;
    EXPECT_EQ(std::filesystem::exists(mark + ".end"), no_kill) << run.err;
    ASSERT_TRUE(c->CancelJob([&] {
                   v1::CancelJobRequest r;
                   r.add_job_ids(*id);
                   return r;
                 }())
                    .ok());
    ASSERT_EVENTUALLY(cluster_->State(*id) == v1::CANCELLED, 10'000);
  }
}

// Sends one step launch to an agent as srun would and reads its answer: OK once the tasks ran
// and exited, or the agent's refusal.
Status LaunchRaw(const std::string& address, const v1::StepLaunchRequest& req) {
  auto fd = ConnectTcp(address, 5000);
  if (!fd.ok()) return fd.status();
  Status result = WriteFrame(*fd, 0, req.SerializeAsString());
  while (result.ok()) {
    auto f = ReadFrame(*fd, 10'000);
    if (!f.ok()) {
      result = f.status();
    } else if (f->type != 0) {
      result = Status(static_cast<StatusCode>(f->type), f->payload);
    } else {
      v1::StepEvent e;
      if (e.ParseFromString(f->payload) && e.has_exit()) break;
    }
  }
  ::close(*fd);
  return result;
}

TEST_F(ClusterTest, AStepCredentialStartsItsStepOnceAndOnlyOnItsNode) {
  auto id = cluster_->Submit("#!/bin/sh\nsleep 30\n", Gang(2, 1));
  ASSERT_TRUE(id.ok());
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10'000);
  auto c = cluster_->Client();
  ASSERT_TRUE(c.ok());
  v1::CreateStepRequest cr;
  cr.set_job_id(*id);
  cr.set_ntasks(2);
  cr.set_overlap(true);
  Result<v1::CreateStepResponse> step = Unavailable("not yet");
  for (int i = 0; i < 100 && step.status().code() == StatusCode::kUnavailable; ++i) {
    step = c->CreateStep(cr);
    if (!step.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  ASSERT_EQ(step->nodes_size(), 2);
  auto request = [&](const v1::StepNode& n) {
    v1::StepLaunchRequest r;
    r.set_job_id(*id);
    r.set_step_id(step->step_id());
    r.set_credential(n.credential());
    r.add_argv("true");
    r.set_work_dir("/");
    r.set_node_id(n.node_id());
    r.set_first_task(n.first_task());
    r.set_ntasks(n.ntasks());
    r.set_total_tasks(step->total_tasks());
    r.set_total_nodes(2);
    r.set_cpus_per_task(step->cpus_per_task());
    *r.mutable_cpu_ids() = n.cpu_ids();
    r.set_run(step->run());
    return r;
  };
  const v1::StepNode& n1 = step->nodes(0);
  const v1::StepNode& n2 = step->nodes(1);
  // node1's credential shown to node2's agent (as node1's part, or dressed up as node2's).
  Status st = LaunchRaw(n2.step_address(), request(n1));
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  v1::StepLaunchRequest dressed = request(n2);
  dressed.set_credential(n1.credential());
  st = LaunchRaw(n2.step_address(), dressed);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_NE(st.message().find("not sealed for this node"), std::string::npos) << st.ToString();
  // Each works once where it belongs; shown again, it is refused.
  EXPECT_TRUE(LaunchRaw(n1.step_address(), request(n1)).ok());
  EXPECT_TRUE(LaunchRaw(n2.step_address(), request(n2)).ok());
  st = LaunchRaw(n1.step_address(), request(n1));
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("started here already"), std::string::npos) << st.ToString();
  // Nor does it start another step.
  v1::StepLaunchRequest more = request(n2);
  more.set_step_id(step->step_id() + 1);
  EXPECT_EQ(LaunchRaw(n2.step_address(), more).code(), StatusCode::kPermissionDenied);
}

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
