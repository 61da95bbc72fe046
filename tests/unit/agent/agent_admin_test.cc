// What the Agent does for the admin, with its seams faked: its own /metrics, reboots and the
// programs it runs as root (trusted paths), its command line and which controller it may talk to.
#include "agent_fixture.h"

namespace muster::agent {
namespace {

// Without TLS on the agent channel, a controller beyond loopback is refused unless the config
// says `insecure = true`.
TEST_F(AgentTest, AControllerBeyondLoopbackNeedsInsecure) {
  AgentOptions o = BaseOptions();
  o.controller_address = "10.1.2.3:6817";
  auto a = Agent::Create(o);
  ASSERT_TRUE(a.ok());
  Status st = (*a)->Start();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("insecure = true"), std::string::npos) << st.message();
}

TEST_F(AgentTest, ItsMetricsNeedTheTokenAndCountLaunchesJobsAndGpus) {
  const std::string token_file = dir_ + "/metrics.token";
  std::ofstream(token_file) << "0123456789abcdef0123456789abcdef\n";
  fs::permissions(token_file, fs::perms::owner_read | fs::perms::owner_write);
  config_.agent.metrics_address = "127.0.0.1:0";
  config_.agent.metrics_token_file = token_file;
  StartAgent();
  const int port = agent_->metrics_port();
  ASSERT_GT(port, 0);
  link_->Connect(1);
  link_->Command(Launch(1));
  ASSERT_TRUE(Sent([](const auto& m) { return m.has_job_started(); }));
  using muster::testing::HttpGet;
  using muster::testing::MetricSample;
  EXPECT_EQ(muster::testing::StatusLine(HttpGet(port, "/metrics", "")),
            "HTTP/1.1 401 Unauthorized");
  EXPECT_EQ(muster::testing::StatusLine(HttpGet(port, "/metrics", "Bearer nope")),
            "HTTP/1.1 401 Unauthorized");
  const std::string response = HttpGet(port, "/metrics", "Bearer 0123456789abcdef0123456789abcdef");
  ASSERT_EQ(muster::testing::StatusLine(response), "HTTP/1.1 200 OK") << response;
  const std::string body = muster::testing::Body(response);
  EXPECT_EQ(MetricSample(body, "muster_agent_launches_total"), 1) << body;
  EXPECT_EQ(MetricSample(body, "muster_agent_launch_duration_seconds_count"), 1);
  EXPECT_EQ(MetricSample(body, "muster_agent_jobs{phase=\"running\"}"), 1);
  EXPECT_EQ(MetricSample(body, "muster_agent_connected"), 1);
  EXPECT_EQ(MetricSample(body, "muster_agent_controller_epoch"), 1);
  EXPECT_EQ(MetricSample(body, "muster_agent_cgroups_enabled"), 0) << "cgroup_root = none";
  EXPECT_NE(body.find("muster_agent_gpu_healthy{gpu=\"3\","), std::string::npos);
  EXPECT_EQ(body.find("muster_agent_gpu_fault{"), std::string::npos) << "all healthy";
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    std::ofstream(dir_ + "/scrape.txt") << body;
    EXPECT_EQ(std::system(("promtool check metrics < " + dir_ + "/scrape.txt").c_str()), 0);
  }
}

TEST_F(AgentTest, ARebootRunsTheRebootProgramAndAFailureIsToldToTheController) {
  const std::string program = RebootProgramIn1b2c3d("exit 1\n");
  StartAgent();
  EXPECT_TRUE(link_->Register().inventory().can_reboot());
  EXPECT_EQ(link_->Register().inventory().boot_id(), "1b2c3d");
  link_->Connect(1);
  v1::ControllerMessage reboot;
  reboot.set_epoch(1);
  reboot.mutable_reboot_node()->set_reason("kernel update");
  link_->Command(reboot);
  auto spawned = launcher_->WaitForSpawns(1);
  ASSERT_EQ(spawned.size(), 1u);
  EXPECT_EQ(spawned[0].spec.argv.at(0), program);
  EXPECT_EQ(Env(spawned[0].spec)["MUSTER_REBOOT_REASON"], "kernel update");
  launcher_->Exit(spawned[0].pid, 1 << 8);
  ASSERT_TRUE(Sent([](const auto& m) {
    return m.has_reboot_failed() && m.reboot_failed().error().find("exit") != std::string::npos;
  }));
}

// The controller repeats an issued reboot at every new session from the same boot: the agent
// runs each reboot once in a boot (a failed one may run again).
TEST_F(AgentTest, TheSameRebootOrderRunsOnceInABootAndAFailedOneAgain) {
  RebootProgramIn1b2c3d("exit 0\n");
  StartAgent();
  EXPECT_TRUE(link_->Register().inventory().reboot_once_per_boot());
  link_->Connect(1);
  auto order = [&](uint64_t issued, const std::string& reason) {
    v1::ControllerMessage reboot;
    reboot.set_epoch(1);
    reboot.mutable_reboot_node()->set_reason(reason);
    reboot.mutable_reboot_node()->set_issued_ms(issued);
    link_->Command(reboot);
  };
  order(5, "first");
  auto spawned = launcher_->WaitForSpawns(1);
  ASSERT_EQ(spawned.size(), 1u);
  launcher_->Exit(spawned[0].pid, 0);  // started: the host goes down next
  order(5, "first");                   // repeated at a new session: not run again
  order(9, "second");                  // another reboot (the first timed out)
  spawned = launcher_->WaitForSpawns(2);
  ASSERT_EQ(spawned.size(), 2u);
  EXPECT_EQ(Env(spawned[1].spec)["MUSTER_REBOOT_REASON"], "second");
  launcher_->Exit(spawned[1].pid, 1 << 8);  // it fails: told, and may be asked for again
  ASSERT_TRUE(Sent([](const auto& m) { return m.has_reboot_failed(); }));
  order(9, "second");
  spawned = launcher_->WaitForSpawns(3);
  ASSERT_EQ(spawned.size(), 3u);
  launcher_->Exit(spawned[2].pid, 0);
  // A new agent in the same boot (restarted while the host went down) does not run it again,
  // and a controller that sends no identity (issued_ms 0) is obeyed every time.
  agent_->Shutdown();
  agent_.reset();
  auto fresh = std::make_shared<FakeLauncher>();
  launcher_ = fresh;
  StartAgent();
  link_->Connect(1);
  order(9, "second");
  order(0, "old controller");
  order(0, "old controller");
  spawned = fresh->WaitForSpawns(2);
  ASSERT_EQ(spawned.size(), 2u);
  EXPECT_EQ(Env(spawned[0].spec)["MUSTER_REBOOT_REASON"], "old controller");
  // Once the host is back from a new boot, the old order's memory means nothing.
  fresh->Exit(spawned[0].pid, 0);
  fresh->Exit(spawned[1].pid, 0);
  agent_->Shutdown();
  agent_.reset();
  std::ofstream(boot_id_file_) << "4e5f60\n";
  launcher_ = std::make_shared<FakeLauncher>();
  StartAgent();
  link_->Connect(1);
  order(9, "second");
  EXPECT_EQ(launcher_->WaitForSpawns(1).size(), 1u);
}

TEST_F(AgentTest, AnAdminProgramAnotherUserCouldChangeKeepsTheAgentFromStarting) {
  const std::string program = dir_ + "/reboot";
  std::ofstream(program) << "#!/bin/sh\nexit 0\n";
  fs::permissions(program, fs::perms(0775));  // group-writable
  config_.agent.reboot_program = program;
  auto start = [&]() -> Status {
    AgentOptions o = BaseOptions();
    o.controller_link = [](const std::string&, const std::string&, const std::string&,
                           ControllerLink::Callbacks cb) {
      return std::make_unique<FakeLink>(std::move(cb));
    };
    auto a = Agent::Create(std::move(o));
    if (!a.ok()) return a.status();
    return (*a)->Start();
  };
  Status st = start();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("reboot_program"), std::string::npos) << st.ToString();
  // The prolog, the epilog and the health check run as root too.
  config_.agent.reboot_program.clear();
  for (const auto& [field, key] :
       {std::pair{&config_.agent.prolog, "agent.prolog: "},
        std::pair{&config_.agent.epilog, "agent.epilog: "},
        std::pair{&config_.agent.health_check_program, "agent.health_check_program: "}}) {
    *field = program;
    st = start();
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
    EXPECT_EQ(st.message().rfind(key, 0), 0u) << "names the key: " << st.ToString();
    EXPECT_NE(st.message().find("could be changed by another user"), std::string::npos)
        << st.ToString();
    field->clear();
  }
  config_.agent.reboot_program = program;
  // A link to it from a directory others may write: the link could be turned anywhere.
  fs::permissions(program, fs::perms(0755));
  fs::create_directories(dir_ + "/open");
  fs::permissions(dir_ + "/open", fs::perms(0777));
  fs::create_symlink(program, dir_ + "/open/reboot");
  config_.agent.reboot_program = dir_ + "/open/reboot";
  st = start();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << "through a link in a shared directory";
  EXPECT_NE(st.message().find(dir_ + "/open"), std::string::npos) << st.ToString();
  // A trusted link to it is followed and its target checked.
  fs::create_symlink(program, dir_ + "/link");
  config_.agent.reboot_program = dir_ + "/link";
  EXPECT_TRUE(start().ok());
  // A link another user owns (made in a sticky directory such as /tmp) could be replaced by a
  // file of theirs between the check and the run.
  if (::geteuid() == 0) {
    fs::create_symlink(program, dir_ + "/theirs");
    ASSERT_EQ(::lchown((dir_ + "/theirs").c_str(), 65534, 65534), 0);
    config_.agent.reboot_program = dir_ + "/theirs";
    st = start();
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(st.message().find("is a link that uid 65534 owns"), std::string::npos)
        << st.ToString();
  }
  fs::permissions(dir_, fs::perms(0777));  // now the program's own directory is open to all
  EXPECT_EQ(start().code(), StatusCode::kFailedPrecondition);
  fs::permissions(dir_, fs::perms(0755));
}

TEST(AgentCommandLineTest, OptionsAndMistakes) {
  std::vector<std::string> args = {"musterd", "--name",    "gpu7",    "--spool",        "/var/x",
                                   "-a",      "0.0.0.0:0", "--probe", "--boot-id-file", "/b"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto cl = ParseAgentCommandLine(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_EQ(cl->options.node_name, "gpu7");
  EXPECT_EQ(cl->options.spool_dir, "/var/x");
  EXPECT_EQ(cl->options.step_address, "0.0.0.0:0");
  EXPECT_TRUE(cl->probe);
  EXPECT_EQ(cl->options.boot_id_file, "/b");
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {"musterd", "--nmae", "x"}, {"musterd", "--name"}, {"musterd", "stray"}}) {
    std::vector<char*> bargv;
    for (auto& a : bad) bargv.push_back(a.data());
    auto b = ParseAgentCommandLine(static_cast<int>(bargv.size()), bargv.data());
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << bad.back();
  }
}

}  // namespace
}  // namespace muster::agent
