// The Agent itself, with its seams faked: launches, kills, re-adoption after a restart, the epoch
// fence and GPU health, in milliseconds, without root, cgroups or a controller.
#include "agent_fixture.h"

namespace muster::agent {
namespace {

TEST_F(AgentTest, ALaunchRunsTheBatchScriptUnderItsKeeperAndReportsStartAndEnd) {
  StartAgent();
  link_->Connect(1);
  link_->Command(Launch(1));
  ASSERT_TRUE(
      Sent([](const auto& m) { return m.has_job_started() && m.job_started().job_id() == kJob; }));
  auto spawned = launcher_->WaitForSpawns(1);
  ASSERT_EQ(spawned.size(), 1u);
  const SpawnSpec& sp = spawned[0].spec;
  const std::string job_dir = dir_ + "/spool/job7";
  EXPECT_EQ(sp.argv.at(0), job_dir + "/script");
  EXPECT_EQ(sp.exit_file, job_dir + "/exit") << "the keeper records how the script ended";
  EXPECT_EQ(sp.cwd, "/tmp");
  EXPECT_EQ(sp.stdout_path, "/tmp/slurm-7.out");
  EXPECT_EQ(sp.uid, ::geteuid());
  auto env = Env(sp);
  EXPECT_EQ(env["SLURM_JOB_ID"], "7");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1,2") << "only the job's GPUs";
  EXPECT_EQ(env["FROM_SUBMITTER"], "1");
  std::ifstream script(job_dir + "/script");
  std::string first;
  std::getline(script, first);
  EXPECT_EQ(first, "#!/bin/sh");
  EXPECT_TRUE(fs::exists(job_dir + "/state")) << "saved for a restarted agent to re-adopt";
  EXPECT_EQ(link_->Register().running_job_ids_size(), 1);

  launcher_->Exit(spawned[0].pid, 3 << 8);  // exit code 3
  ASSERT_TRUE(Sent([](const auto& m) {
    return m.has_batch_exited() && m.batch_exited().exit_code() == 3 && !m.batch_exited().signal();
  }));
}

TEST_F(AgentTest, ALaunchThatCannotStartIsReportedAndLeavesNothingBehind) {
  StartAgent();
  link_->Connect(1);
  launcher_->FailNextSpawn("execve(script): Exec format error");
  link_->Command(Launch(1));
  ASSERT_TRUE(Sent([](const auto& m) {
    return m.has_job_launch_failed() && m.job_launch_failed().job_id() == kJob &&
           m.job_launch_failed().message().find("Exec format error") != std::string::npos &&
           !m.job_launch_failed().node_fault();
  }));
  EXPECT_FALSE(fs::exists(dir_ + "/spool/job7"));
  EXPECT_EQ(agent_->num_jobs(), 0u);
}

TEST_F(AgentTest, TerminateSignalsTheGroupAndKillsWhatOutlivesTheGrace) {
  StartAgent();
  link_->Connect(1);
  launcher_->SetStubborn(true);  // the script ignores SIGTERM
  link_->Command(Launch(1));
  auto spawned = launcher_->WaitForSpawns(1);
  ASSERT_EQ(spawned.size(), 1u);
  const pid_t group = spawned[0].task_pid;
  link_->Command(Terminate(1));
  EXPECT_TRUE(launcher_->WaitForSignal(group, SIGCONT)) << "a stopped job must see its SIGTERM";
  EXPECT_TRUE(launcher_->WaitForSignal(group, SIGTERM));
  EXPECT_TRUE(launcher_->WaitForSignal(group, SIGKILL)) << "after kill_grace_ms";
  launcher_->Exit(spawned[0].pid, SIGKILL);  // the keeper ends with its task
  ASSERT_TRUE(
      Sent([](const auto& m) { return m.has_job_cleaned() && m.job_cleaned().job_id() == kJob; }));
  EXPECT_FALSE(fs::exists(dir_ + "/spool/job7")) << "the spool directory goes with the job";
  EXPECT_EQ(agent_->num_jobs(), 0u);
}

TEST_F(AgentTest, ARestartedAgentReadoptsWhatRunsAndReportsWhatItLost) {
  // What a previous agent left: job 7 running under its keeper, job 8 whose state is corrupt,
  // job 9 whose launch never finished.
  const std::string spool = dir_ + "/spool";
  LeaveRunningJob(spool);
  fs::create_directories(spool + "/job8");
  std::ofstream(spool + "/job8/state") << "not a protobuf \xff\xff\xff";
  fs::create_directories(spool + "/job9");
  launcher_->AddRunning(4242, 4243, 99);

  StartAgent();
  const v1::RegisterRequest reg = link_->Register();
  ASSERT_EQ(reg.running_job_ids_size(), 1);
  EXPECT_EQ(reg.running_job_ids(0), kJob);
  ASSERT_EQ(reg.lost_job_ids_size(), 1);
  EXPECT_EQ(reg.lost_job_ids(0), 8u) << "a job it cannot re-adopt is reported, never forgotten";
  ASSERT_EQ(reg.adopted_jobs_size(), 1) << "what the spool says, for the controller to check";
  EXPECT_EQ(reg.adopted_jobs(0).job_id(), kJob);
  EXPECT_EQ(reg.adopted_jobs(0).uid(), ::geteuid());
  EXPECT_EQ(reg.adopted_jobs(0).credential(), "secret");
  EXPECT_TRUE(fs::exists(spool + "/job8.corrupt")) << "kept aside for the admin";
  EXPECT_FALSE(fs::exists(spool + "/job9"));

  link_->Connect(1);
  ASSERT_TRUE(Sent([](const auto& m) {
    return m.has_job_started() && m.job_started().job_id() == kJob;
  })) << "a reconnect repeats what the controller may have missed";
  // The script ends after the restart: its keeper's record tells how.
  launcher_->Exit(4242, 0, spool + "/job7/exit");
  ASSERT_TRUE(Sent([](const auto& m) {
    return m.has_batch_exited() && m.batch_exited().job_id() == kJob &&
           m.batch_exited().exit_code() == 0 && m.batch_exited().signal() == 0;
  }));
}

// With agent.job_state_dir set (a tmpfs such as /run/musterd on a real node), each job's
// directory lives there, one level per node; jobs an older agent left in the spool itself (before
// an upgrade that set it) are still re-adopted from there.
TEST_F(AgentTest, AJobStateDirHoldsNewJobsAndJobsLeftInTheSpoolAreStillReadopted) {
  config_.agent.job_state_dir = dir_ + "/run";
  const std::string spool = dir_ + "/spool";
  LeaveRunningJob(spool);
  launcher_->AddRunning(4242, 4243, 99);

  StartAgent();
  const v1::RegisterRequest reg = link_->Register();
  ASSERT_EQ(reg.running_job_ids_size(), 1);
  EXPECT_EQ(reg.running_job_ids(0), kJob) << "the job left in the spool is re-adopted";
  EXPECT_TRUE(fs::is_directory(dir_ + "/run/node1"));

  link_->Connect(1);
  v1::ControllerMessage next = Launch(1);
  next.mutable_launch_job()->set_job_id(8);
  link_->Command(next);
  ASSERT_TRUE(
      Sent([](const auto& m) { return m.has_job_started() && m.job_started().job_id() == 8; }));
  const std::string job_dir = dir_ + "/run/node1/job8";
  EXPECT_TRUE(fs::exists(job_dir + "/state"));
  EXPECT_TRUE(fs::exists(job_dir + "/script"));
  EXPECT_FALSE(fs::exists(spool + "/job8")) << "new jobs go to the job state directory";

  launcher_->Exit(4242, 5 << 8, spool + "/job7/exit");
  ASSERT_TRUE(Sent([](const auto& m) {
    return m.has_batch_exited() && m.batch_exited().job_id() == kJob &&
           m.batch_exited().exit_code() == 5;
  })) << "the old job's keeper record is still read where it was left";
}

// A job in both places (an older copy left in the spool): the job state directory's is adopted,
// once; the other is neither adopted again nor reported lost.
TEST_F(AgentTest, AJobInBothTheSpoolAndTheJobStateDirIsAdoptedOnce) {
  config_.agent.job_state_dir = dir_ + "/run";
  LeaveRunningJob(dir_ + "/run/node1");
  LeaveRunningJob(dir_ + "/spool");
  launcher_->AddRunning(4242, 4243, 99);
  StartAgent();
  const v1::RegisterRequest reg = link_->Register();
  ASSERT_EQ(reg.running_job_ids_size(), 1);
  EXPECT_EQ(reg.running_job_ids(0), kJob);
  EXPECT_EQ(reg.lost_job_ids_size(), 0);
  EXPECT_EQ(reg.adopted_jobs_size(), 1);
  EXPECT_TRUE(fs::exists(dir_ + "/spool/job7/state")) << "left for the admin";
  link_->Connect(1);
  // Its keeper records the end where the newer copy is, and that is where it is read.
  launcher_->Exit(4242, 5 << 8, dir_ + "/run/node1/job7/exit");
  ASSERT_TRUE(Sent([](const auto& m) {
    return m.has_batch_exited() && m.batch_exited().job_id() == kJob &&
           m.batch_exited().exit_code() == 5;
  }));
}

// On a shared tmpfs another user can make the job state directory first, or a link in its place:
// the agent refuses to start rather than keep root's job records where someone else steers them.
TEST_F(AgentTest, AJobStateDirSomeoneElseCouldHavePreparedIsRefused) {
  fs::create_directories(dir_ + "/elsewhere");
  fs::create_directory_symlink(dir_ + "/elsewhere", dir_ + "/run");
  config_.agent.job_state_dir = dir_ + "/run";
  // The real link, which proves its node with the node's key.
  config_.node_auth.key_file = dir_ + "/%n.key";
  std::ofstream(dir_ + "/node1.key") << NodeKeyText(std::string(kNodeKeyBytes, 'k'));
  fs::permissions(dir_ + "/node1.key", fs::perms::owner_read | fs::perms::owner_write);
  AgentOptions o = BaseOptions();
  auto a = Agent::Create(o);
  ASSERT_TRUE(a.ok());
  Status st = (*a)->Start();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find(dir_ + "/run"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(dir_ + "/elsewhere/node1")) << "nothing made through the link";

  fs::remove(dir_ + "/run");
  fs::create_directories(dir_ + "/run");
  fs::permissions(dir_ + "/run", fs::perms::all);  // anyone may write in it
  a = Agent::Create(o);
  ASSERT_TRUE(a.ok());
  st = (*a)->Start();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("written by other users"), std::string::npos) << st.message();
}

// A state file is trusted only where only the agent could have written it, and only for the job
// its directory is named after; a state naming a cgroup other than the job's own is not obeyed.
TEST_F(AgentTest, AStateSomeoneElseCouldHaveWrittenIsNeverReadopted) {
  const std::string spool = dir_ + "/spool";
  v1::AgentJobState st;
  *st.mutable_launch() = Launch(1).launch_job();  // job 7
  fs::create_directories(spool + "/job7");
  std::ofstream(spool + "/job7/state") << st.SerializeAsString();
  fs::permissions(spool + "/job7", fs::perms::all);  // anyone could have replaced it
  fs::create_directories(spool + "/job10");          // a copy of job 7's state under another name
  std::ofstream(spool + "/job10/state") << st.SerializeAsString();
  fs::create_directories(spool + "/job11");
  v1::AgentJobState other_cgroup = st;
  other_cgroup.mutable_launch()->set_job_id(11);
  other_cgroup.set_cgroup("/sys/fs/cgroup/system.slice");
  std::ofstream(spool + "/job11/state") << other_cgroup.SerializeAsString();

  StartAgent();
  const v1::RegisterRequest reg = link_->Register();
  std::set<uint64_t> lost(reg.lost_job_ids().begin(), reg.lost_job_ids().end());
  EXPECT_EQ(lost, (std::set<uint64_t>{7, 10}));
  ASSERT_EQ(reg.running_job_ids_size(), 1);
  EXPECT_EQ(reg.running_job_ids(0), 11u) << "re-adopted, but without the cgroup it named";
  link_->Connect(1);
  v1::ControllerMessage t = Terminate(1);
  t.mutable_terminate_job()->set_job_id(11);
  link_->Command(t);
  ASSERT_TRUE(
      Sent([](const auto& m) { return m.has_job_cleaned() && m.job_cleaned().job_id() == 11u; }));
}

// A job directory left from an earlier run that others could change (an older version's, handed
// to the job's user) is moved aside whole, not walked and deleted as root, and the launch gets
// a fresh one that is the agent's alone.
TEST_F(AgentTest, ALeftoverJobDirectoryOthersCouldChangeIsMovedAsideNotReused) {
  StartAgent();
  const std::string job_dir = dir_ + "/spool/job7";
  fs::create_directories(job_dir);
  fs::permissions(job_dir, fs::perms::all);
  std::ofstream(job_dir + "/planted") << "x";
  link_->Connect(1);
  link_->Command(Launch(1));
  ASSERT_TRUE(
      Sent([](const auto& m) { return m.has_job_started() && m.job_started().job_id() == kJob; }));
  EXPECT_FALSE(fs::exists(job_dir + "/planted")) << "the launch reused the untrusted directory";
  EXPECT_EQ(fs::status(job_dir).permissions(), fs::perms(0711));
  bool aside = false;
  for (const auto& e : fs::directory_iterator(dir_ + "/spool")) {
    const std::string name = e.path().filename().string();
    aside |= name.rfind("job7.untrusted.", 0) == 0 && fs::exists(e.path() / "planted");
  }
  EXPECT_TRUE(aside) << "moved aside with its contents for the admin";
}

TEST_F(AgentTest, AKeeperPidReusedByAnotherProcessIsNotAdopted) {
  const std::string spool = dir_ + "/spool";
  LeaveRunningJob(spool);
  launcher_->AddRunning(4242, 4243, 12345);  // the same pid, started at another time

  StartAgent();
  link_->Connect(1);
  ASSERT_TRUE(Sent([](const auto& m) {
    return m.has_batch_exited() && m.batch_exited().job_id() == kJob &&
           m.batch_exited().signal() == SIGKILL;
  })) << "the script ended while the agent was away, how is unknowable";
}

TEST_F(AgentTest, CommandsFromAnOlderControllerEpochAreRefusedEvenAfterARestart) {
  StartAgent();
  link_->Connect(5);
  link_->Command(Launch(4));  // a stale controller
  link_->Command(Launch(5));  // commands are handled in order: the first is decided by now
  auto spawned = launcher_->WaitForSpawns(1);
  ASSERT_EQ(spawned.size(), 1u) << "the epoch-4 launch was refused, the epoch-5 one ran";

  // A new agent on the same spool still knows epoch 5.
  agent_->Shutdown();
  agent_.reset();
  auto fresh = std::make_shared<FakeLauncher>();
  launcher_ = fresh;
  StartAgent();
  link_->Connect(3);  // an old controller comes back
  link_->Command(Launch(3, /*run=*/1));
  link_->Command(Launch(5, /*run=*/2));
  spawned = fresh->WaitForSpawns(1);
  ASSERT_EQ(spawned.size(), 1u);
  EXPECT_EQ(Env(spawned[0].spec)["SLURM_RESTART_COUNT"], "2") << "only the current epoch's launch";
}

TEST_F(AgentTest, AnInjectedGpuFaultIsReportedAndSoIsItsRecovery) {
  StartAgent();
  link_->Connect(1);
  const std::string faults = dir_ + "/spool/gpu-faults";
  std::ofstream(faults) << "2 xid 79\n";
  ASSERT_TRUE(Sent([](const auto& m) {
    return m.has_gpu_health() && m.gpu_health().index() == 2 &&
           m.gpu_health().health() == "XID 79 (fallen off the bus)";
  }));
  EXPECT_EQ(link_->Register().inventory().gpus(2).health(), "XID 79 (fallen off the bus)")
      << "a registration carries the health too";
  fs::remove(faults);
  ASSERT_TRUE(Sent([](const auto& m) {
    return m.has_gpu_health() && m.gpu_health().index() == 2 && m.gpu_health().health().empty();
  }));
}

TEST_F(AgentTest, StopFollowsKillJobsOnStop) {
  config_.agent.kill_jobs_on_stop = false;
  StartAgent();
  link_->Connect(1);
  link_->Command(Launch(1));
  auto spawned = launcher_->WaitForSpawns(1);
  ASSERT_EQ(spawned.size(), 1u);
  agent_->Stop();  // a restart or an upgrade: the job keeps running
  for (const auto& [pid, sig] : launcher_->signals()) {
    EXPECT_NE(pid, -spawned[0].task_pid) << "signal " << sig << " sent to a job that must survive";
  }
  EXPECT_TRUE(fs::exists(dir_ + "/spool/job7/state"));

  config_.agent.kill_jobs_on_stop = true;
  launcher_ = std::make_shared<FakeLauncher>();
  StartAgent();  // re-adopts job 7
  agent_->Stop();
  EXPECT_FALSE(fs::exists(dir_ + "/spool/job7")) << "kill_jobs_on_stop ends the job";
}

// The agent runs as root and keeps each job's state and its keeper's exit record in the job's
// spool directory. A job (here a real script as an unprivileged user) can reach its own batch
// script there but cannot plant a link for root to write through, add a file, or move the state.
TEST_F(AgentTest, AJobCannotPlantLinksOrTouchTheRecordsTheRootAgentKeeps) {
  const muster::testing::TestUser& u = muster::testing::TestUserFactory::Get();
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a job as another user";
  // As root (CI) the attack must be tried, not skipped.
  ASSERT_TRUE(u.ready) << "cannot create the test user (useradd/groupadd)";
  const std::string out = dir_ + "/out", precious = dir_ + "/precious";
  fs::create_directories(out);
  fs::permissions(out, fs::perms::all);
  std::ofstream(precious) << "precious\n";
  real_launcher_ = NewProcessLauncher();
  StartAgent();
  link_->Connect(1);
  v1::ControllerMessage m = Launch(1);
  v1::JobSpec* spec = m.mutable_launch_job()->mutable_spec();
  spec->set_user(muster::testing::TestUser::kName);
  spec->set_uid(u.uid);
  spec->set_gid(u.gid);
  spec->set_work_dir(out);
  spec->set_stdout_pattern(out + "/job.out");
  spec->set_script(
      "#!/bin/sh\n"
      "d=$(dirname \"$0\")\n"
      "ln -s " +
      precious +
      " \"$d/exit.tmp\" 2>/dev/null; echo ln=$?\n"
      "touch \"$d/planted\" 2>/dev/null; echo touch=$?\n"
      "mv \"$d/state\" \"$d/moved\" 2>/dev/null; echo mv=$?\n"
      "cat \"$d/state\" >/dev/null 2>&1; echo read=$?\n"
      "ls \"$d\" >/dev/null 2>&1; echo list=$?\n");
  m.mutable_launch_job()->mutable_allocation()->mutable_nodes(0)->clear_gpu_indices();
  link_->Command(m);
  ASSERT_TRUE(Sent([](const auto& msg) {
    return msg.has_batch_exited() && msg.batch_exited().job_id() == kJob &&
           msg.batch_exited().exit_code() == 0;
  })) << std::ifstream(out + "/job.out").rdbuf();
  std::stringstream got;
  got << std::ifstream(out + "/job.out").rdbuf();
  for (const char* op : {"ln=0", "touch=0", "mv=0", "read=0", "list=0"}) {
    EXPECT_EQ(got.str().find(op), std::string::npos) << op << " in:\n" << got.str();
  }
  EXPECT_NE(got.str().find("ln=1"), std::string::npos) << "the script did run:\n" << got.str();
  std::stringstream kept;
  kept << std::ifstream(precious).rdbuf();
  EXPECT_EQ(kept.str(), "precious\n") << "root wrote through the job's link";
}

// --get-user-env: the user's login shell runs (as the user; here a stand-in that prints noise
// first, as a chatty profile does) and the job starts from what it exported, with the submitted
// environment on top.
TEST_F(AgentTest, GetUserEnvStartsTheJobFromTheLoginEnvironmentWithTheSubmittedOneOnTop) {
  const std::string shell = dir_ + "/login-shell", out = dir_ + "/job.out";
  std::ofstream(shell) << "#!/bin/sh\n"
                          "echo 'Welcome to the cluster'\n"
                          "FROM_PROFILE=yes FROM_SUBMITTER=profile\n"
                          "export FROM_PROFILE FROM_SUBMITTER\n"
                          "while [ $# -gt 0 ] && [ \"$1\" != -c ]; do shift; done\n"
                          "exec /bin/sh -c \"$2\"\n";
  fs::permissions(shell, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  login_shell_ = shell;
  real_launcher_ = NewProcessLauncher();
  StartAgent();
  link_->Connect(1);
  v1::ControllerMessage m = Launch(1);
  v1::JobSpec* spec = m.mutable_launch_job()->mutable_spec();
  spec->set_work_dir(dir_);
  spec->set_stdout_pattern(out);
  spec->set_script(
      "#!/bin/sh\necho \"profile=$FROM_PROFILE submitter=$FROM_SUBMITTER "
      "flag=$SLURM_GET_USER_ENV\"\n");
  spec->mutable_get_user_env()->set_timeout_s(20);
  m.mutable_launch_job()->mutable_allocation()->mutable_nodes(0)->clear_gpu_indices();
  link_->Command(m);
  ASSERT_TRUE(Sent([](const auto& msg) {
    return msg.has_batch_exited() && msg.batch_exited().job_id() == kJob &&
           msg.batch_exited().exit_code() == 0;
  })) << std::ifstream(out).rdbuf();
  std::stringstream got;
  got << std::ifstream(out).rdbuf();
  EXPECT_EQ(got.str(), "profile=yes submitter=1 flag=1\n")
      << "the profile's own variable, the submitted one winning over the profile's";
}

// -S/--core-spec: the batch script runs on the job's CPUs less the core set aside, as the
// kernel tells it from inside (no cgroup here: its own binding does it).
TEST_F(AgentTest, CoreSpecKeepsTheBatchScriptOffTheSetAsideCore) {
  auto machine = ReadCpuTopology();
  ASSERT_TRUE(machine.ok()) << machine.status().ToString();
  std::set<std::pair<uint32_t, uint32_t>> cores;
  for (const CpuTopology::Cpu& c : machine->cpus) cores.insert({c.socket, c.core});
  if (cores.size() < 2) GTEST_SKIP() << "one core: none to set aside and one to keep";
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  std::vector<uint32_t> allowed;  // where this test (and so the agent's children) may run
  for (const CpuTopology::Cpu& c : machine->cpus) {
    if (CPU_ISSET(c.id, &mine)) allowed.push_back(c.id);
  }
  auto aside = SpecializedCpus(*machine, 1, 0);
  ASSERT_TRUE(aside.ok()) << aside.status().ToString();
  const std::vector<uint32_t> left = CpusOtherThan(allowed, *aside);
  if (left.empty()) GTEST_SKIP() << "this test may only run on the core set aside";

  const std::string out = dir_ + "/job.out";
  // What the agent logs (before it starts, and until it is gone: its threads log).
  auto logs = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(512);
  spdlog::default_logger()->sinks().push_back(logs);
  real_launcher_ = NewProcessLauncher();
  StartAgent();
  link_->Connect(1);
  v1::ControllerMessage m = Launch(1);
  v1::LaunchJob* l = m.mutable_launch_job();
  l->mutable_spec()->set_core_spec(1);
  l->mutable_spec()->set_work_dir(dir_);
  l->mutable_spec()->set_stdout_pattern(out);
  l->mutable_spec()->set_script("#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status | cut -f2\n");
  v1::NodeAllocation* na = l->mutable_allocation()->mutable_nodes(0);
  na->clear_gpu_indices();
  na->clear_cpu_ids();
  for (const CpuTopology::Cpu& c : machine->cpus) na->add_cpu_ids(c.id);  // the whole node
  link_->Command(m);
  ASSERT_TRUE(Sent([](const auto& msg) {
    return msg.has_batch_exited() && msg.batch_exited().job_id() == kJob &&
           msg.batch_exited().exit_code() == 0;
  })) << std::ifstream(out).rdbuf();
  std::stringstream got;
  got << std::ifstream(out).rdbuf();
  EXPECT_EQ(got.str(), FormatCpuList(left) + "\n");
  auto seen = ParseCpuList(got.str());
  ASSERT_TRUE(seen.ok()) << got.str();
  for (uint32_t c : *aside) {
    EXPECT_EQ(std::count(seen->begin(), seen->end(), c), 0) << "CPU " << c << " was set aside";
  }
  // No cgroup here: only the binding keeps the job off those CPUs, which the job could undo.
  // The admin hears it, once for the job.
  agent_.reset();
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), logs), sinks.end());
  int warned = 0;
  for (const std::string& line : logs->last_formatted()) {
    warned += line.find(
                  "job=7 node=node1 --core-spec/--thread-spec: no cpuset here (no job "
                  "cgroups); the CPUs set aside are kept from the job only by binding "
                  "it") != std::string::npos;
  }
  EXPECT_EQ(warned, 1);
}

// srun --bcast with steps inside the agent: a modified srun sends all of the program but its last
// byte and waits. Once the job takes no more steps here (its batch script ended), the last byte
// starts nothing: the step fails, saying why.
TEST_F(AgentTest, ABcastFinishedAfterTheBatchScriptEndedStartsNothing) {
  const std::string key(32, 'k'), ran = dir_ + "/ran", go = dir_ + "/go";
  real_launcher_ = NewProcessLauncher();
  StartAgent();
  link_->Connect(1, key);
  v1::ControllerMessage m = Launch(1);
  m.mutable_launch_job()->mutable_allocation()->mutable_nodes(0)->clear_gpu_indices();
  m.mutable_launch_job()->mutable_spec()->set_work_dir(dir_);
  m.mutable_launch_job()->mutable_spec()->set_script("#!/bin/sh\nwhile [ ! -e " + go +
                                                     " ]; do sleep 0.05; done\n");
  link_->Command(m);
  ASSERT_TRUE(Sent([](const auto& msg) { return msg.has_job_started(); }));
  const std::string program = "#!/bin/sh\ntouch " + ran + "\n";
  auto fd = ConnectTcp(agent_->step_address(), 2000);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  const std::string copy = dir_ + "/copy";
  ASSERT_TRUE(WriteFrame(*fd, 0, BcastStep(key, copy, program.size()).SerializeAsString()).ok());
  ASSERT_TRUE(WriteFrame(*fd, 5, program.substr(0, program.size() - 1)).ok());
  std::ofstream(go).close();  // the batch script ends
  ASSERT_TRUE(Sent([](const auto& msg) { return msg.has_batch_exited(); }));
  ASSERT_TRUE(WriteFrame(*fd, 5, program.substr(program.size() - 1)).ok());
  StepHeard h = ListenToStep(*fd);
  ::close(*fd);
  EXPECT_NE(h.error.find("--bcast: job 7 no longer takes steps on node1"), std::string::npos)
      << h.error;
  EXPECT_EQ(h.exits, 0);
  EXPECT_FALSE(fs::exists(ran)) << "the step's task ran after its job's batch script ended";
}

// The writer is the job's: the job's end stops it (its copy under way removed) and waits for it,
// and the last byte, sent once the job is gone from the node, starts nothing.
TEST_F(AgentTest, TheJobsEndStopsABcastWriterAndWaitsForIt) {
  const std::string key(32, 'k'), ran = dir_ + "/ran", copy = dir_ + "/copy";
  real_launcher_ = NewProcessLauncher();
  StartAgent();
  link_->Connect(1, key);
  v1::ControllerMessage m = Launch(1);
  m.mutable_launch_job()->mutable_allocation()->mutable_nodes(0)->clear_gpu_indices();
  m.mutable_launch_job()->mutable_spec()->set_work_dir(dir_);
  m.mutable_launch_job()->mutable_spec()->set_script("#!/bin/sh\nexec sleep 60\n");
  link_->Command(m);
  ASSERT_TRUE(Sent([](const auto& msg) { return msg.has_job_started(); }));
  const std::string program = "#!/bin/sh\ntouch " + ran + "\n";
  auto fd = ConnectTcp(agent_->step_address(), 2000);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  ASSERT_TRUE(WriteFrame(*fd, 0, BcastStep(key, copy, program.size()).SerializeAsString()).ok());
  ASSERT_TRUE(WriteFrame(*fd, 5, program.substr(0, program.size() - 1)).ok());
  ASSERT_TRUE(muster::testing::WaitFor([&] { return BcastTempFiles(dir_) == 1; }, 5000))
      << "the writer never made its copy";
  link_->Command(Terminate(1));
  ASSERT_TRUE(Sent(
      [](const auto& msg) { return msg.has_job_cleaned() && msg.job_cleaned().job_id() == kJob; }));
  EXPECT_EQ(BcastTempFiles(dir_), 0) << "the job was released with its writer still running";
  ASSERT_TRUE(WriteFrame(*fd, 5, program.substr(program.size() - 1)).ok());
  StepHeard h = ListenToStep(*fd);
  ::close(*fd);
  EXPECT_NE(h.error.find("--bcast: job 7 no longer takes steps on node1"), std::string::npos)
      << h.error;
  EXPECT_EQ(h.exits, 0);
  EXPECT_FALSE(fs::exists(ran)) << "the step's task ran after its job ended";
  EXPECT_FALSE(fs::exists(copy));
}

// A count this machine cannot set aside fails the launch, saying so: never a guess.
TEST_F(AgentTest, ACoreSpecTheNodeCannotHoldFailsTheLaunch) {
  StartAgent();
  link_->Connect(1);
  v1::ControllerMessage m = Launch(1);
  m.mutable_launch_job()->mutable_spec()->set_core_spec(65'535);
  link_->Command(m);
  ASSERT_TRUE(Sent([](const auto& msg) {
    return msg.has_job_launch_failed() && msg.job_launch_failed().job_id() == kJob &&
           msg.job_launch_failed().message().find("--core-spec=65535 leaves no core to the job") !=
               std::string::npos;
  }));
  EXPECT_TRUE(launcher_->WaitForSpawns(0).empty()) << "nothing started";
}

// Anyone who can reach a node's step port can connect before proving anything: what that
// makes the agent hold is bounded (a request's size, its time to arrive, unproven connections).
TEST_F(AgentTest, TheStepPortBoundsWhatAStrangerCanMakeItHold) {
  step_deadline_ms_ = 300;
  StartAgent();
  auto connect = [&] {
    auto fd = ConnectTcp(agent_->step_address(), 2000);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    return fd.ok() ? *fd : -1;
  };
  auto closed_within = [](int fd, int ms) {
    struct pollfd p {
      fd, POLLIN, 0
    };
    if (::poll(&p, 1, ms) <= 0) return false;
    char c;
    return ::read(fd, &c, 1) <= 0;
  };
  // A header promising more than any step request may be.
  int fd = connect();
  std::string header(8, '\0');
  const uint32_t len = htonl(4 + (4u << 20) + 1), type = htonl(0);
  std::memcpy(header.data(), &len, 4);
  std::memcpy(header.data() + 4, &type, 4);
  ASSERT_EQ(::write(fd, header.data(), 8), 8);
  EXPECT_TRUE(closed_within(fd, 2000)) << "it waited for a body it would never take";
  ::close(fd);
  // Part of a request, then silence: closed at the deadline.
  fd = connect();
  ASSERT_EQ(::write(fd, "\0\0\0\x10", 4), 4);
  EXPECT_TRUE(closed_within(fd, 3000)) << "a stalled stranger held its connection";
  ::close(fd);
  // Connections that never present a request: one address holds 8, its next is refused at
  // once; when 64 are held in all, a new one from elsewhere pushes out the oldest instead of
  // being refused (so whoever holds them all cannot keep a real step out).
  step_deadline_ms_ = 30'000;
  agent_.reset();
  StartAgent();
  const uint16_t port = static_cast<uint16_t>(
      std::stoi(agent_->step_address().substr(agent_->step_address().rfind(':') + 1)));
  // The agent accepts on one thread in the order connections complete, so each connection is
  // counted before the next is looked at.
  auto connect_from = [&](const std::string& source) {
    const int s = muster::testing::ConnectLoopbackFrom(source, port);
    EXPECT_GE(s, 0) << source;
    return s;
  };
  std::vector<int> one;
  for (int i = 0; i < 8; ++i) one.push_back(connect_from("127.0.0.1"));
  const int ninth = connect_from("127.0.0.1");
  EXPECT_TRUE(closed_within(ninth, 2000)) << "a 9th unproven connection from one address was kept";
  EXPECT_FALSE(closed_within(one[0], 200)) << "within the bound a connection stays";
  for (int f : one) ::close(f);
  ::close(ninth);
  // A fresh agent for the second part, rather than a guess at when it saw those go.
  agent_.reset();
  StartAgent();
  const uint16_t port2 = static_cast<uint16_t>(
      std::stoi(agent_->step_address().substr(agent_->step_address().rfind(':') + 1)));
  auto connect_again = [&](const std::string& source) {
    const int s = muster::testing::ConnectLoopbackFrom(source, port2);
    EXPECT_GE(s, 0) << source;
    return s;
  };
  std::vector<int> many;
  for (int a = 2; a <= 9; ++a) {
    for (int i = 0; i < 8; ++i) many.push_back(connect_again("127.0.0." + std::to_string(a)));
  }
  const int newcomer = connect_again("127.0.0.10");
  EXPECT_TRUE(closed_within(many[0], 2000)) << "the oldest of 64 unproven connections stayed";
  EXPECT_FALSE(closed_within(newcomer, 200)) << "a new connection was refused: the port is locked";
  EXPECT_FALSE(closed_within(many[1], 100));
  for (int f : many) ::close(f);
  ::close(newcomer);
}

}  // namespace
}  // namespace muster::agent
