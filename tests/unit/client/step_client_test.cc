// srun's side of a job step (RunStep) against a fake controller, which creates the step, and a
// fake node agent, which takes the launch and answers as the test tells it: the prolog and
// epilog srun runs around the step, --wait, --quit-on-interrupt and --open-mode.
#include "muster/client/step_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "muster/common/framing.h"
#include "muster/common/job_limits.h"

namespace muster::client {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Waits up to timeout_ms for a connection on `listener`; -1 when none came (or we stop).
int AcceptWithin(int listener, int timeout_ms) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return -1;
  return ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
}

class StepClientTest : public ::testing::Test {
 protected:
  // What the fake agent does with one launch connection: `fd` is the connection, `req` what
  // srun sent first.
  using Agent = std::function<void(int fd, const v1::StepLaunchRequest& req)>;

  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("muster-sc-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // The node's step port, on loopback.
    agent_listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(::bind(agent_listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(agent_listener_, 8), 0);
    ASSERT_EQ(::getsockname(agent_listener_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    agent_address_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    // The controller's socket.
    controller_listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un u{};
    u.sun_family = AF_UNIX;
    const std::string path = (dir_ / "ctl.sock").string();
    ASSERT_LT(path.size(), sizeof u.sun_path);
    std::memcpy(u.sun_path, path.c_str(), path.size() + 1);
    ASSERT_EQ(::bind(controller_listener_, reinterpret_cast<sockaddr*>(&u), sizeof u), 0);
    ASSERT_EQ(::listen(controller_listener_, 4), 0);
    controller_thread_ = std::thread([this] { ServeController(); });
    agent_thread_ = std::thread([this] { ServeAgent(); });
    auto c = ControllerClient::Connect(path);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    controller_.emplace(std::move(*c));

    options_.shape.set_job_id(42);
    options_.argv = {"/bin/prog", "arg one"};
    options_.environment = {"PATH=/usr/bin:/bin", "SLURM_STEP_ID=stale", "KEEP=me"};
    options_.stdin_mode = v1::StepLaunchRequest::STDIN_NONE;  // never the test's stdin
    options_.pmi = false;
  }

  void TearDown() override {
    stop_ = true;
    if (controller_thread_.joinable()) controller_thread_.join();
    if (agent_thread_.joinable()) agent_thread_.join();
    controller_.reset();
    ::close(agent_listener_);
    ::close(controller_listener_);
    fs::remove_all(dir_);
  }

  // Answers CreateStep with step 5 of job 42: ntasks_ tasks on one node, our fake agent.
  void ServeController() {
    int fd = -1;
    while (!stop_ && fd < 0) fd = AcceptWithin(controller_listener_, 50);
    if (fd < 0) return;
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      auto f = ReadFrame(fd, 1000);
      if (!f.ok()) break;
      if (f->type != v1::METHOD_CREATE_STEP) {
        WriteFrame(fd, static_cast<uint32_t>(StatusCode::kUnimplemented), "not in this fake")
            .IgnoreError();
        continue;
      }
      v1::CreateStepResponse r;
      r.set_job_id(42);
      r.set_step_id(5);
      r.set_total_tasks(ntasks_);
      r.set_name("prog");
      v1::StepNode* n = r.add_nodes();
      n->set_node("node1");
      n->set_step_address(agent_address_);
      n->set_ntasks(ntasks_);
      WriteFrame(fd, 0, r.SerializeAsString()).IgnoreError();
    }
    ::close(fd);
  }

  void ServeAgent() {
    while (!stop_) {
      const int fd = AcceptWithin(agent_listener_, 50);
      if (fd < 0) continue;
      auto f = ReadFrame(fd, 5000);
      v1::StepLaunchRequest req;
      if (f.ok() && req.ParseFromString(f->payload)) {
        {
          std::lock_guard<std::mutex> l(mu_);
          launches_.push_back(req);
        }
        Log(req.withdrawn() ? "withdrawn" : "launch");
        if (agent_) agent_(fd, req);
      }
      ::close(fd);
    }
  }

  void Log(const std::string& line) {
    std::lock_guard<std::mutex> l(mu_);
    std::ofstream(dir_ / "log", std::ios::app) << line << "\n";
  }

  static void Exit(int fd, uint32_t task, int code, int sig = 0) {
    v1::StepEvent ev;
    ev.mutable_exit()->set_task(task);
    ev.mutable_exit()->set_exit_code(code);
    ev.mutable_exit()->set_signal(sig);
    WriteFrame(fd, 0, ev.SerializeAsString()).IgnoreError();
  }

  // The next signal srun sends (frame type 1) within timeout_ms; 0 when none came.
  static int NextSignal(int fd, int timeout_ms) {
    const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < until) {
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
      auto f = ReadFrame(fd, std::max(left, 1));
      if (!f.ok()) return 0;
      if (f->type != 1) continue;
      v1::StepSignal s;
      if (s.ParseFromString(f->payload)) return s.signal();
    }
    return 0;
  }

  // An executable script in the test's directory.
  std::string Script(const std::string& name, const std::string& body) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\n" << body;
    ::chmod(p.c_str(), 0755);
    return p.string();
  }

  Result<int> Run() {
    err_ = std::tmpfile();
    auto rc = RunStep(*controller_, options_, stdout, err_);
    std::fflush(err_);
    std::rewind(err_);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, err_)) > 0) said_.append(buf, n);
    std::fclose(err_);
    return rc;
  }

  fs::path dir_;
  int agent_listener_ = -1, controller_listener_ = -1;
  std::string agent_address_;
  std::thread controller_thread_, agent_thread_;
  std::atomic<bool> stop_{false};
  std::optional<ControllerClient> controller_;
  uint32_t ntasks_ = 1;
  Agent agent_;
  std::mutex mu_;
  std::vector<v1::StepLaunchRequest> launches_;
  StepOptions options_;
  FILE* err_ = nullptr;
  std::string said_;  // what srun wrote on its stderr
};

TEST_F(StepClientTest, PrologAndEpilogRunHereAroundTheStepWithItsVariables) {
  const std::string log = (dir_ / "log").string();
  const std::string record =
      "echo \"$SLURM_SCRIPT_CONTEXT $# $1 [$2] job=$SLURM_JOB_ID step=$SLURM_STEP_ID "
      "nodes=$SLURM_STEP_NODELIST tasks=$SLURM_STEP_NUM_TASKS keep=$KEEP\" >> " +
      log + "\n";
  options_.prolog = Script("prolog", record);
  options_.epilog = Script("epilog", record + "exit 3\n");
  options_.open_mode_append = true;
  ntasks_ = 2;
  agent_ = [](int fd, const v1::StepLaunchRequest&) {
    Exit(fd, 0, 0);
    Exit(fd, 1, 0);
  };
  auto rc = Run();
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(*rc, 0) << "the epilog's status changes nothing";
  EXPECT_EQ(ReadAll(log),
            "prolog_srun 2 /bin/prog [arg one] job=42 step=5 nodes=node1 tasks=2 keep=me\n"
            "launch\n"
            "epilog_srun 2 /bin/prog [arg one] job=42 step=5 nodes=node1 tasks=2 keep=me\n");
  EXPECT_NE(said_.find("--epilog " + options_.epilog + " failed with exit code 3"),
            std::string::npos)
      << said_;
  ASSERT_EQ(launches_.size(), 1u);
  EXPECT_TRUE(launches_[0].open_mode_append()) << "--open-mode=append reaches the node";
  EXPECT_FALSE(launches_[0].withdrawn());
}

// A prolog that fails stops srun with an error naming it; the created step is withdrawn (the
// node starts nothing of it and ends it), and no epilog runs.
TEST_F(StepClientTest, AFailingPrologWithdrawsTheStepAndIsNamed) {
  options_.prolog = Script("prolog", "exit 5\n");
  options_.epilog = Script("epilog", "echo epilog >> " + (dir_ / "log").string() + "\n");
  agent_ = [](int fd, const v1::StepLaunchRequest& req) {
    if (!req.withdrawn()) Exit(fd, 0, 0);
  };
  auto rc = Run();
  ASSERT_FALSE(rc.ok());
  EXPECT_EQ(rc.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(rc.status().message().find("--prolog " + options_.prolog + " failed with exit code 5"),
            std::string::npos)
      << rc.status().message();
  EXPECT_EQ(ReadAll(dir_ / "log"), "withdrawn\n") << "the step must not run; nor the epilog";
  ASSERT_EQ(launches_.size(), 1u);
  EXPECT_EQ(launches_[0].argv(0), "/bin/false") << "an agent older than the mark runs nothing";
  EXPECT_EQ(launches_[0].step_id(), 5u);

  // One that cannot be run at all fails the same way, and says why.
  launches_.clear();
  options_.prolog = (dir_ / "no-such-prolog").string();
  rc = Run();
  ASSERT_FALSE(rc.ok());
  EXPECT_NE(rc.status().message().find("--prolog " + options_.prolog + " failed"),
            std::string::npos);
  EXPECT_NE(rc.status().message().find("No such file"), std::string::npos) << rc.status().message();
}

// srun -W: once the first task has ended, the others get that long, then the step is killed.
TEST_F(StepClientTest, WaitKillsTheOtherTasksThatLongAfterTheFirstEnds) {
  ntasks_ = 2;
  options_.wait_s = 1;
  std::atomic<int> got{0};
  std::atomic<int64_t> after_ms{0};
  agent_ = [&](int fd, const v1::StepLaunchRequest&) {
    Exit(fd, 0, 0);
    const auto first = Clock::now();
    got = NextSignal(fd, 10'000);
    after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - first).count();
    Exit(fd, 1, 0, SIGKILL);
  };
  auto rc = Run();
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(got, SIGKILL);
  EXPECT_GE(after_ms, 900);
  EXPECT_LT(after_ms, 5000);
  EXPECT_EQ(*rc, 128 + SIGKILL);
  EXPECT_NE(said_.find("first task exited 1s ago"), std::string::npos) << said_;

  // Without it (0, the default), the others run as long as they do.
  options_.wait_s = 0;
  agent_ = [&](int fd, const v1::StepLaunchRequest&) {
    Exit(fd, 0, 0);
    got = NextSignal(fd, 1500);
    Exit(fd, 1, 0);
  };
  rc = Run();
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(got, 0) << "a task was signalled without --wait";
  EXPECT_EQ(*rc, 0);
}

// Ctrl-C is forwarded to the tasks (a second within a second ends the step); with
// --quit-on-interrupt the first one ends it.
TEST_F(StepClientTest, QuitOnInterruptEndsTheStepOnTheFirstCtrlC) {
  ASSERT_TRUE(CatchForwardedSignals().ok());
  std::atomic<int> first{0};
  agent_ = [&](int fd, const v1::StepLaunchRequest&) {
    ::kill(::getpid(), SIGINT);
    first = NextSignal(fd, 10'000);
    if (first == SIGKILL) {
      Exit(fd, 0, 0, SIGKILL);
    } else {
      Exit(fd, 0, 128 + SIGINT);
    }
  };
  auto rc = Run();
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(first, SIGINT) << "one Ctrl-C is the tasks'";

  options_.quit_on_interrupt = true;
  said_.clear();
  rc = Run();
  ReleaseForwardedSignals();
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(first, SIGKILL) << "--quit-on-interrupt: one Ctrl-C ends the step";
  EXPECT_EQ(*rc, 128 + SIGKILL);
  EXPECT_NE(said_.find("forcing job step 42.5 to end"), std::string::npos) << said_;
}

// --bcast: each node is told where its copy goes and its size, and gets the program's bytes
// behind its launch, in frames of type 5; its argv is left as given (the node runs its copy).
TEST_F(StepClientTest, BcastSendsTheProgramBehindTheLaunch) {
  std::string body = "#!/bin/sh\necho from the copy\n";
  body += std::string(kBcastChunk + 100, '#');  // two frames
  const std::string prog = Script("prog", body);
  options_.bcast_program = prog;
  options_.bcast_dest = "/tmp/somedir/";
  std::string got;
  agent_ = [&](int fd, const v1::StepLaunchRequest& req) {
    std::string bytes;
    while (bytes.size() < req.bcast_size()) {
      auto f = ReadFrame(fd, 5000);
      if (!f.ok() || f->type != 5) break;
      bytes += f->payload;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      got = bytes;
    }
    Exit(fd, 0, 0);
  };
  auto rc = Run();
  ASSERT_TRUE(rc.ok()) << rc.status().ToString() << said_;
  EXPECT_EQ(*rc, 0) << said_;
  ASSERT_EQ(launches_.size(), 1u);
  EXPECT_EQ(launches_[0].bcast_path(), "/tmp/somedir/slurm_bcast_42.5_node1");
  EXPECT_EQ(launches_[0].bcast_size(), ReadAll(prog).size());
  EXPECT_EQ(launches_[0].argv(0), "/bin/prog");
  std::lock_guard<std::mutex> l(mu_);
  EXPECT_TRUE(got == ReadAll(prog)) << "the node got " << got.size() << " bytes";
}

// A node that cannot write its copy says why, as a node that cannot start its tasks does: srun
// reports it and fails.
TEST_F(StepClientTest, BcastANodeThatCannotWriteTheProgramIsReported) {
  options_.bcast_program = Script("prog", "echo never\n");
  options_.bcast_dest = "/tmp/somedir/";
  agent_ = [](int fd, const v1::StepLaunchRequest&) {
    WriteFrame(fd, static_cast<uint32_t>(StatusCode::kFailedPrecondition),
               "--bcast: cannot create /tmp/somedir/x: Permission denied")
        .IgnoreError();
    while (ReadFrame(fd, 5000).ok()) {  // what srun still sends, until it closes
    }
  };
  auto rc = Run();
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(*rc, 1);
  EXPECT_NE(said_.find("error: node node1: --bcast: cannot create /tmp/somedir/x: Permission "
                       "denied"),
            std::string::npos)
      << said_;

  // A program that cannot be read is refused before the step exists.
  launches_.clear();
  options_.bcast_program = dir_.string();
  rc = Run();
  ASSERT_FALSE(rc.ok());
  EXPECT_NE(rc.status().message().find("is not a regular file"), std::string::npos);
  EXPECT_TRUE(launches_.empty());
}

TEST(RunHostProgramTest, ExitCodesSignalsAndProgramsThatCannotRun) {
  auto rc = RunHostProgram("/bin/sh", {"-c", "exit $0", "7"}, {});
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(*rc, 7);
  rc = RunHostProgram("/bin/sh", {"-c", "[ \"$ONLY\" = this ] && [ -z \"$HOME\" ]"}, {"ONLY=this"});
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << "the environment given is the whole environment";
  rc = RunHostProgram("/bin/sh", {"-c", "kill -TERM $$"}, {});
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 128 + SIGTERM);
  rc = RunHostProgram("sh", {"-c", "true"}, {});
  EXPECT_FALSE(rc.ok()) << "no PATH search: a program is named by its path";
  rc = RunHostProgram("/nonexistent/prolog", {}, {});
  ASSERT_FALSE(rc.ok());
  EXPECT_NE(rc.status().message().find("cannot run /nonexistent/prolog"), std::string::npos)
      << rc.status().message();
}

}  // namespace
}  // namespace muster::client
