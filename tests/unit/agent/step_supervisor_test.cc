// muster-stepd, the step supervisor, as its own process: the client's connection on fd 0 and a
// setup file, as the agent hands a step over. Output, stdin, signals and exits go through the
// connection; the tasks' pids and the step's end are recorded in the job's directory.
#include "step_supervisor.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "harness/test_util.h"
#include "muster/common/cpu_bind.h"
#include "muster/common/framing.h"
#include "muster/common/strings.h"
#include "muster/v1/step_supervisor.pb.h"

namespace muster::agent {
namespace {

namespace fs = std::filesystem;

class StepSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("muster-stepd-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (client_ >= 0) ::close(client_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    fs::remove_all(dir_);
  }

  // A step of one task running `script` under sh, handed to a new muster-stepd; `early` is what
  // the client sent behind its request before the hand-over.
  void Start(const std::string& script, const std::string& early = "") {
    const v1::StepSupervisorSetup setup = Setup(script, early);
    setup_path_ = (dir_ / "setup").string();
    {
      std::ofstream out(setup_path_, std::ios::binary);
      out << setup.SerializeAsString();
    }
    const int server = Connect();
    ASSERT_GE(server, 0);
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::dup2(server, 0);
      ::execl(MUSTER_STEPD, MUSTER_STEPD, setup_path_.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(server);
  }

  // A loopback connection, as srun's to the node: client_ is srun's end; the node's is returned.
  int Connect() {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener, 1), 0);
    EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
    client_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(client_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const int server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(listener);
    return server;
  }

  v1::StepSupervisorSetup Setup(const std::string& script, const std::string& early) {
    v1::StepSupervisorSetup setup;
    v1::StepLaunchRequest& r = *setup.mutable_request();
    r.set_job_id(7);
    r.set_step_id(3);
    r.set_run(1);
    r.add_argv("/bin/sh");
    r.add_argv("-c");
    r.add_argv(script);
    r.add_environment("PATH=/usr/bin:/bin");
    r.set_first_task(first_task_);
    r.set_ntasks(ntasks_);
    r.set_total_tasks(first_task_ + ntasks_);
    for (uint32_t id : task_ids_) r.add_task_ids(id);
    if (!task_ids_.empty()) r.set_total_tasks(std::max(r.total_tasks(), task_ids_.back() + 1));
    r.set_total_nodes(1);
    r.set_pmi(pmi_);
    r.set_legacy_pmi_port(legacy_pmi_);
    r.set_stdin_mode(v1::StepLaunchRequest::STDIN_TASK);
    r.set_gpus_per_task(gpus_per_task_);
    r.set_gpu_bind(gpu_bind_);
    r.set_stdout_pattern(stdout_pattern_);
    r.set_open_mode_append(open_mode_append_);
    r.set_withdrawn(withdrawn_);
    r.set_cpu_bind(cpu_bind_);
    for (uint32_t c : cpu_ids_) r.add_cpu_ids(c);
    for (const auto& argv : task_commands_) {
      auto* command = r.add_task_commands();
      for (const auto& a : argv) command->add_argv(a);
    }
    r.set_task_prolog(task_prolog_);
    r.set_task_epilog(task_epilog_);
    r.set_bcast_path(bcast_path_);
    r.set_bcast_size(bcast_size_);
    if (!argv_.empty()) {
      r.clear_argv();
      for (const auto& a : argv_) r.add_argv(a);
    }
    for (const auto& e : environment_) r.add_environment(e);
    setup.set_visible_devices(visible_);
    for (const auto& near : gpu_cpus_) setup.add_gpu_cpus(near);
    v1::LaunchJob& l = *setup.mutable_launch();
    l.set_job_id(7);
    l.mutable_spec()->set_uid(job_uid_.value_or(::getuid()));
    l.mutable_spec()->set_gid(job_uid_ ? *job_uid_ : ::getgid());
    l.mutable_spec()->set_work_dir(dir_.string());
    setup.set_node("node1");
    setup.set_job_dir(dir_.string());
    setup.set_client_bytes(early);
    return setup;
  }

  void Send(uint32_t type, const std::string& payload) {
    ASSERT_TRUE(WriteFrame(client_, type, payload).ok());
  }

  // Everything the step sends until it closes the connection: output by stream, exits by task.
  struct Heard {
    std::map<uint32_t, std::string> output;  // stream -> bytes
    std::vector<v1::TaskExit> exits;
    std::string error;
    std::map<uint32_t, std::string> pmi;  // task -> what it wrote to PMI_FD
    std::vector<std::string> order;       // "pmi <task>" / "exit <task>", as they came
    uint64_t stdin_taken = 0;             // the last StepEvent.stdin_taken
  };
  // `answer`: what the client sends back on frame type 4 for what a task wrote to PMI_FD.
  Heard Listen(std::function<void(const v1::PmiData&)> answer = nullptr) {
    Heard h;
    for (;;) {
      auto f = ReadFrame(client_, 10'000);
      if (!f.ok()) break;
      if (f->type != 0) {
        h.error = f->payload;
        continue;
      }
      v1::StepEvent ev;
      EXPECT_TRUE(ev.ParseFromString(f->payload));
      if (ev.has_output()) h.output[ev.output().stream()] += ev.output().data();
      if (ev.has_exit()) {
        h.exits.push_back(ev.exit());
        h.order.push_back("exit " + std::to_string(ev.exit().task()));
      }
      if (ev.has_stdin_taken()) {
        EXPECT_GT(ev.stdin_taken(), h.stdin_taken) << "the window went back";
        h.stdin_taken = ev.stdin_taken();
      }
      if (ev.has_pmi()) {
        h.pmi[ev.pmi().task()] += ev.pmi().data();
        h.order.push_back("pmi " + std::to_string(ev.pmi().task()));
        if (answer) answer(ev.pmi());
      }
    }
    return h;
  }

  // What the step sends up to its error (after which a step that failed before its tasks waits
  // for the client to close the connection).
  Heard UntilError() {
    Heard h;
    while (h.error.empty()) {
      auto f = ReadFrame(client_, 10'000);
      if (!f.ok()) break;
      if (f->type != 0) {
        h.error = f->payload;
        break;
      }
      v1::StepEvent ev;
      EXPECT_TRUE(ev.ParseFromString(f->payload));
      if (ev.has_output()) h.output[ev.output().stream()] += ev.output().data();
      if (ev.has_exit()) h.exits.push_back(ev.exit());
    }
    return h;
  }

  int WaitSupervisor() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  // The copies under way that the test's directory holds (.muster-bcast-*).
  int BcastTempFiles() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      n += e.path().filename().string().rfind(".muster-bcast-", 0) == 0;
    }
    return n;
  }

  static std::string Slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream got;
    got << in.rdbuf();
    return got.str();
  }

  template <class Msg>
  bool ReadRecord(const char* what, Msg* out) {
    std::ifstream in(StepRecordPath(dir_.string(), 3, what), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return in && out->ParseFromString(ss.str());
  }

  uint32_t first_task_ = 0, ntasks_ = 1;
  std::vector<uint32_t> task_ids_;  // -m cyclic, plane: the tasks' ids here
  bool pmi_ = false, legacy_pmi_ = false;
  std::string visible_;                // the step's GPUs here
  std::vector<std::string> gpu_cpus_;  // the CPUs near each of them (--gpu-bind=closest)
  uint32_t gpus_per_task_ = 0;
  std::string gpu_bind_;
  std::string stdout_pattern_;  // srun -o
  bool open_mode_append_ = false, withdrawn_ = false;
  std::string cpu_bind_;                                 // srun --cpu-bind
  std::vector<uint32_t> cpu_ids_;                        // the step's CPUs here
  std::vector<std::vector<std::string>> task_commands_;  // srun --multi-prog
  std::string task_prolog_, task_epilog_;
  std::string bcast_path_;  // srun --bcast: where the program goes, and its size
  uint64_t bcast_size_ = 0;
  std::vector<std::string> argv_;         // the command, instead of sh -c SCRIPT
  std::optional<uint32_t> job_uid_;       // the job's user (and group), when not ours
  std::vector<std::string> environment_;  // the client's, besides PATH
  fs::path dir_;
  std::string setup_path_;
  int client_ = -1;
  pid_t pid_ = -1;
};

TEST_F(StepSupervisorTest, RunsTheStepThroughTheConnectionAndRecordsItsEnd) {
  // stdin sent before the hand-over and after it both reach the task.
  Start("echo out; echo err >&2; read a; read b; echo got $a $b; exit 3",
        EncodeFrame(2, "early\n"));
  Send(2, "late\n");
  Send(2, "");
  Heard h = Listen();
  EXPECT_EQ(h.error, "");
  EXPECT_EQ(h.output[1], "out\ngot early late\n");
  EXPECT_EQ(h.output[2], "err\n");
  ASSERT_EQ(h.exits.size(), 1u);
  EXPECT_EQ(h.exits[0].exit_code(), 3);
  const int status = WaitSupervisor();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  v1::StepEnded end;
  ASSERT_TRUE(ReadRecord("end", &end));
  EXPECT_EQ(end.job_id(), 7u);
  EXPECT_EQ(end.step_id(), 3u);
  EXPECT_EQ(end.run(), 1u);
  EXPECT_EQ(end.exit_code(), 3);
  EXPECT_FALSE(end.killed());
  v1::StepTaskPids pids;
  ASSERT_TRUE(ReadRecord("tasks", &pids));
  ASSERT_EQ(pids.pids_size(), 1);
  EXPECT_GT(pids.pids(0), 0);
  EXPECT_FALSE(fs::exists(setup_path_)) << "the setup is read once, then removed";
}

// --gpus-per-task: each task sees its own GPUs of the step's, as CUDA (and ROCm) read them.
TEST_F(StepSupervisorTest, EachTaskSeesItsOwnShareOfTheStepsGpus) {
  ntasks_ = 3;
  first_task_ = 2;
  visible_ = "1,3,5,7,8,9";
  gpus_per_task_ = 2;
  Start("echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES $ROCR_VISIBLE_DEVICES $SLURM_STEP_GPUS");
  Heard h = Listen();
  std::vector<std::string> lines = Split(h.output[1], '\n', true);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"2 1,3 1,3", "3 5,7 5,7", "4 8,9 8,9"}))
      << h.output[1] << h.error;
}

TEST_F(StepSupervisorTest, AGpuBindBeyondTheStepsGpusFailsTheStepAndNamesIt) {
  visible_ = "1,3";
  gpu_bind_ = "map_gpu:2";
  Start("echo ran");
  Heard h = Listen();
  EXPECT_EQ(h.output[1], "") << "nothing runs on a GPU the step does not hold";
  EXPECT_NE(h.error.find("--gpu-bind names GPU 2 of the step, which holds 2 here"),
            std::string::npos)
      << h.error;
}

TEST_F(StepSupervisorTest, SignalsReachTheTasks) {
  Start("trap 'echo term; exit 7' TERM; echo ready; while :; do sleep 0.05; done");
  auto f = ReadFrame(client_, 10'000);
  ASSERT_TRUE(f.ok());
  v1::StepSignal sig;
  sig.set_signal(SIGTERM);
  Send(1, sig.SerializeAsString());
  Heard h = Listen();
  EXPECT_EQ(h.output[1], "term\n");
  ASSERT_EQ(h.exits.size(), 1u);
  EXPECT_EQ(h.exits[0].exit_code(), 7);
  WaitSupervisor();
}

TEST_F(StepSupervisorTest, AClientThatGoesAwayEndsTheStepAsKilled) {
  Start("echo ready; sleep 600");
  ASSERT_TRUE(ReadFrame(client_, 10'000).ok());
  ::close(client_);
  client_ = -1;
  const int status = WaitSupervisor();  // the task was killed, so the supervisor ends
  EXPECT_TRUE(WIFEXITED(status)) << status;
  v1::StepEnded end;
  ASSERT_TRUE(ReadRecord("end", &end));
  EXPECT_TRUE(end.killed());
  v1::StepTaskPids pids;
  ASSERT_TRUE(ReadRecord("tasks", &pids));
  ASSERT_EQ(pids.pids_size(), 1);
  EXPECT_NE(::kill(pids.pids(0), 0), 0) << "its task is gone";
}

TEST_F(StepSupervisorTest, SignalsToTheSupervisorItselfDoNotEndTheStep) {
  // A signal to the whole job cgroup reaches the supervisor too; the agent signals the tasks.
  Start("echo ready; read x; echo got $x");
  ASSERT_TRUE(ReadFrame(client_, 10'000).ok());
  // A fatal signal would end it before it could read the next frame (signals are acted on
  // before a process returns to user space), so no wait is needed here.
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) ASSERT_EQ(::kill(pid_, sig), 0);
  Send(2, "on\n");
  Send(2, "");
  Heard h = Listen();
  EXPECT_EQ(h.output[1], "got on\n");
  ASSERT_EQ(h.exits.size(), 1u);
  EXPECT_EQ(h.exits[0].exit_code(), 0);
  const int status = WaitSupervisor();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// PMI is a socket pair per task, relayed over the client's connection: there is no port that
// another user could find and connect to (one once could, and spend the step's tries).
TEST_F(StepSupervisorTest, EachTaskSpeaksPmiOnlyThroughItsOwnInheritedSocket) {
  first_task_ = 4;  // global task ids: 4 and 5 of 6
  ntasks_ = 2;
  pmi_ = true;
  Start(
      "printf 'cmd=init pmi_version=1\\n' >&$PMI_FD; read -r a <&$PMI_FD; "
      "echo \"$SLURM_PROCID $PMI_RANK $PMI_SIZE ${PMI_PORT:-noport} "
      "$(readlink /proc/self/fd/$PMI_FD | cut -c1-7) $a\"; "
      "printf 'cmd=finalize\\n' >&$PMI_FD; exit 0");
  Heard h = Listen([&](const v1::PmiData& got) {
    if (got.data().find("init") == std::string::npos) return;
    v1::PmiData bogus;  // a task that is not here: ignored, and the step goes on
    bogus.set_task(0);
    bogus.set_data("for nobody\n");
    Send(4, bogus.SerializeAsString());
    v1::PmiData answer;
    answer.set_task(got.task());
    answer.set_data("hello" + std::to_string(got.task()) + "\n");
    Send(4, answer.SerializeAsString());
  });
  EXPECT_EQ(h.error, "");
  std::multiset<std::string> lines;
  std::istringstream ss(h.output[1]);
  for (std::string l; std::getline(ss, l);) lines.insert(l);
  EXPECT_EQ(lines, (std::multiset<std::string>{"4 4 6 noport socket: hello4",
                                               "5 5 6 noport socket: hello5"}))
      << h.output[1] << h.output[2];
  EXPECT_EQ(h.pmi[4], "cmd=init pmi_version=1\ncmd=finalize\n");
  EXPECT_EQ(h.pmi[5], "cmd=init pmi_version=1\ncmd=finalize\n");
  // What a task wrote before it ended comes before its exit (an abort is not lost).
  for (const std::string task : {"4", "5"}) {
    auto exit = std::find(h.order.begin(), h.order.end(), "exit " + task);
    ASSERT_NE(exit, h.order.end());
    EXPECT_EQ(std::find(exit, h.order.end(), "pmi " + task), h.order.end()) << task;
  }
  ASSERT_EQ(h.exits.size(), 2u);
  for (const auto& x : h.exits) EXPECT_EQ(x.exit_code(), 0);
  WaitSupervisor();
}

// A process the task left behind keeps its PMI socket (fd 3) open: the task's end is still
// reported when it exits, not when that process does.
TEST_F(StepSupervisorTest, ATaskEndsThoughWhatItLeftBehindHoldsItsPmiSocket) {
  pmi_ = true;
  Start("sleep 30 </dev/null >/dev/null 2>&1 & printf 'cmd=abort exitcode=4\\n' >&3; exit 2");
  const auto started = std::chrono::steady_clock::now();
  Heard h = Listen();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_EQ(h.pmi[0], "cmd=abort exitcode=4\n") << "what it wrote before it ended was lost";
  ASSERT_EQ(h.exits.size(), 1u);
  EXPECT_EQ(h.exits[0].exit_code(), 2);
  ASSERT_EQ(h.order.back(), "exit 0");
  v1::StepTaskPids pids;
  ASSERT_TRUE(ReadRecord("tasks", &pids));
  ::kill(-pids.pids(0), SIGKILL);  // the sleep, in the task's process group
  WaitSupervisor();
}

// The PMI server gives up on a rank (an empty answer): the task's socket closes, so it fails at
// once instead of waiting for answers that never come.
TEST_F(StepSupervisorTest, ARankThePmiServerDropsSeesItsSocketClose) {
  pmi_ = true;
  Start("printf 'x\\n' >&3; if read -r a <&3; then echo got $a; else echo eof; fi");
  Heard h = Listen([&](const v1::PmiData& got) {
    v1::PmiData drop;
    drop.set_task(got.task());
    Send(4, drop.SerializeAsString());
  });
  EXPECT_EQ(h.output[1], "eof\n");
  WaitSupervisor();
}

// srun's stdin window: the node says how much the tasks took, so srun never fills the node and
// the connection is never paused (PMI answers would wait behind the input).
TEST_F(StepSupervisorTest, TheNodeTellsHowMuchStdinItsTasksTook) {
  Start("cat >/dev/null; echo done");
  const std::string chunk(1u << 20, 'i');
  for (int i = 0; i < 3; ++i) Send(2, chunk);
  Send(2, "");
  Heard h = Listen();
  EXPECT_EQ(h.output[1], "done\n");
  EXPECT_EQ(h.stdin_taken, 3u << 20);
  WaitSupervisor();
}

TEST_F(StepSupervisorTest, AnOlderSrunsPmiPortIsRefusedNamingTheUpgrade) {
  legacy_pmi_ = true;
  Start("echo ran");
  Heard h = Listen();
  EXPECT_NE(h.error.find("use the srun (muster) of this node's release"), std::string::npos)
      << h.error;
  EXPECT_EQ(h.output[1], "");
  WaitSupervisor();
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// srun -o FILE: the step's output file is emptied when the step first opens it, unless
// --open-mode=append asks to add to it.
TEST_F(StepSupervisorTest, OutputFilesAreTruncatedUnlessTheStepAppends) {
  ntasks_ = 2;
  stdout_pattern_ = (dir_ / "out.txt").string();
  std::ofstream(dir_ / "out.txt") << "before\n";
  Start("echo task$SLURM_PROCID");
  Heard h = Listen();
  ASSERT_EQ(h.exits.size(), 2u) << h.error;
  WaitSupervisor();
  std::vector<std::string> lines = Split(ReadAll(dir_ / "out.txt"), '\n', true);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"task0", "task1"})) << "truncated once, by the step";

  ::close(client_);
  client_ = -1;
  open_mode_append_ = true;
  Start("echo again$SLURM_PROCID");
  h = Listen();
  ASSERT_EQ(h.exits.size(), 2u) << h.error;
  WaitSupervisor();
  lines = Split(ReadAll(dir_ / "out.txt"), '\n', true);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"again0", "again1", "task0", "task1"}))
      << "--open-mode=append keeps what was there";
}

// srun gives a created step up before it starts (its --prolog failed): nothing runs, and the
// step's end is recorded (the controller frees what it holds).
TEST_F(StepSupervisorTest, AWithdrawnStepRunsNothingAndEnds) {
  withdrawn_ = true;
  Start("echo ran > " + (dir_ / "ran").string());
  Heard h = Listen();
  EXPECT_NE(h.error.find("withdrawn"), std::string::npos) << h.error;
  EXPECT_TRUE(h.exits.empty());
  const int status = WaitSupervisor();
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_FALSE(fs::exists(dir_ / "ran")) << "a withdrawn step's command ran";
  v1::StepEnded end;
  ASSERT_TRUE(ReadRecord("end", &end));
  EXPECT_EQ(end.step_id(), 3u);
  EXPECT_TRUE(end.killed());
  EXPECT_EQ(end.exit_code(), 0) << "cancelled, not failed: nothing of it ran";
}

// Two CPUs this process may run on (the tasks' binding must lie within them), or fewer.
std::vector<uint32_t> TwoOfOurCpus() {
  cpu_set_t mine;
  std::vector<uint32_t> cpus;
  if (::sched_getaffinity(0, sizeof mine, &mine) != 0) return cpus;
  for (uint32_t c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &mine)) cpus.push_back(c);
  }
  return cpus;
}

// srun --cpu-bind: each task runs on its own CPUs of the step's (Cpus_allowed_list, which
// everything it starts inherits), sees Slurm's SLURM_CPU_BIND* variables and, with verbose, the
// binding reported on its stderr before anything it writes.
TEST_F(StepSupervisorTest, EachTaskIsBoundToItsOwnCpusOfTheSteps) {
  cpu_ids_ = TwoOfOurCpus();
  if (cpu_ids_.size() < 2) GTEST_SKIP() << "needs two CPUs";
  const std::string a = std::to_string(cpu_ids_[0]), b = std::to_string(cpu_ids_[1]);
  ntasks_ = 2;
  cpu_bind_ = "verbose,map_cpu:" + b + "," + a;
  Start(
      "echo $SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status | cut -f2) "
      "$SLURM_CPU_BIND_TYPE $SLURM_CPU_BIND_LIST $SLURM_CPU_BIND_VERBOSE $SLURM_CPU_BIND");
  Heard h = Listen();
  std::vector<std::string> lines = Split(h.output[1], '\n', true);
  std::sort(lines.begin(), lines.end());
  const std::string list = b + "," + a;
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "0 " + b + " map_cpu: " + list + " verbose verbose,map_cpu:" + list,
                       "1 " + a + " map_cpu: " + list + " verbose verbose,map_cpu:" + list}))
      << h.output[1] << h.output[2] << h.error;
  EXPECT_NE(h.output[2].find("cpu-bind=MAP  - node1, task  0  0 ["), std::string::npos)
      << h.output[2];
  EXPECT_NE(h.output[2].find("cpu-bind=MAP  - node1, task  1  1 ["), std::string::npos)
      << h.output[2];
}

// --gpu-bind=closest: each task sees the step's GPUs near the CPUs it is bound to.
TEST_F(StepSupervisorTest, ClosestGivesEachTaskTheGpusNearItsCpus) {
  cpu_ids_ = TwoOfOurCpus();
  if (cpu_ids_.size() < 2) GTEST_SKIP() << "needs two CPUs";
  const std::string a = std::to_string(cpu_ids_[0]), b = std::to_string(cpu_ids_[1]);
  ntasks_ = 2;
  visible_ = "4,5,6";
  gpu_cpus_ = {a, b, ""};  // GPU 4 near CPU a, 5 near b, 6 of unknown place (near all)
  cpu_bind_ = "map_cpu:" + b + "," + a;
  gpu_bind_ = "closest";
  Start("echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES");
  Heard h = Listen();
  std::vector<std::string> lines = Split(h.output[1], '\n', true);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"0 5,6", "1 4,6"})) << h.output[1] << h.error;
}

TEST_F(StepSupervisorTest, AnAutomaticBindingDealsTheStepsCpusAndSaysSoAsMasks) {
  cpu_ids_ = TwoOfOurCpus();
  if (cpu_ids_.size() < 2) GTEST_SKIP() << "needs two CPUs";
  ntasks_ = 2;
  cpu_bind_ = "threads";
  Start("echo $(grep Cpus_allowed_list /proc/self/status | cut -f2) $SLURM_CPU_BIND_TYPE");
  Heard h = Listen();
  std::vector<std::string> lines = Split(h.output[1], '\n', true);
  ASSERT_EQ(lines.size(), 2u) << h.output[1] << h.error;
  std::set<std::string> cpus;
  for (const std::string& line : lines) {
    auto words = Split(line, ' ');
    ASSERT_EQ(words.size(), 2u) << line;
    EXPECT_EQ(words[1], "mask_cpu:");
    cpus.insert(words[0]);
  }
  EXPECT_EQ(cpus, (std::set<std::string>{std::to_string(cpu_ids_[0]), std::to_string(cpu_ids_[1])}))
      << "one thread each, the two of them: " << h.output[1];
}

TEST_F(StepSupervisorTest, ABindingToACpuTheStepDoesNotHoldFailsTheStepAndNamesIt) {
  cpu_ids_ = TwoOfOurCpus();
  if (cpu_ids_.size() < 2) GTEST_SKIP() << "needs two CPUs";
  const uint32_t other = cpu_ids_[1];
  cpu_ids_.pop_back();
  cpu_bind_ = "map_cpu:" + std::to_string(other);
  Start("echo ran");
  Heard h = Listen();
  EXPECT_EQ(h.output[1], "") << "nothing runs on a CPU the step does not hold";
  EXPECT_NE(h.error.find("names CPU " + std::to_string(other) +
                         ", which the step does not hold on this node"),
            std::string::npos)
      << h.error;
}

// -m cyclic: the tasks here are the ids the launch lists, and PMI answers reach the task they
// name, not the one at that offset from first_task.
TEST_F(StepSupervisorTest, ListedTaskIdsNameTheTasksAndTheirPmi) {
  first_task_ = 1;
  ntasks_ = 2;
  task_ids_ = {1, 3};
  pmi_ = true;
  Start(
      "printf 'cmd=init pmi_version=1\\n' >&$PMI_FD; read -r a <&$PMI_FD; "
      "echo \"$SLURM_PROCID $SLURM_LOCALID $PMI_RANK $SLURM_GTIDS $a\"; "
      "printf 'cmd=finalize\\n' >&$PMI_FD; exit 0");
  Heard h = Listen([&](const v1::PmiData& got) {
    if (got.data().find("init") == std::string::npos) return;
    v1::PmiData bogus;  // task 2 is another node's: ignored
    bogus.set_task(2);
    bogus.set_data("for nobody\n");
    Send(4, bogus.SerializeAsString());
    v1::PmiData answer;
    answer.set_task(got.task());
    answer.set_data("hello" + std::to_string(got.task()) + "\n");
    Send(4, answer.SerializeAsString());
  });
  EXPECT_EQ(h.error, "");
  std::vector<std::string> lines = Split(h.output[1], '\n', true);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"1 0 1 1,3 hello1", "3 1 3 1,3 hello3"}))
      << h.output[1] << h.output[2];
  EXPECT_EQ(h.pmi[3], "cmd=init pmi_version=1\ncmd=finalize\n");
  ASSERT_EQ(h.exits.size(), 2u);
  std::set<uint32_t> exited;
  for (const auto& e : h.exits) exited.insert(e.task());
  EXPECT_EQ(exited, (std::set<uint32_t>{1, 3}));
}

// srun --multi-prog: each task runs its own command line.
TEST_F(StepSupervisorTest, EachTaskRunsItsOwnCommandWithMultiProg) {
  ntasks_ = 2;
  first_task_ = 4;
  task_commands_ = {{"/bin/sh", "-c", "echo first $SLURM_PROCID"}, {"/bin/echo", "second", "5"}};
  Start("echo not this");
  Heard h = Listen();
  std::vector<std::string> lines = Split(h.output[1], '\n', true);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"first 4", "second 5"})) << h.output[1] << h.error;
}

// srun --task-prolog/--task-epilog: run as the task's user around each task, in its environment;
// the prolog's export, unset and print lines shape the task.
TEST_F(StepSupervisorTest, TaskPrologShapesEachTaskAndTheEpilogFollowsIt) {
  const fs::path prolog = dir_ / "prolog.sh", epilog = dir_ / "epilog.sh";
  {
    std::ofstream p(prolog);
    p << "#!/bin/sh\necho \"export FROM_PROLOG=task $SLURM_PROCID\"\necho unset DROPPED\n"
         "echo print printed by the prolog\necho prolog says >&2\n";
    std::ofstream e(epilog);
    e << "#!/bin/sh\necho \"epilog $SLURM_PROCID saw $FROM_PROLOG\"\n";
  }
  fs::permissions(prolog, fs::perms::owner_all);
  fs::permissions(epilog, fs::perms::owner_all);
  task_prolog_ = prolog.string();
  task_epilog_ = epilog.string();
  environment_ = {"DROPPED=here"};
  ntasks_ = 2;
  Start("echo \"$SLURM_PROCID $FROM_PROLOG ${DROPPED:-unset}\"");
  Heard h = Listen();
  std::vector<std::string> lines = Split(h.output[1], '\n', true);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"0 task 0 unset", "1 task 1 unset",
                                             "epilog 0 saw task 0", "epilog 1 saw task 1",
                                             "printed by the prolog", "printed by the prolog"}))
      << h.output[1] << h.output[2] << h.error;
  EXPECT_NE(h.output[2].find("prolog says"), std::string::npos) << h.output[2];
  ASSERT_EQ(h.exits.size(), 2u);
  for (const auto& e : h.exits) EXPECT_EQ(e.exit_code(), 0);
}

TEST_F(StepSupervisorTest, AFailingTaskPrologFailsItsTaskWhichNeverRuns) {
  const fs::path prolog = dir_ / "prolog.sh";
  {
    std::ofstream p(prolog);
    p << "#!/bin/sh\nexit 3\n";
  }
  fs::permissions(prolog, fs::perms::owner_all);
  task_prolog_ = prolog.string();
  Start("echo ran > " + (dir_ / "ran").string());
  Heard h = Listen();
  ASSERT_EQ(h.exits.size(), 1u);
  EXPECT_EQ(h.exits[0].exit_code(), 3);
  EXPECT_NE(h.output[2].find("--task-prolog " + prolog.string() + " failed with exit code 3"),
            std::string::npos)
      << h.output[2];
  EXPECT_FALSE(fs::exists(dir_ / "ran"));
  // A prolog that cannot be run at all fails its task too, saying why.
  task_prolog_ = (dir_ / "missing.sh").string();
  ::close(client_);
  WaitSupervisor();
  Start("echo ran > " + (dir_ / "ran").string());
  h = Listen();
  ASSERT_EQ(h.exits.size(), 1u);
  EXPECT_EQ(h.exits[0].exit_code(), 1);
  EXPECT_NE(h.output[2].find("--task-prolog " + task_prolog_), std::string::npos) << h.output[2];
  EXPECT_FALSE(fs::exists(dir_ / "ran"));
}

// srun going away while a task's prolog runs: the prolog is killed and the task never starts.
TEST_F(StepSupervisorTest, AStepKilledDuringATaskPrologNeverStartsTheTask) {
  const fs::path prolog = dir_ / "prolog.sh", started = dir_ / "prolog.started";
  {
    std::ofstream p(prolog);
    p << "#!/bin/sh\necho $$ > " << started.string() << "\nexec sleep 30\n";
  }
  fs::permissions(prolog, fs::perms::owner_all);
  task_prolog_ = prolog.string();
  Start("echo ran > " + (dir_ / "ran").string());
  auto running = [&] {
    std::error_code ec;
    return fs::file_size(started, ec) > 0 && !ec;
  };
  for (int i = 0; i < 500 && !running(); ++i) ::usleep(10'000);
  ASSERT_TRUE(fs::exists(started));
  std::ifstream in(started);
  pid_t pid = 0;
  in >> pid;
  ASSERT_GT(pid, 0);
  ::close(client_);  // as when srun is killed
  client_ = -1;
  const int status = WaitSupervisor();
  EXPECT_TRUE(WIFEXITED(status)) << status;
  v1::StepEnded end;
  ASSERT_TRUE(ReadRecord("end", &end));
  EXPECT_TRUE(end.killed());
  EXPECT_FALSE(fs::exists(dir_ / "ran"));
  EXPECT_NE(::kill(pid, 0), 0) << "the prolog outlived its step";
}

// A task prolog that ends just as the client goes away (both seen in one turn of the supervisor,
// the prolog's end first): the step is stopping, so its task never starts.
TEST_F(StepSupervisorTest, AStepKilledAsItsTaskPrologEndsNeverStartsTheTask) {
  const fs::path prolog = dir_ / "prolog.sh", started = dir_ / "prolog.started", go = dir_ / "go";
  {
    std::ofstream p(prolog);
    p << "#!/bin/sh\necho $$ > " << started.string() << "\nwhile [ ! -e " << go.string()
      << " ]; do sleep 0.01; done\n";
  }
  fs::permissions(prolog, fs::perms::owner_all);
  task_prolog_ = prolog.string();
  Start("echo ran > " + (dir_ / "ran").string());
  auto running = [&] {
    std::error_code ec;
    return fs::file_size(started, ec) > 0 && !ec;
  };
  for (int i = 0; i < 500 && !running(); ++i) ::usleep(10'000);
  ASSERT_TRUE(running());
  pid_t pid = 0;
  std::ifstream(started) >> pid;
  ASSERT_GT(pid, 0);
  // The supervisor sleeps while the prolog ends (a zombie it has not reaped) and the client goes.
  ASSERT_EQ(::kill(pid_, SIGSTOP), 0);
  std::ofstream(go) << "\n";
  auto zombie = [&] {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    std::getline(stat, text);
    const size_t paren = text.rfind(')');
    return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
  };
  for (int i = 0; i < 500 && !zombie(); ++i) ::usleep(10'000);
  EXPECT_TRUE(zombie());
  ::close(client_);  // as when srun is killed
  client_ = -1;
  ::usleep(50'000);
  ASSERT_EQ(::kill(pid_, SIGCONT), 0);
  const int status = WaitSupervisor();
  EXPECT_TRUE(WIFEXITED(status)) << status;
  v1::StepEnded end;
  ASSERT_TRUE(ReadRecord("end", &end));
  EXPECT_TRUE(end.killed());
  EXPECT_FALSE(fs::exists(dir_ / "ran")) << "the task started after its step was killed";
}

// A task prolog that writes without end to its stderr while srun does not read (stopped with
// Ctrl-Z): its output waits in the pipe, not in the supervisor, which runs as root.
TEST_F(StepSupervisorTest, ATaskPrologsEndlessOutputWaitsForTheClient) {
  const fs::path prolog = dir_ / "prolog.sh";
  {
    std::ofstream p(prolog);
    p << "#!/bin/sh\nexec cat /dev/zero >&2\n";
  }
  fs::permissions(prolog, fs::perms::owner_all);
  task_prolog_ = prolog.string();
  Start("echo ran");
  auto rss_kib = [&] {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (StartsWith(line, "VmRSS:")) return std::stol(line.substr(6));
    }
    return 0L;
  };
  long most = 0;
  for (int i = 0; i < 40 && most < (128L << 10); ++i) {
    ::usleep(50'000);
    most = std::max(most, rss_kib());
  }
  EXPECT_LT(most, 64L << 10) << "the supervisor holds the prolog's output: " << most << " KiB";
  ::close(client_);  // the prolog is killed with its step
  client_ = -1;
}

// An empty --multi-prog command for one task starts none of them.
TEST_F(StepSupervisorTest, AnEmptyMultiProgCommandStartsNoTask) {
  ntasks_ = 2;
  task_commands_ = {{"/bin/sh", "-c", "sleep 5"}, {}};
  Start("echo not this");
  Heard h = Listen();
  EXPECT_NE(h.error.find("no command for task 1"), std::string::npos) << h.error;
  v1::StepTaskPids pids;
  EXPECT_FALSE(ReadRecord("tasks", &pids) && pids.pids_size() > 0)
      << "a task started before the bad command was seen";
}

// --cpu-bind=verbose,none reports the step's CPUs (what the task may run on), not the
// supervisor's own.
TEST_F(StepSupervisorTest, AVerboseNoneBindingReportsTheStepsCpus) {
  cpu_ids_ = TwoOfOurCpus();
  if (cpu_ids_.size() < 2) GTEST_SKIP() << "needs two CPUs";
  cpu_ids_.pop_back();
  cpu_bind_ = "verbose,none";
  Start("echo ran");
  Heard h = Listen();
  EXPECT_EQ(h.output[1], "ran\n") << h.error;
  EXPECT_NE(h.output[2].find("cpu-bind=NONE - node1, task  0  0 ["), std::string::npos)
      << h.output[2];
  EXPECT_NE(h.output[2].find("]: mask 0x" + CpuMaskHex(cpu_ids_) + "\n"), std::string::npos)
      << h.output[2];
}

TEST_F(StepSupervisorTest, AnUnreadableSetupIsRefused) {
  setup_path_ = (dir_ / "missing").string();
  pid_ = ::fork();
  ASSERT_GE(pid_, 0);
  if (pid_ == 0) {
    ::execl(MUSTER_STEPD, MUSTER_STEPD, setup_path_.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const int status = WaitSupervisor();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
}

// srun --bcast: the program arrives behind the launch (some before the hand-over, some after), is
// written to its destination over what was there, mode 0700, and every task here runs that one
// copy as its argv[0].
TEST_F(StepSupervisorTest, BcastWritesTheProgramOnceAndTheTasksRunTheCopy) {
  const std::string program =
      "#!/bin/sh\necho \"$0 $1 $SLURM_PROCID\"\n" + std::string(300'000, '#') + "\n";
  const fs::path copy = dir_ / "copy";
  std::ofstream(copy) << "an older file";
  fs::permissions(copy, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                            fs::perms::others_read);
  bcast_path_ = copy.string();
  bcast_size_ = program.size();
  argv_ = {"prog", "one"};
  ntasks_ = 2;
  Start("", EncodeFrame(5, program.substr(0, 100)));
  Send(5, program.substr(100, 200'000));
  Send(5, program.substr(200'100));
  Send(2, "");
  Heard h = Listen();
  EXPECT_EQ(h.error, "");
  std::vector<std::string> lines = Split(h.output[1], '\n', true);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{copy.string() + " one 0", copy.string() + " one 1"}))
      << h.output[2];
  ASSERT_EQ(h.exits.size(), 2u);
  for (const auto& e : h.exits) EXPECT_EQ(e.exit_code(), 0);
  std::ifstream in(copy, std::ios::binary);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_TRUE(got.str() == program) << "the copy has " << got.str().size() << " bytes";
  struct stat st {};
  ASSERT_EQ(::stat(copy.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, ::getuid());
  WaitSupervisor();
}

// The destination is never written through a symbolic link, even to a file the writer could
// write: the step fails before anything runs, and the link's target is as it was.
TEST_F(StepSupervisorTest, BcastNeverWritesThroughASymlink) {
  const fs::path target = dir_ / "target", link = dir_ / "link";
  std::ofstream(target) << "precious\n";
  fs::create_symlink(target, link);
  bcast_path_ = link.string();
  bcast_size_ = 10;
  argv_ = {"prog"};
  Start("");
  Send(5, "0123456789");
  Heard h = UntilError();
  EXPECT_NE(h.error.find("--bcast: " + link.string() + " is a symbolic link"), std::string::npos)
      << h.error;
  EXPECT_TRUE(h.exits.empty());
  ::close(client_);
  client_ = -1;
  WaitSupervisor();
  std::ifstream in(target);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), "precious\n");
  EXPECT_TRUE(fs::is_symlink(link));
  v1::StepEnded end;
  ASSERT_TRUE(ReadRecord("end", &end));
  EXPECT_EQ(end.exit_code(), 1);
  v1::StepTaskPids pids;
  ASSERT_TRUE(ReadRecord("tasks", &pids)) << "the writer is recorded, for the job's end to reach";
  EXPECT_EQ(pids.pids_size(), 1) << "the writer alone: no task started";
}

// The node takes exactly the bytes announced: more, or fewer (srun gone), start nothing, and the
// partial copy is removed.
TEST_F(StepSupervisorTest, BcastTakesExactlyTheAnnouncedBytes) {
  const fs::path copy = dir_ / "copy";
  bcast_path_ = copy.string();
  bcast_size_ = 10;
  argv_ = {"prog"};
  Start("");
  Send(5, "012345");
  Send(5, "6789A");
  Heard h = UntilError();
  EXPECT_NE(h.error.find("--bcast: srun sent more than the program's 10 bytes"), std::string::npos)
      << h.error;
  EXPECT_TRUE(h.exits.empty());
  ::close(client_);
  client_ = -1;
  WaitSupervisor();
  EXPECT_FALSE(fs::exists(copy)) << "the partial copy stays";

  bcast_size_ = 100;
  Start("");
  Send(5, "0123456789");
  ASSERT_EQ(::shutdown(client_, SHUT_WR), 0);  // srun gone, as far as the node can tell
  h = UntilError();
  EXPECT_NE(h.error.find("srun went away after sending 10 of the program's 100 bytes"),
            std::string::npos)
      << h.error;
  EXPECT_TRUE(h.exits.empty());
  WaitSupervisor();
  EXPECT_FALSE(fs::exists(copy));
  ::close(client_);
  client_ = -1;

  bcast_size_ = 5;
  Start("");
  Send(2, "");  // anything but the program before its last byte is refused
  h = UntilError();
  EXPECT_NE(h.error.find("srun sent a frame of type 2 after 0 of the program's 5 bytes"),
            std::string::npos)
      << h.error;
}

// A destination the node refuses outright (srun never sends one: a client of its own might).
TEST_F(StepSupervisorTest, BcastRefusesARelativeOrDotDotDestination) {
  argv_ = {"prog"};
  bcast_size_ = 3;
  for (const std::string& path : {std::string("copy"), (dir_ / "sub" / ".." / "copy").string()}) {
    bcast_path_ = path;
    Start("");
    Send(5, "abc");
    Heard h = UntilError();
    EXPECT_NE(h.error.find(path[0] == '/' ? "has a '..' component" : "is not an absolute path"),
              std::string::npos)
        << h.error;
    ::close(client_);
    client_ = -1;
    WaitSupervisor();
  }
  EXPECT_FALSE(fs::exists(dir_ / "copy"));
}

TEST_F(StepSupervisorTest, BcastToADirectoryTheUserCannotWriteFailsTheStep) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes anywhere";
  const fs::path ro = dir_ / "ro";
  fs::create_directories(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  bcast_path_ = (ro / "copy").string();
  bcast_size_ = 3;
  argv_ = {"prog"};
  Start("");
  Send(5, "abc");
  Heard h = UntilError();
  fs::permissions(ro, fs::perms::owner_all);
  EXPECT_NE(h.error.find("--bcast: cannot create " + bcast_path_ + ": Permission denied"),
            std::string::npos)
      << h.error;
  EXPECT_TRUE(h.exits.empty());
}

// The copy is made by the job's user, not by the supervisor (root): where the user may not write,
// nothing is written; where they may, the file is theirs.
TEST_F(StepSupervisorTest, BcastWritesAsTheJobsUserNeverAsRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to be another user";
  constexpr uint32_t kNobody = 65534;
  job_uid_ = kNobody;
  argv_ = {"prog"};
  const std::string program = "#!/bin/sh\necho \"$0 $(id -u)\"\n";
  bcast_size_ = program.size();
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  bcast_path_ = (dir_ / "copy").string();  // root's directory: root could write here
  Start("");
  Send(5, program);
  Heard h = UntilError();
  EXPECT_NE(h.error.find("--bcast: cannot create " + bcast_path_ + ": Permission denied"),
            std::string::npos)
      << h.error;
  EXPECT_FALSE(fs::exists(bcast_path_));
  ::close(client_);
  client_ = -1;
  WaitSupervisor();

  const fs::path theirs = dir_ / "theirs";
  fs::create_directories(theirs);
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  bcast_path_ = (theirs / "copy").string();
  Start("");
  Send(5, program);
  h = Listen();
  EXPECT_EQ(h.error, "");
  EXPECT_EQ(h.output[1], bcast_path_ + " 65534\n") << h.output[2];
  struct stat st {};
  ASSERT_EQ(::stat(bcast_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_gid, kNobody);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// The copy never goes into a file that is at the destination: a hard link planted there to another
// of the user's files (in a shared sticky directory, with fs.protected_hardlinks=0, anyone may
// make one) leaves that file as it was; the destination's name is the new program's.
TEST_F(StepSupervisorTest, BcastReplacesTheDestinationAndNeverWritesIntoIt) {
  const fs::path mine = dir_ / "mine", copy = dir_ / "copy";
  std::ofstream(mine) << "precious\n";
  fs::create_hard_link(mine, copy);
  const std::string program = "#!/bin/sh\necho ran\n";
  bcast_path_ = copy.string();
  bcast_size_ = program.size();
  argv_ = {"prog"};
  Start("");
  Send(5, program);
  Send(2, "");
  Heard h = Listen();
  EXPECT_EQ(h.error, "");
  EXPECT_EQ(h.output[1], "ran\n") << h.output[2];
  EXPECT_EQ(Slurp(mine), "precious\n");
  EXPECT_EQ(Slurp(copy), program);
  struct stat m {
  }, c{};
  ASSERT_EQ(::stat(mine.c_str(), &m), 0);
  ASSERT_EQ(::stat(copy.c_str(), &c), 0);
  EXPECT_NE(m.st_ino, c.st_ino);
  EXPECT_EQ(m.st_nlink, 1u) << "the link at the destination was replaced";
  EXPECT_EQ(c.st_mode & 07777, 0700u);
  EXPECT_EQ(BcastTempFiles(), 0);
  WaitSupervisor();
}

// A copy that stops part way (srun gone) changes nothing at the destination: what was there is
// as it was, and the copy under way is gone.
TEST_F(StepSupervisorTest, ABcastThatStopsPartWayLeavesTheDestinationAsItWas) {
  const fs::path copy = dir_ / "copy";
  std::ofstream(copy) << "the old program\n";
  fs::permissions(copy, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  bcast_path_ = copy.string();
  bcast_size_ = 100;
  argv_ = {"prog"};
  Start("");
  Send(5, "0123456789");
  ASSERT_EQ(::shutdown(client_, SHUT_WR), 0);
  Heard h = UntilError();
  EXPECT_NE(h.error.find("srun went away after sending 10 of the program's 100 bytes"),
            std::string::npos)
      << h.error;
  WaitSupervisor();
  EXPECT_EQ(Slurp(copy), "the old program\n");
  struct stat st {};
  ASSERT_EQ(::stat(copy.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0744u);
  EXPECT_EQ(BcastTempFiles(), 0);
}

// The writer is recorded as the step's tasks are, a process group of its own: the job's end
// (SIGTERM to each recorded group) stops it, and it removes its copy under way.
TEST_F(StepSupervisorTest, TheJobsEndStopsTheBcastWriterWhichRemovesItsCopy) {
  const fs::path copy = dir_ / "copy";
  bcast_path_ = copy.string();
  bcast_size_ = 100;
  argv_ = {"prog"};
  Start("");
  Send(5, "0123456789");
  v1::StepTaskPids pids;
  ASSERT_EVENTUALLY(ReadRecord("tasks", &pids) && pids.pids_size() == 1, 5000);
  ASSERT_EVENTUALLY(BcastTempFiles() == 1, 5000);
  ASSERT_EQ(::kill(-pids.pids(0), SIGTERM), 0) << std::strerror(errno);
  Heard h = UntilError();
  EXPECT_NE(
      h.error.find("--bcast: the copy to " + copy.string() + " was stopped by a signal after"),
      std::string::npos)
      << h.error;
  EXPECT_TRUE(h.exits.empty());
  ::close(client_);
  client_ = -1;
  // Once srun has closed its side the supervisor ends (it read srun's end of file while the
  // writer stopped, and waits for no more).
  const bool ended =
      muster::testing::WaitFor([&] { return ::waitpid(pid_, nullptr, WNOHANG) == pid_; }, 10'000);
  if (ended) pid_ = -1;
  EXPECT_TRUE(ended) << "the supervisor still holds a connection srun has closed";
  EXPECT_EQ(BcastTempFiles(), 0);
  EXPECT_FALSE(fs::exists(copy));
}

// A client that stalls part way through the program is waited for only so long (BcastDeadline,
// shortened here): the step fails there and the connection closes; the writer, handed to the
// job as its tasks are, is gone with its copy. (The supervisor in this process, as in the agent.)
TEST_F(StepSupervisorTest, ABcastThatStallsFailsAtItsDeadline) {
  bcast_path_ = (dir_ / "copy").string();
  bcast_size_ = 10;
  argv_ = {"prog"};
  boost::asio::io_context io;
  std::unique_ptr<Launcher> launcher = NewProcessLauncher();
  const int server = Connect();
  ASSERT_GE(server, 0);
  boost::asio::ip::tcp::socket socket(io);
  socket.assign(boost::asio::ip::tcp::v4(), server);
  std::vector<pid_t> started, done;
  bool ended = false;
  StepSupervisor::Hooks hooks;
  hooks.task_started = [&](pid_t pid) { started.push_back(pid); };
  hooks.task_done = [&](pid_t pid) { done.push_back(pid); };
  hooks.ended = [&](const v1::StepEnded&) { ended = true; };
  auto supervisor = std::make_shared<StepSupervisor>(
      io, *launcher, Setup("", EncodeFrame(5, "01234")), std::move(socket), std::move(hooks));
  supervisor->SetBcastDeadlineForTest(std::chrono::seconds(1));
  supervisor->Start();
  supervisor.reset();
  std::thread loop([&] { io.run(); });
  Heard h = Listen();  // until the node closes the connection (10 s at most)
  ::close(client_);    // (ends a supervisor that would wait on)
  client_ = -1;
  loop.join();
  EXPECT_NE(h.error.find("--bcast: 5 of the program's 10 bytes arrived in the 1 s a node waits "
                         "for it"),
            std::string::npos)
      << h.error;
  EXPECT_TRUE(ended);
  ASSERT_EQ(started.size(), 1u) << "the writer, handed to the job";
  EXPECT_EQ(done, started);
  EXPECT_FALSE(fs::exists(dir_ / "copy"));
  EXPECT_EQ(BcastTempFiles(), 0);
}

}  // namespace
}  // namespace muster::agent
