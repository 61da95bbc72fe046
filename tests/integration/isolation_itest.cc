// Containment: what a job or step leaves behind ends with it; only its own GPUs are open to it.
#include "harness/cluster_test.h"

namespace muster::testing {
namespace {

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

}  // namespace
}  // namespace muster::testing
