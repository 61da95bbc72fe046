// JobSupervisor on its own, on a virtual clock: a job's phases on this node (prolog, running,
// suspended, timed out, ending, epilog), its time limit and grace measured on a ManualExecutor,
// and the controller's commands in each phase. Processes are the fake launcher's; their ends
// arrive through the io_context the test polls. No thread, no sleep.
#include "job_supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent_fakes.h"
#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/manual_executor.h"

namespace muster::agent {
namespace {

namespace fs = std::filesystem;
using testing::FakeLauncher;

constexpr uint64_t kJob = 7;
constexpr uint32_t kGraceMs = 50;

class JobSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    dir_ = fs::temp_directory_path() /
           ("muster-jobsup-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/spool");
    fs::create_directories(dir_ + "/etc");
    for (const char* name : {"prolog", "epilog"}) {
      std::ofstream(Program(name)) << "#!/bin/sh\nexit 0\n";  // never run: the launcher is fake
      fs::permissions(Program(name), fs::perms(0755));
    }
  }
  void TearDown() override {
    jobs_.reset();
    fs::remove_all(dir_);
  }

  // An admin's program only root and this user can change: the agent refuses any other.
  std::string Program(const std::string& name) const { return dir_ + "/etc/" + name; }

  // The supervisor over this test's spool, with `agent` lines in the config's [agent] table.
  void Start(const std::string& agent = "") {
    auto c = ParseConfig("[agent]\ncgroup_root = \"none\"\n" + agent + R"(
[[nodes]]
names = "node1"
cpus = 8
memory_mb = 16000
[[partition]]
name = "p"
nodes = "node1"
)",
                         "agent.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    options_.config = *c;
    options_.node_name = "node1";
    options_.spool_dir = dir_ + "/spool";
    ctx_ = std::make_unique<AgentContext>(options_, io_, executor_, clock_, launcher_);
    ctx_->send = [this](const v1::AgentMessage& m) { sent_.push_back(m); };
    spool_ = std::make_unique<JobSpool>(dir_ + "/spool");
    jobs_ = std::make_unique<JobSupervisor>(*ctx_, *spool_);
  }

  // What is ready runs: processes' ends (the io_context), work posted on the executor and
  // timers already due, until two rounds in a row find nothing.
  void Settle() {
    for (int i = 0, quiet = 0; i < 1000; ++i) {
      io_.restart();
      size_t ran = io_.poll() + executor_.RunUntilIdle();
      const size_t timers = executor_.timers();
      executor_.AdvanceMs(0);
      ran += timers != executor_.timers();
      if (ran > 0) {
        quiet = 0;
      } else if (++quiet == 2) {
        return;
      }
    }
    ADD_FAILURE() << "the supervisor never settled";
  }
  void Advance(int64_t ms) {
    executor_.AdvanceMs(ms);
    Settle();
  }

  v1::LaunchJob Launch(int64_t time_limit_ms = 0) {
    v1::LaunchJob l;
    l.set_job_id(kJob);
    l.set_batch_node(true);
    l.set_kill_grace_ms(kGraceMs);
    l.set_start_time_ms(clock_.NowMs());
    l.set_time_limit_ms(time_limit_ms);
    v1::JobSpec* s = l.mutable_spec();
    s->set_user("alice");
    s->set_uid(::geteuid());
    s->set_gid(::getegid());
    s->set_work_dir("/tmp");
    s->set_stdout_pattern("slurm-%j.out");
    s->set_script("#!/bin/sh\necho hello\n");
    v1::NodeAllocation* na = l.mutable_allocation()->add_nodes();
    na->set_node("node1");
    na->set_ntasks(1);
    return l;
  }
  void Terminate() {
    v1::TerminateJob t;
    t.set_job_id(kJob);
    t.set_run(0xffffffffu);
    t.set_kill_grace_ms(kGraceMs);
    t.set_reason("cancelled");
    jobs_->Terminate(t);
    Settle();
  }
  void Suspend(bool resume, int64_t suspended_ms = 0) {
    v1::SuspendJob s;
    s.set_job_id(kJob);
    s.set_resume(resume);
    s.set_suspended_ms(suspended_ms);
    jobs_->Suspend(s);
    Settle();
  }

  size_t Count(bool (v1::AgentMessage::*has)() const) const {
    size_t n = 0;
    for (const auto& m : sent_) n += (m.*has)();
    return n;
  }
  const v1::AgentMessage* Last(bool (v1::AgentMessage::*has)() const) const {
    for (auto it = sent_.rbegin(); it != sent_.rend(); ++it) {
      if (((*it).*has)()) return &*it;
    }
    return nullptr;
  }
  bool Signalled(pid_t group, int sig) {
    for (const auto& [p, s] : launcher_.signals()) {
      if (p == -group && s == sig) return true;
    }
    return false;
  }
  JobPhase Phase() {
    LocalJob* j = jobs_->Find(kJob);
    EXPECT_NE(j, nullptr);
    return j ? j->phase() : JobPhase::kEpilog;
  }
  v1::AgentJobState Saved() {
    v1::AgentJobState st;
    std::ifstream in(dir_ + "/spool/job7/state");
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_TRUE(st.ParseFromString(ss.str()));
    return st;
  }
  // The batch script's fake process (the keeper's task group).
  pid_t ScriptGroup() {
    for (const auto& p : launcher_.WaitForSpawns(0)) {
      if (!p.spec.exit_file.empty()) return p.task_pid;
    }
    ADD_FAILURE() << "no batch script was started";
    return -1;
  }

  std::string dir_;
  ManualClock clock_;
  ManualExecutor executor_{&clock_};
  boost::asio::io_context io_;
  FakeLauncher launcher_;
  AgentOptions options_;
  std::unique_ptr<AgentContext> ctx_;
  std::unique_ptr<JobSpool> spool_;
  std::unique_ptr<JobSupervisor> jobs_;
  std::vector<v1::AgentMessage> sent_;
};

TEST(JobPhaseTest, TheStateMachineHasOnlyItsMoves) {
  using P = JobPhase;
  const P all[] = {P::kProlog, P::kRunning, P::kSuspended, P::kTimedOut, P::kCancelledInProlog,
                   P::kEnding, P::kEpilog};
  const std::set<std::pair<P, P>> moves = {
      {P::kProlog, P::kRunning},           {P::kProlog, P::kCancelledInProlog},
      {P::kRunning, P::kSuspended},        {P::kRunning, P::kTimedOut},
      {P::kRunning, P::kEnding},           {P::kSuspended, P::kRunning},
      {P::kSuspended, P::kEnding},         {P::kTimedOut, P::kEnding},
      {P::kCancelledInProlog, P::kEnding}, {P::kEnding, P::kEpilog},
  };
  for (P from : all) {
    for (P to : all) {
      EXPECT_EQ(PhaseMoveAllowed(from, to), moves.count({from, to}) == 1)
          << PhaseName(from) << " -> " << PhaseName(to);
    }
  }
}

TEST_F(JobSupervisorTest, TheLimitSendsSigtermAndSigkillAfterTheGraceOnTheVirtualClock) {
  Start();
  launcher_.SetStubborn(true);  // it ignores SIGTERM
  jobs_->Launch(Launch(/*time_limit_ms=*/60'000));
  Settle();
  ASSERT_EQ(Count(&v1::AgentMessage::has_job_started), 1u);
  const pid_t group = ScriptGroup();
  EXPECT_EQ(Phase(), JobPhase::kRunning);
  Advance(59'999);
  EXPECT_FALSE(Signalled(group, SIGTERM)) << "a millisecond before its limit";
  Advance(1);
  EXPECT_TRUE(Signalled(group, SIGTERM));
  EXPECT_EQ(Phase(), JobPhase::kTimedOut);
  Advance(kGraceMs - 1);
  EXPECT_FALSE(Signalled(group, SIGKILL)) << "the grace is not over";
  Advance(1);
  EXPECT_TRUE(Signalled(group, SIGKILL));
  const v1::AgentMessage* exit = Last(&v1::AgentMessage::has_batch_exited);
  ASSERT_NE(exit, nullptr);
  EXPECT_TRUE(exit->batch_exited().timed_out());
  EXPECT_EQ(exit->batch_exited().signal(), SIGKILL);
  // Not released until the controller ends it.
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_cleaned), 0u);
  Terminate();
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_cleaned), 1u);
  EXPECT_EQ(jobs_->Find(kJob), nullptr);
}

TEST_F(JobSupervisorTest, SuspendStopsTheLimitClockAndResumeExtendsTheLimit) {
  Start();
  jobs_->Launch(Launch(/*time_limit_ms=*/300));
  Settle();
  const pid_t group = ScriptGroup();
  Suspend(false);
  EXPECT_TRUE(Signalled(group, SIGSTOP));
  EXPECT_EQ(Phase(), JobPhase::kSuspended);
  EXPECT_TRUE(Saved().suspended()) << "a restarted agent must not run its clock either";
  EXPECT_FALSE(jobs_->Find(kJob)->TakesSteps()) << "a new step would run unstopped";
  // Past its 300 ms limit while stopped: the timer set at the start is void.
  Advance(400);
  EXPECT_FALSE(Signalled(group, SIGTERM));
  // Continued with 10 s suspended in all: the limit is now 10.3 s after the start.
  Suspend(true, 10'000);
  EXPECT_TRUE(Signalled(group, SIGCONT));
  EXPECT_EQ(Phase(), JobPhase::kRunning);
  EXPECT_FALSE(Saved().suspended());
  EXPECT_EQ(Saved().launch().suspended_ms(), 10'000);
  EXPECT_TRUE(jobs_->Find(kJob)->TakesSteps());
  Advance(9'899);
  EXPECT_FALSE(Signalled(group, SIGTERM));
  // The controller's count back to none: the limit is past, and it ends at once.
  Suspend(true, 0);
  EXPECT_TRUE(Signalled(group, SIGTERM));
  EXPECT_EQ(Phase(), JobPhase::kTimedOut);
  EXPECT_FALSE(jobs_->Find(kJob)->TakesSteps());
  // Past its limit, it is not stopped again (it is ending).
  Suspend(false);
  EXPECT_EQ(Phase(), JobPhase::kTimedOut);
}

TEST_F(JobSupervisorTest, ATerminateDuringThePrologEndsTheJobOnceThePrologReturns) {
  Start("prolog = \"" + Program("prolog") + "\"\n");
  jobs_->Launch(Launch());
  Settle();
  auto spawned = launcher_.WaitForSpawns(1);
  ASSERT_EQ(spawned.size(), 1u);
  const pid_t prolog = spawned[0].pid;
  EXPECT_EQ(spawned[0].spec.argv.at(0), Program("prolog"));
  EXPECT_EQ(Phase(), JobPhase::kProlog);
  Terminate();
  EXPECT_EQ(Phase(), JobPhase::kCancelledInProlog);
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_cleaned), 0u) << "the prolog still runs";
  launcher_.Exit(prolog, 1 << 8);  // exit code 1
  Settle();
  EXPECT_EQ(launcher_.WaitForSpawns(0).size(), 1u) << "its batch script never started";
  const v1::AgentMessage* cleaned = Last(&v1::AgentMessage::has_job_cleaned);
  ASSERT_NE(cleaned, nullptr);
  EXPECT_NE(cleaned->job_cleaned().prolog_error().find("prolog"), std::string::npos)
      << "a failed prolog drains the node, also when the job was cancelled meanwhile";
  const v1::AgentMessage* exit = Last(&v1::AgentMessage::has_batch_exited);
  ASSERT_NE(exit, nullptr) << "the job's end is still reported";
  EXPECT_EQ(exit->batch_exited().signal(), SIGTERM);
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_started), 0u);
}

TEST_F(JobSupervisorTest, APrologThatOutlivesItsTimeoutIsKilledAndFailsTheLaunch) {
  Start("prolog = \"" + Program("prolog") + "\"\nprolog_timeout_s = 5\n");
  jobs_->Launch(Launch());
  Settle();
  const pid_t prolog = launcher_.WaitForSpawns(1).at(0).pid;
  launcher_.SetStubborn(true);
  Advance(4'999);
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_launch_failed), 0u);
  Advance(1);  // SIGKILL to the prolog, whose end fails the launch
  const v1::AgentMessage* failed = Last(&v1::AgentMessage::has_job_launch_failed);
  ASSERT_NE(failed, nullptr);
  EXPECT_TRUE(failed->job_launch_failed().node_fault());
  EXPECT_NE(failed->job_launch_failed().message().find("timed out after 5s"), std::string::npos)
      << failed->job_launch_failed().message();
  EXPECT_TRUE(Signalled(prolog, SIGKILL));
  EXPECT_EQ(jobs_->Find(kJob), nullptr);
}

// The prolog runs as root long after the agent checked it at its start: one another user could
// now change is not run, and the launch fails as a node fault (the node drains), naming why.
TEST_F(JobSupervisorTest, APrologAnotherUserCouldChangeSinceTheStartIsNotRun) {
  Start("prolog = \"" + Program("prolog") + "\"\n");
  fs::permissions(Program("prolog"), fs::perms(0777));
  jobs_->Launch(Launch());
  Settle();
  EXPECT_EQ(launcher_.WaitForSpawns(0).size(), 0u) << "neither the prolog nor the job ran";
  const v1::AgentMessage* failed = Last(&v1::AgentMessage::has_job_launch_failed);
  ASSERT_NE(failed, nullptr);
  EXPECT_TRUE(failed->job_launch_failed().node_fault());
  EXPECT_NE(failed->job_launch_failed().message().find("could be changed by another user"),
            std::string::npos)
      << failed->job_launch_failed().message();
  EXPECT_EQ(jobs_->Find(kJob), nullptr);
  // A prolog moved into a directory anyone may write is refused the same way.
  fs::permissions(Program("prolog"), fs::perms(0755));
  fs::permissions(dir_ + "/etc", fs::perms(0777));
  jobs_->Launch(Launch());
  Settle();
  EXPECT_EQ(launcher_.WaitForSpawns(0).size(), 0u);
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_launch_failed), 2u);
  fs::permissions(dir_ + "/etc", fs::perms(0755));
}

TEST_F(JobSupervisorTest, TheEpilogRunsOnceEveryProcessIsGoneAndThenTheJobIsReleased) {
  Start("epilog = \"" + Program("epilog") + "\"\n");
  jobs_->Launch(Launch());
  Settle();
  ASSERT_EQ(launcher_.WaitForSpawns(1).size(), 1u);
  Terminate();  // SIGTERM ends the (fake) script at once
  ASSERT_EQ(Count(&v1::AgentMessage::has_batch_exited), 1u);
  auto spawned = launcher_.WaitForSpawns(2);
  ASSERT_EQ(spawned.size(), 2u);
  const pid_t epilog = spawned[1].pid;
  EXPECT_EQ(spawned[1].spec.argv.at(0), Program("epilog"));
  EXPECT_EQ(Phase(), JobPhase::kEpilog);
  // Commands meanwhile change nothing: it ended.
  Suspend(false);
  Terminate();
  EXPECT_EQ(Phase(), JobPhase::kEpilog);
  EXPECT_EQ(launcher_.WaitForSpawns(0).size(), 2u) << "one epilog per job and node";
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_cleaned), 0u);
  launcher_.Exit(epilog, 0);
  Settle();
  ASSERT_EQ(Count(&v1::AgentMessage::has_job_cleaned), 1u);
  EXPECT_TRUE(Last(&v1::AgentMessage::has_job_cleaned)->job_cleaned().epilog_error().empty());
  EXPECT_FALSE(fs::exists(dir_ + "/spool/job7"));
}

// --signal=USR1@10 with a 60 s limit: USR1 at 50 s.
v1::LaunchJob Warned(v1::LaunchJob l, bool batch_only) {
  l.mutable_spec()->set_signal(SIGUSR1);
  l.mutable_spec()->set_signal_time_s(10);
  l.mutable_spec()->set_signal_batch_only(batch_only);
  return l;
}

size_t SignalsTo(FakeLauncher& launcher, pid_t pid, int sig) {
  size_t n = 0;
  for (const auto& [p, s] : launcher.signals()) n += p == pid && s == sig;
  return n;
}

// As Slurm: without B: the job's steps hear it (once each) and the batch shell does not; with
// B: the batch shell alone, not the commands it runs.
TEST_F(JobSupervisorTest, TheWarningSignalGoesToTheStepsAloneOrWithBToTheBatchShellAlone) {
  Start();
  jobs_->Launch(Warned(Launch(/*time_limit_ms=*/60'000), /*batch_only=*/false));
  Settle();
  const pid_t script = ScriptGroup();
  const pid_t step = 4242;
  jobs_->Find(kJob)->step_pgids.insert(step);
  Advance(50'000 - 1);
  EXPECT_EQ(SignalsTo(launcher_, -step, SIGUSR1), 0u);
  Advance(1);
  EXPECT_EQ(SignalsTo(launcher_, -step, SIGUSR1), 1u);
  EXPECT_EQ(SignalsTo(launcher_, -script, SIGUSR1) + SignalsTo(launcher_, script, SIGUSR1), 0u)
      << "the batch shell heard a signal meant for the steps";
  Terminate();
}

TEST_F(JobSupervisorTest, TheWarningSignalWithBGoesToTheBatchShellAlone) {
  Start();
  jobs_->Launch(Warned(Launch(/*time_limit_ms=*/60'000), /*batch_only=*/true));
  Settle();
  const pid_t script = ScriptGroup();
  const pid_t step = 4242;
  jobs_->Find(kJob)->step_pgids.insert(step);
  Advance(50'000);
  EXPECT_EQ(SignalsTo(launcher_, script, SIGUSR1), 1u);
  EXPECT_EQ(SignalsTo(launcher_, -script, SIGUSR1), 0u) << "its foreground command heard it too";
  EXPECT_EQ(SignalsTo(launcher_, -step, SIGUSR1), 0u);
  Terminate();
}

// A node without the batch script runs steps only: they hear it there too.
TEST_F(JobSupervisorTest, TheWarningSignalReachesStepsOnNodesWithoutTheBatchScript) {
  Start();
  v1::LaunchJob l = Warned(Launch(/*time_limit_ms=*/60'000), /*batch_only=*/false);
  l.set_batch_node(false);
  jobs_->Launch(l);
  Settle();
  const pid_t step = 4242;
  jobs_->Find(kJob)->step_pgids.insert(step);
  Advance(50'000);
  EXPECT_EQ(SignalsTo(launcher_, -step, SIGUSR1), 1u);
  Terminate();
}

TEST_F(JobSupervisorTest, AStubbornJobIsKilledAfterTheControllersGraceAndItsLimitNeverFires) {
  // Its epilog never returns here, so the job is still on the node when its limit comes.
  Start("epilog = \"" + Program("epilog") + "\"\n");
  launcher_.SetStubborn(true);
  jobs_->Launch(Launch(/*time_limit_ms=*/60'000));
  Settle();
  const pid_t group = ScriptGroup();
  Terminate();
  EXPECT_TRUE(Signalled(group, SIGTERM));
  EXPECT_EQ(Phase(), JobPhase::kEnding);
  Advance(kGraceMs - 1);
  EXPECT_FALSE(Signalled(group, SIGKILL));
  Advance(1);
  EXPECT_TRUE(Signalled(group, SIGKILL));
  EXPECT_EQ(Phase(), JobPhase::kEpilog);
  const size_t before = launcher_.signals().size();
  Advance(120'000);  // past its 60 s limit
  for (size_t i = before; i < launcher_.signals().size(); ++i) {
    EXPECT_NE(launcher_.signals()[i].second, SIGTERM) << "its limit fired after its end";
  }
  EXPECT_EQ(Phase(), JobPhase::kEpilog);
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_cleaned), 0u);
}

TEST_F(JobSupervisorTest, TimersOfAReleasedJobNeverTouchItsNextLaunchWithTheSameIdAndRun) {
  Start();
  // A long grace and a limit: both timers are still set when the job is released (its script
  // ends at SIGTERM).
  v1::LaunchJob first = Launch(/*time_limit_ms=*/60'000);
  jobs_->Launch(first);
  Settle();
  v1::TerminateJob t;
  t.set_job_id(kJob);
  t.set_run(0xffffffffu);
  t.set_kill_grace_ms(30'000);
  jobs_->Terminate(t);
  Settle();
  ASSERT_EQ(jobs_->Find(kJob), nullptr) << "released";
  // A controller that took over runs the same job, same run, on the same node again.
  launcher_.SetStubborn(true);
  jobs_->Launch(Launch(/*time_limit_ms=*/600'000));
  Settle();
  pid_t group = -1;
  for (const auto& p : launcher_.WaitForSpawns(2)) group = std::max(group, p.task_pid);
  Advance(61'000);  // past the first one's grace and limit
  EXPECT_FALSE(Signalled(group, SIGKILL)) << "the released job's grace timer killed the new one";
  EXPECT_FALSE(Signalled(group, SIGTERM)) << "the released job's limit ended the new one";
  EXPECT_EQ(Phase(), JobPhase::kRunning);
}

TEST_F(JobSupervisorTest, AJobSuspendedDuringItsPrologStartsStopped) {
  Start("prolog = \"" + Program("prolog") + "\"\n");
  jobs_->Launch(Launch(/*time_limit_ms=*/300));
  Settle();
  const pid_t prolog = launcher_.WaitForSpawns(1).at(0).pid;
  Suspend(false);
  EXPECT_EQ(Phase(), JobPhase::kProlog);
  launcher_.Exit(prolog, 0);
  Settle();
  const pid_t group = ScriptGroup();
  EXPECT_TRUE(Signalled(group, SIGSTOP));
  EXPECT_EQ(Phase(), JobPhase::kSuspended);
  EXPECT_TRUE(Saved().suspended());
  Advance(1'000);
  EXPECT_FALSE(Signalled(group, SIGTERM)) << "its limit clock does not run while it is stopped";
  Suspend(true, 1'000);
  EXPECT_TRUE(Signalled(group, SIGCONT));
  EXPECT_EQ(Phase(), JobPhase::kRunning);
}

TEST_F(JobSupervisorTest, ARepeatedLaunchIsConfirmedOnlyWhileTheJobRuns) {
  Start("prolog = \"" + Program("prolog") + "\"\n");
  jobs_->Launch(Launch());
  Settle();
  jobs_->Launch(Launch());  // during the prolog: it answers when done
  Settle();
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_started), 0u);
  launcher_.Exit(launcher_.WaitForSpawns(1).at(0).pid, 0);
  Settle();
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_started), 1u);
  jobs_->Launch(Launch());
  Settle();
  EXPECT_EQ(Count(&v1::AgentMessage::has_job_started), 2u);
  EXPECT_EQ(launcher_.WaitForSpawns(0).size(), 2u) << "the prolog and one batch script";
}

}  // namespace
}  // namespace muster::agent
