#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cgroup.h"
#include "inventory.h"
#include "job_env.h"
#include "launcher.h"
#include "nvml.h"

namespace muster::agent {
namespace {

std::map<std::string, std::string> EnvMap(const std::vector<std::string>& env) {
  std::map<std::string, std::string> m;
  for (const auto& kv : env) {
    size_t eq = kv.find('=');
    m[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return m;
}

TEST(GpuFixtureTest, GeneratesAnNvSwitchNode) {
  auto f = ParseGpuFixture(R"(
[node]
cpus = 16
memory_mb = 64000
[gpus]
count = 8
model = "NVIDIA H100 80GB HBM3"
memory_mb = 81559
numa_nodes = 2
)",
                           "f.toml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->cpus, 16u);
  ASSERT_EQ(f->gpus.size(), 8u);
  EXPECT_EQ(f->gpus[3].type(), "h100");
  EXPECT_EQ(f->gpus[3].numa_node(), 0);
  EXPECT_EQ(f->gpus[4].numa_node(), 1);
  ASSERT_EQ(f->gpus[0].links_size(), 7);
  EXPECT_EQ(f->gpus[0].links(0).type(), v1::GPU_LINK_NVSWITCH);
}

TEST(GpuFixtureTest, ReadsAnNvidiaSmiStyleMatrix) {
  // DGX-1-like: NVLink pairs inside a quad, system links across sockets.
  auto f = ParseGpuFixture(R"(
[gpus]
count = 4
model = "Tesla V100-SXM2-16GB"
topo = ["X NV1 NV2 SYS", "NV1 X PIX SYS", "NV2 PIX X NODE", "SYS SYS NODE X"]
)",
                           "f.toml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->gpus[0].type(), "v100");
  EXPECT_EQ(f->gpus[0].links(1).type(), v1::GPU_LINK_NVLINK);
  EXPECT_EQ(f->gpus[0].links(1).count(), 2u);
  EXPECT_EQ(f->gpus[1].links(1).type(), v1::GPU_LINK_PCIE_SWITCH);
  EXPECT_EQ(f->gpus[3].links(0).type(), v1::GPU_LINK_SYSTEM);
}

TEST(GpuFixtureTest, ErrorsNameFileLineAndKey) {
  auto f = ParseGpuFixture("[gpus]\ncount = 2\ntopo = [\"X NV4\", \"NV4 Y\"]\n", "bad.toml");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("bad.toml:3: gpus.topo"), std::string::npos)
      << f.status().message();
  f = ParseGpuFixture("[gpus]\ncount = 2\ncolour = \"green\"\n", "bad.toml");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("bad.toml:3: gpus.colour"), std::string::npos);
}

TEST(GpuTypeTest, FromModelNames) {
  EXPECT_EQ(GpuTypeFromModel("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(GpuTypeFromModel("NVIDIA A100-SXM4-80GB"), "a100");
  EXPECT_EQ(GpuTypeFromModel("Tesla V100-SXM2-16GB"), "v100");
  EXPECT_EQ(GpuTypeFromModel("NVIDIA GeForce RTX 4090"), "rtx4090");
  EXPECT_EQ(GpuTypeFromModel(""), "gpu");
}

TEST(GpuFaultsTest, InjectedFaultsAreWordedAsNvmlWordsThem) {
  auto f =
      ParseGpuFaults("# injected\n3 xid 79\n1 ecc 2\n0 lost\n2 remap-pending\n5 xid 13\n3 ecc 1\n");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->size(), 4u) << "XID 13 is the application's fault, not the GPU's";
  EXPECT_EQ(f->at(3), "XID 79 (fallen off the bus)") << "a GPU's first fault is its reason";
  EXPECT_EQ(f->at(1), "2 uncorrectable ECC error(s)");
  EXPECT_EQ(f->at(0), "fallen off the bus");
  EXPECT_EQ(f->at(2), "row remapping pending (the GPU needs a reset)");
  auto bad = ParseGpuFaults("3 xid\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos);
  EXPECT_FALSE(ParseGpuFaults("gpu3 lost\n").ok());
  EXPECT_FALSE(ParseGpuFaults("1 melted\n").ok());
}

TEST(NvmlTest, WithoutADriverItSaysSoInsteadOfFailing) {
  auto g = Nvml::Open();
  if (g.ok()) GTEST_SKIP() << "this machine has NVML; tests/gpu covers it";
  EXPECT_EQ(g.status().code(), StatusCode::kUnavailable);
}

v1::LaunchJob TwoNodeLaunch() {
  v1::LaunchJob l;
  l.set_job_id(42);
  l.set_cluster_name("local");
  auto* s = l.mutable_spec();
  s->set_name("train");
  s->set_user("alice");
  s->set_uid(1000);
  s->set_ntasks(4);
  s->set_gpus_per_node(8);
  s->set_work_dir("/home/alice");
  s->set_submit_dir("/home/alice/src");
  s->add_environment("HOME=/home/alice");
  s->add_environment("CUDA_VISIBLE_DEVICES=9");  // the submitter's own: must be overridden
  auto* a = l.mutable_allocation();
  a->set_partition("gpu");
  for (const char* n : {"node1", "node2"}) {
    auto* na = a->add_nodes();
    na->set_node(n);
    na->set_ntasks(2);
    for (uint32_t c = 0; c < 2; ++c) na->add_cpu_ids(c);
    for (uint32_t g = 0; g < 8; ++g) na->add_gpu_indices(g);
  }
  return l;
}

TEST(JobEnvTest, BatchEnvironmentHasSlurmAndMusterVariables) {
  v1::LaunchJob l = TwoNodeLaunch();
  auto env = EnvMap(BuildBatchEnv(l, "node1", "/etc/muster/muster.toml", GpuList(l)));
  EXPECT_EQ(env["HOME"], "/home/alice");
  EXPECT_EQ(env["SLURM_JOB_ID"], "42");
  EXPECT_EQ(env["SLURM_JOBID"], "42");
  EXPECT_EQ(env["MUSTER_JOB_ID"], "42");
  EXPECT_EQ(env["SLURM_JOB_NAME"], "train");
  EXPECT_EQ(env["SLURM_JOB_NODELIST"], "node[1-2]");
  EXPECT_EQ(env["SLURM_NODELIST"], "node[1-2]");
  EXPECT_EQ(env["SLURM_JOB_NUM_NODES"], "2");
  EXPECT_EQ(env["SLURM_NNODES"], "2");
  EXPECT_EQ(env["SLURM_NTASKS"], "4");
  EXPECT_EQ(env["SLURM_TASKS_PER_NODE"], "2(x2)");
  EXPECT_EQ(env["SLURM_JOB_CPUS_PER_NODE"], "2(x2)");
  EXPECT_EQ(env["SLURM_NODEID"], "0");
  EXPECT_EQ(env["SLURM_PROCID"], "0");
  EXPECT_EQ(env["SLURM_LOCALID"], "0");
  EXPECT_EQ(env["SLURM_SUBMIT_DIR"], "/home/alice/src");
  EXPECT_EQ(env["SLURM_JOB_PARTITION"], "gpu");
  EXPECT_EQ(env["SLURM_GPUS_ON_NODE"], "8");
  EXPECT_EQ(env["SLURM_JOB_GPUS"], "0,1,2,3,4,5,6,7");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7");
  EXPECT_EQ(env["GPU_DEVICE_ORDINAL"], "0,1,2,3,4,5,6,7");
  EXPECT_EQ(env["SLURMD_NODENAME"], "node1");
  EXPECT_EQ(env["SLURM_CLUSTER_NAME"], "local");
  EXPECT_EQ(env["MUSTER_CONF"], "/etc/muster/muster.toml");
  EXPECT_EQ(env["SLURM_TOPOLOGY_ADDR"], "node1");
  EXPECT_EQ(env["SLURM_TOPOLOGY_ADDR_PATTERN"], "node");
  EXPECT_EQ(env["SLURM_NODE_ALIASES"], "(null)");
  EXPECT_EQ(env.count("SLURM_ARRAY_JOB_ID"), 0u);
  // Under switches, and as a job array's task.
  l.set_topology("spine1/leaf3");
  l.mutable_array()->set_array_job_id(40);
  l.mutable_array()->set_task_id(2);
  l.mutable_array()->set_count(3);
  l.mutable_array()->set_min(0);
  l.mutable_array()->set_max(4);
  l.mutable_array()->set_step(2);
  l.mutable_spec()->set_ntasks_per_node(2);
  env = EnvMap(BuildBatchEnv(l, "node1", "", GpuList(l)));
  EXPECT_EQ(env["SLURM_TOPOLOGY_ADDR"], "spine1.leaf3.node1");
  EXPECT_EQ(env["SLURM_TOPOLOGY_ADDR_PATTERN"], "switch.switch.node");
  EXPECT_EQ(env["SLURM_ARRAY_JOB_ID"], "40");
  EXPECT_EQ(env["SLURM_ARRAY_TASK_ID"], "2");
  EXPECT_EQ(env["SLURM_ARRAY_TASK_COUNT"], "3");
  EXPECT_EQ(env["SLURM_ARRAY_TASK_MIN"], "0");
  EXPECT_EQ(env["SLURM_ARRAY_TASK_MAX"], "4");
  EXPECT_EQ(env["SLURM_ARRAY_TASK_STEP"], "2");
  EXPECT_EQ(env["SLURM_NTASKS_PER_NODE"], "2");
}

TEST(JobEnvTest, TaskEnvironmentIsPerTask) {
  v1::LaunchJob l = TwoNodeLaunch();
  l.set_node_id(1);
  v1::StepLaunchRequest step;
  step.set_step_id(3);
  step.set_node_id(1);
  step.set_first_task(2);
  step.set_ntasks(2);
  step.set_total_tasks(4);
  step.set_total_nodes(2);
  step.set_step_nodelist("node[1-2]");
  step.set_tasks_per_node("2(x2)");
  step.add_environment("SLURM_PROCID=0");  // inherited from the batch script: replaced
  auto env = EnvMap(BuildTaskEnv(l, "node2", "", GpuList(l), step, 1));
  EXPECT_EQ(env["SLURM_PROCID"], "3");
  EXPECT_EQ(env["SLURM_LOCALID"], "1");
  EXPECT_EQ(env["SLURM_NODEID"], "1");
  EXPECT_EQ(env["SLURM_STEP_ID"], "3");
  EXPECT_EQ(env["SLURM_GTIDS"], "2,3");
  EXPECT_EQ(env["SLURMD_NODENAME"], "node2");
  EXPECT_EQ(env["MUSTER_PROCID"], "3");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7");
}

TEST(JobEnvTest, ShardsShowTheirGpusAndMigSlicesTheirUuids) {
  v1::LaunchJob l = TwoNodeLaunch();
  for (auto& na : *l.mutable_allocation()->mutable_nodes()) {
    na.clear_gpu_indices();
    auto* g = na.add_gres();
    g->set_name("shard");
    for (uint32_t u : {12u, 13u, 20u}) g->add_units(u);
    for (uint32_t gpu : {3u, 3u, 5u}) g->add_on_gpu(gpu);
  }
  google::protobuf::RepeatedPtrField<v1::GpuDevice> gpus;
  auto visible = VisibleDevices(l, gpus);
  ASSERT_TRUE(visible.ok());
  EXPECT_EQ(*visible, "3,5");
  auto env = EnvMap(BuildBatchEnv(l, "node1", "", *visible));
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "3,5");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "3,5");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  EXPECT_EQ(env["SLURM_SHARDS_ON_NODE"], "3");
  // MIG slices: unit u of a profile is that profile's u-th instance in GPU order, by UUID. The
  // node of the GH200 capture: two GPUs with seven 1g.12gb instances each.
  l = TwoNodeLaunch();
  auto* me = l.mutable_allocation()->mutable_nodes(0);
  me->clear_gpu_indices();
  auto* mig = me->add_gres();
  mig->set_name("gpu");
  mig->set_type("1g.12gb");
  for (uint32_t u : {6u, 7u}) mig->add_units(u);
  for (uint32_t g = 0; g < 2; ++g) {
    v1::GpuDevice* d = gpus.Add();
    d->set_index(g);
    d->set_mig_enabled(true);
    for (uint32_t m = 0; m < 7; ++m) {
      v1::MigDevice* md = d->add_mig_devices();
      md->set_index(m);
      md->set_profile("1g.12gb");
      md->set_uuid("MIG-" + std::to_string(g) + "-" + std::to_string(m));
    }
  }
  visible = VisibleDevices(l, gpus);
  ASSERT_TRUE(visible.ok()) << visible.status().ToString();
  EXPECT_EQ(*visible, "MIG-0-6,MIG-1-0");
  env = EnvMap(BuildBatchEnv(l, "node1", "", *visible));
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "MIG-0-6,MIG-1-0");
  EXPECT_EQ(env["SLURM_GPUS_ON_NODE"], "2");
  mig->add_units(14);
  visible = VisibleDevices(l, gpus);
  ASSERT_FALSE(visible.ok());
  EXPECT_NE(visible.status().message().find("has 14 such instances"), std::string::npos)
      << visible.status().message();
}

TEST(JobEnvTest, JobWithoutGpusSeesNone) {
  v1::LaunchJob l = TwoNodeLaunch();
  for (auto& na : *l.mutable_allocation()->mutable_nodes()) na.clear_gpu_indices();
  auto env = EnvMap(BuildBatchEnv(l, "node1", "", GpuList(l)));
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "void");
  EXPECT_EQ(env.count("SLURM_JOB_GPUS"), 0u);
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("muster-launch-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  int Wait(const Spawned& s) {
    int status = 0;
    ::waitpid(s.pid, &status, 0);
    ::close(s.pidfd);
    return status;
  }
  std::string Read(const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::filesystem::path dir_;
};

TEST_F(LauncherTest, RunsInItsDirWithItsEnvAndOutputFiles) {
  SpawnSpec s;
  s.argv = {"sh", "-c", "echo out:$FOO:$(pwd); echo err >&2; exit 3"};
  s.env = {"FOO=bar", "PATH=/usr/bin:/bin"};
  s.cwd = dir_.string();
  s.stdout_path = (dir_ / "out.txt").string();
  s.stderr_path = (dir_ / "err.txt").string();
  auto sp = Spawn(s);
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  int code, sig;
  DecodeWaitStatus(Wait(*sp), &code, &sig);
  EXPECT_EQ(code, 3);
  EXPECT_EQ(sig, 0);
  EXPECT_EQ(Read(s.stdout_path), "out:bar:" + dir_.string() + "\n");
  EXPECT_EQ(Read(s.stderr_path), "err\n");
}

TEST_F(LauncherTest, OwnSessionSoTheWholeTreeCanBeSignalled) {
  SpawnSpec s;
  s.argv = {"sh", "-c", "sleep 30 & sleep 30; echo never"};
  s.env = {"PATH=/usr/bin:/bin"};
  s.stdout_path = (dir_ / "o").string();
  auto sp = Spawn(s);
  ASSERT_TRUE(sp.ok());
  EXPECT_EQ(::getpgid(sp->pid), sp->pid);
  ::kill(-sp->pid, SIGKILL);
  int code, sig;
  DecodeWaitStatus(Wait(*sp), &code, &sig);
  EXPECT_EQ(sig, SIGKILL);
}

TEST_F(LauncherTest, ReportsWhyItCouldNotStart) {
  SpawnSpec s;
  s.argv = {"/nonexistent/program"};
  s.stdout_path = (dir_ / "o").string();
  auto sp = Spawn(s);
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(sp.status().message().find("execve(/nonexistent/program)"), std::string::npos);

  s.argv = {"true"};
  s.env = {"PATH=/usr/bin:/bin"};
  s.cwd = "/nonexistent/dir";
  sp = Spawn(s);
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(sp.status().message().find("cannot change to directory /nonexistent/dir"),
            std::string::npos);

  s.cwd = "";
  s.stdout_path = "/nonexistent/dir/out";
  sp = Spawn(s);
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(sp.status().message().find("cannot open output file /nonexistent/dir/out"),
            std::string::npos);
}

TEST_F(LauncherTest, DropsPrivilegesWhenAskedTo) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  SpawnSpec s;
  s.argv = {"sh", "-c", "id -u; id -g"};
  s.env = {"PATH=/usr/bin:/bin"};
  s.change_user = true;
  s.uid = 65534;
  s.gid = 65534;
  s.groups = {65534};
  s.stdout_fd = -1;
  std::filesystem::permissions(dir_, std::filesystem::perms::all);
  s.stdout_path = (dir_ / "id.txt").string();
  auto sp = Spawn(s);
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  Wait(*sp);
  EXPECT_EQ(Read(s.stdout_path), "65534\n65534\n");
}

// As root (CI): a real user made by the test setup, with a supplementary group; the job runs as
// that user under a keeper, and what it daemonizes ends with it.
class RootLauncherTest : public LauncherTest {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    created_ = ::getpwnam("muster-test") == nullptr;
    int rc = std::system(
        "(getent group muster-test-extra >/dev/null || groupadd muster-test-extra) && "
        "(id muster-test >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh "
        "--groups muster-test-extra muster-test)");
    ready_ = rc == 0;
  }
  static void TearDownTestSuite() {
    // What the setup made, it removes (a user that existed before stays).
    if (created_ && ready_) {
      (void)std::system("userdel muster-test; groupdel muster-test-extra 2>/dev/null");
    }
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a user and switch to it";
    if (!ready_) GTEST_SKIP() << "useradd/groupadd are not available here";
    LauncherTest::SetUp();
    std::filesystem::permissions(dir_, std::filesystem::perms::all);
    struct passwd* pw = ::getpwnam("muster-test");
    ASSERT_NE(pw, nullptr);
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    struct group* gr = ::getgrnam("muster-test-extra");
    ASSERT_NE(gr, nullptr);
    extra_ = gr->gr_gid;
  }
  SpawnSpec AsUser(const std::string& script) {
    SpawnSpec s;
    s.argv = {"sh", "-c", script};
    s.env = {"PATH=/usr/bin:/bin", "FOO=bar"};
    s.cwd = dir_.string();
    s.change_user = true;
    s.uid = uid_;
    s.gid = gid_;
    s.groups = GroupsOf("muster-test", gid_);
    s.stdout_path = (dir_ / "out.txt").string();
    s.exit_file = (dir_ / "exit").string();
    return s;
  }
  static inline bool ready_ = false;
  static inline bool created_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0, extra_ = 0;
};

bool Gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  size_t close = stat.rfind(')');
  return close != std::string::npos && stat[close + 2] == 'Z';
}

TEST_F(RootLauncherTest, RunsAsTheUserWithItsGroupsAndItsLeftoversEndWithIt) {
  const std::string daemon_pid = (dir_ / "d.pid").string();
  SpawnSpec s = AsUser(
      "id -u; id -g; id -G; echo $FOO; setsid sh -c 'sleep 60 </dev/null "
      ">/dev/null 2>&1 & echo $! > " +
      daemon_pid + "'; sleep 0.2; exit 4");
  EXPECT_NE(std::find(s.groups.begin(), s.groups.end(), extra_), s.groups.end());
  auto sp = Spawn(s);
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  EXPECT_NE(sp->pid, sp->task_pid) << "a keeper stands between the agent and the script";
  Wait(*sp);  // the keeper ends after the script, and after what the script left behind
  auto status = ReadExitFile(s.exit_file);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  int code, sig;
  DecodeWaitStatus(*status, &code, &sig);
  EXPECT_EQ(code, 4);
  std::istringstream out(Read(s.stdout_path));
  std::string uid, gid, groups, foo;
  std::getline(out, uid);
  std::getline(out, gid);
  std::getline(out, groups);
  std::getline(out, foo);
  EXPECT_EQ(uid, std::to_string(uid_));
  EXPECT_EQ(gid, std::to_string(gid_));
  EXPECT_NE((" " + groups + " ").find(" " + std::to_string(extra_) + " "), std::string::npos)
      << groups;
  EXPECT_EQ(foo, "bar");
  struct stat st {};
  ASSERT_EQ(::stat(s.stdout_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid_) << "output files belong to the user";
  ASSERT_FALSE(Read(daemon_pid).empty());
  EXPECT_TRUE(Gone(std::stoi(Read(daemon_pid)))) << "the daemonized sleep outlived its job";
}

TEST_F(RootLauncherTest, SignallingTheJobReachesWhatEscapedItsSession) {
  const std::string daemon_pid = (dir_ / "d.pid").string();
  SpawnSpec s = AsUser("setsid sh -c 'sleep 60 </dev/null >/dev/null 2>&1 & echo $! > " +
                       daemon_pid + "'; exec sleep 60");
  auto sp = Spawn(s);
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  for (int i = 0; i < 500 && Read(daemon_pid).empty(); ++i) ::usleep(10'000);
  ASSERT_FALSE(Read(daemon_pid).empty());
  const pid_t daemon = std::stoi(Read(daemon_pid));
  EXPECT_NE(::getsid(daemon), sp->task_pid) << "it did leave the job's session";
  ::kill(-sp->task_pid, SIGTERM);  // what cancel and the time limit send first
  Wait(*sp);
  int code, sig;
  DecodeWaitStatus(*ReadExitFile(s.exit_file), &code, &sig);
  EXPECT_EQ(sig, SIGTERM);
  EXPECT_TRUE(Gone(daemon));
}

// Processes are created inside their cgroup (clone3 CLONE_INTO_CGROUP), directly and under a
// keeper; failures still say what failed. Needs a writable cgroup v2 hierarchy (root).
TEST_F(LauncherTest, StartsInsideTheGivenCgroup) {
  JobCgroups cg = JobCgroups::Detect("", "launcher-test-" + std::to_string(::getpid()));
  if (!cg.enabled()) GTEST_SKIP() << cg.description();
  auto dir = cg.Create(7, {});
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  int fd = ::open(dir->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (bool kept : {false, true}) {
    SpawnSpec s;
    s.argv = {"sh", "-c", "cat /proc/self/cgroup"};
    s.env = {"PATH=/usr/bin:/bin"};
    s.cgroup_fd = fd;
    s.stdout_path = (dir_ / "cg.txt").string();
    if (kept) s.exit_file = (dir_ / "exit").string();
    auto sp = Spawn(s);
    ASSERT_TRUE(sp.ok()) << sp.status().ToString();
    Wait(*sp);
    std::string want = "/launcher-test-" + std::to_string(::getpid()) + "/job_7\n";
    std::string got = Read(s.stdout_path);
    EXPECT_NE(got.find(want), std::string::npos) << (kept ? "kept: " : "direct: ") << got;
    s.argv = {"/nonexistent/program"};
    auto bad = Spawn(s);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("execve(/nonexistent/program)"), std::string::npos)
        << bad.status().message();
  }
  ::close(fd);
  EXPECT_TRUE(JobCgroups::Empty(*dir));
  ASSERT_TRUE(JobCgroups::Remove(*dir).ok());
  ::rmdir(cg.base().c_str());
}

}  // namespace
}  // namespace muster::agent
