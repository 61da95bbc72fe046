// The Agent itself with its seams faked (agent_fakes.h): a spool of its own per test, a fake
// launcher and controller link, and the helpers both agent_test.cc and agent_admin_test.cc use.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent_fakes.h"
#include "harness/http_client.h"
#include "harness/test_user.h"
#include "harness/test_util.h"
#include "muster/agent/agent.h"
#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/cpu_spec.h"
#include "muster/common/framing.h"
#include "muster/common/node_keys.h"
#include "muster/credentials/step_credential.h"

namespace muster::agent {

namespace fs = std::filesystem;
using testing::FakeLauncher;
using testing::FakeLink;

inline constexpr uint64_t kJob = 7;

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    dir_ = fs::temp_directory_path() /
           ("muster-agent-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/spool");
    std::ofstream(dir_ + "/gpus.toml") << "[node]\ncpus = 8\nmemory_mb = 16000\n"
                                          "[gpus]\ncount = 4\nmodel = \"NVIDIA H100 80GB HBM3\"\n";
    auto c = ParseConfig(R"(
[controller]
agent_address = "127.0.0.1:1"
[agent]
step_address = "127.0.0.1:0"
cgroup_root = "none"
gpu_health_interval_ms = 50
[[nodes]]
names = "node1"
cpus = 8
memory_mb = 16000
gpus = 4
[[partition]]
name = "gpu"
nodes = "node1"
)",
                         "agent.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
  }

  void TearDown() override {
    agent_.reset();
    fs::remove_all(dir_);
  }

  // An agent's options on this test's spool, with the fake launcher.
  AgentOptions BaseOptions() {
    AgentOptions o;
    o.config = config_;
    o.node_name = "node1";
    o.spool_dir = dir_ + "/spool";
    o.gpu_fixture = dir_ + "/gpus.toml";
    o.launcher = launcher_;
    return o;
  }

  // Starts an agent on this test's spool, with the fakes.
  void StartAgent() {
    AgentOptions o = BaseOptions();
    if (real_launcher_) o.launcher = real_launcher_;
    o.login_shell_for_tests = login_shell_;
    o.step_request_deadline_ms = step_deadline_ms_;
    if (!boot_id_file_.empty()) o.boot_id_file = boot_id_file_;
    o.controller_link = [this](const std::string&, const std::string&, const std::string&,
                               ControllerLink::Callbacks cb) {
      auto link = std::make_unique<FakeLink>(std::move(cb));
      link_ = link.get();
      return link;
    };
    auto a = Agent::Create(std::move(o));
    ASSERT_TRUE(a.ok());
    agent_ = std::move(*a);
    ASSERT_TRUE(agent_->Start().ok());
    ASSERT_NE(link_, nullptr);
  }

  static v1::ControllerMessage Launch(uint64_t epoch, uint32_t run = 0) {
    v1::ControllerMessage m;
    m.set_epoch(epoch);
    v1::LaunchJob* l = m.mutable_launch_job();
    l->set_job_id(kJob);
    l->set_requeue_count(run);
    l->set_batch_node(true);
    l->set_kill_grace_ms(50);
    l->set_credential("secret");
    v1::JobSpec* s = l->mutable_spec();
    s->set_name("train");
    s->set_user("alice");
    s->set_uid(::geteuid());  // an unprivileged test agent can only run its own user's jobs
    s->set_gid(::getegid());
    s->set_work_dir("/tmp");
    s->set_stdout_pattern("slurm-%j.out");
    s->set_script("#!/bin/sh\necho hello\n");
    s->add_environment("FROM_SUBMITTER=1");
    v1::NodeAllocation* na = l->mutable_allocation()->add_nodes();
    na->set_node("node1");
    na->set_ntasks(1);
    na->add_cpu_ids(0);
    na->add_gpu_indices(1);
    na->add_gpu_indices(2);
    return m;
  }

  static v1::ControllerMessage Terminate(uint64_t epoch) {
    v1::ControllerMessage m;
    m.set_epoch(epoch);
    m.mutable_terminate_job()->set_job_id(kJob);
    m.mutable_terminate_job()->set_kill_grace_ms(50);
    m.mutable_terminate_job()->set_reason("cancelled");
    return m;
  }

  static std::map<std::string, std::string> Env(const SpawnSpec& spec) {
    std::map<std::string, std::string> env;
    for (const auto& kv : spec.env) {
      size_t eq = kv.find('=');
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return env;
  }

  bool Sent(const std::function<bool(const v1::AgentMessage&)>& match) {
    return link_->WaitFor(match);
  }

  // What a previous agent left in `dir`: job 7's state, its keeper 4242 (started at tick 99)
  // running task 4243.
  void LeaveRunningJob(const std::string& dir) {
    v1::AgentJobState st;
    *st.mutable_launch() = Launch(1).launch_job();
    st.set_keeper_pid(4242);
    st.set_keeper_start(99);
    st.set_task_pid(4243);
    fs::create_directories(dir + "/job7");
    std::ofstream(dir + "/job7/state") << st.SerializeAsString();
  }

  // srun --bcast's step 1 of job 7 on node1: its launch request, with a grant sealed under
  // `step_key` for this agent, for one task running the program copied to `path` (`size` bytes).
  v1::StepLaunchRequest BcastStep(const std::string& step_key, const std::string& path,
                                  uint64_t size) {
    v1::StepGrant g;
    g.set_job_id(kJob);
    g.set_step_id(1);
    g.set_uid(::geteuid());
    g.set_node("node1");
    g.set_ntasks(1);
    g.set_total_tasks(1);
    g.set_total_nodes(1);
    g.add_cpu_ids(0);
    g.set_expires_ms(SystemClock::Get()->NowMs() + 120'000);
    g.set_agent_instance(link_->Register().instance_id());
    v1::StepLaunchRequest r;
    r.set_job_id(kJob);
    r.set_step_id(1);
    r.set_ntasks(1);
    r.set_total_tasks(1);
    r.set_total_nodes(1);
    r.add_cpu_ids(0);
    r.add_argv("prog");
    r.add_environment("PATH=/usr/bin:/bin");
    r.set_work_dir(dir_);
    r.set_bcast_path(path);
    r.set_bcast_size(size);
    r.set_credential(credentials::SealStepGrant(step_key, g));
    return r;
  }

  // What a step's connection says until the step gives its error, or closes: exits and the error.
  struct StepHeard {
    int exits = 0;
    std::string error;
  };
  static StepHeard ListenToStep(int fd) {
    StepHeard h;
    for (;;) {
      auto f = ReadFrame(fd, 5000);
      if (!f.ok()) break;
      if (f->type != 0) {
        h.error = f->payload;
        break;
      }
      v1::StepEvent ev;
      if (ev.ParseFromString(f->payload) && ev.has_exit()) ++h.exits;
    }
    return h;
  }

  // The copies under way that `dir` holds (.muster-bcast-*).
  static int BcastTempFiles(const std::string& dir) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      n += e.path().filename().string().rfind(".muster-bcast-", 0) == 0;
    }
    return n;
  }

  // A reboot program of `body` in this boot ("1b2c3d"), set in the config before StartAgent.
  std::string RebootProgramIn1b2c3d(const std::string& body) {
    boot_id_file_ = dir_ + "/boot_id";
    std::ofstream(boot_id_file_) << "1b2c3d\n";
    const std::string program = dir_ + "/reboot";
    std::ofstream(program) << "#!/bin/sh\n" << body;
    fs::permissions(program, fs::perms(0755));
    config_.agent.reboot_program = program;
    return program;
  }

  std::string dir_;
  Config config_;
  std::shared_ptr<FakeLauncher> launcher_ = std::make_shared<FakeLauncher>();
  std::shared_ptr<Launcher> real_launcher_;  // set before StartAgent: processes for real
  std::string login_shell_;                  // --get-user-env's shell, for a test's own
  int step_deadline_ms_ = 30'000;
  std::string boot_id_file_;  // set before StartAgent: this host's boot id from there
  FakeLink* link_ = nullptr;
  std::unique_ptr<Agent> agent_;
};

}  // namespace muster::agent
