// Starting processes for real: directory, environment, output files, sessions, users, cgroups.
#include "spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>

#include "cgroup.h"
#include "harness/test_user.h"

namespace muster::agent {
namespace {

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

// A step's PMI socket reaches the task as fd 3 and nothing else of ours does, wherever the
// socket was (fd 3 itself included: a dup2 onto itself would leave it close-on-exec).
TEST_F(LauncherTest, ThePmiSocketIsInheritedAsFdThreeOnly) {
  for (bool at_three : {false, true}) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    // Our end well away from fd 3 (a fresh socket pair may well be 3 and 4).
    const int ours = ::fcntl(sv[0], F_DUPFD_CLOEXEC, 20);
    ::close(sv[0]);
    sv[0] = ours;
    int child_end = -1;
    int kept_three = -1;  // what this process had at fd 3, put back afterwards
    if (!at_three) {
      child_end = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 20);
    } else {
      if (::fcntl(3, F_GETFD) >= 0) kept_three = ::fcntl(3, F_DUPFD_CLOEXEC, 20);
      child_end = ::dup3(sv[1], 3, O_CLOEXEC);
    }
    ::close(sv[1]);
    ASSERT_GE(child_end, 0) << at_three;
    SpawnSpec s;
    s.argv = {"sh", "-c", "echo hi >&3; readlink /proc/$$/fd/3 | cut -c1-7; ls /proc/$$/fd"};
    s.env = {"PATH=/usr/bin:/bin"};
    s.stdout_path = (dir_ / "out.txt").string();
    s.pmi_fd = child_end;
    auto sp = Spawn(s);
    ASSERT_TRUE(sp.ok()) << sp.status().ToString();
    ::close(child_end);
    Wait(*sp);
    char buf[16] = {0};
    EXPECT_EQ(::read(sv[0], buf, sizeof buf - 1), 3) << at_three;
    EXPECT_STREQ(buf, "hi\n");
    std::istringstream out(Read(s.stdout_path));
    std::string what;
    std::getline(out, what);
    EXPECT_EQ(what, "socket:") << at_three;
    std::set<int> fds;
    for (std::string fd; std::getline(out, fd);) fds.insert(std::atoi(fd.c_str()));
    EXPECT_TRUE(fds.count(3));
    if (sv[0] != 3) {
      EXPECT_FALSE(fds.count(sv[0])) << "our end of the socket reached the task";
    }
    if (!at_three) {
      EXPECT_FALSE(fds.count(child_end)) << "the socket stayed at its own number too";
    }
    ::close(sv[0]);
    if (kept_three >= 0) {
      ::dup3(kept_three, 3, O_CLOEXEC);
      ::close(kept_three);
    }
  }
  SpawnSpec kept;
  kept.argv = {"true"};
  kept.pmi_fd = 0;
  kept.exit_file = (dir_ / "exit").string();
  EXPECT_EQ(Spawn(kept).status().code(), StatusCode::kInvalidArgument);
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

// srun --cpu-bind: the task starts bound to its CPUs (set before its exec, so everything it
// starts inherits them); a CPU the machine lacks fails the start, saying so.
TEST_F(LauncherTest, BindsTheTaskToItsCpusBeforeItRuns) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  uint32_t last = 0;
  for (uint32_t c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mine)) last = c;
  }
  SpawnSpec s;
  s.argv = {"sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  s.env = {"PATH=/usr/bin:/bin"};
  s.stdout_path = (dir_ / "cpus.txt").string();
  s.cpus = {last};
  auto sp = Spawn(s);
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  Wait(*sp);
  EXPECT_EQ(Read(s.stdout_path), "Cpus_allowed_list:\t" + std::to_string(last) + "\n");

  s.cpus = {4000};
  sp = Spawn(s);
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(sp.status().message().find("cannot bind the task to its CPUs"), std::string::npos)
      << sp.status().message();
}

// A job's input or output may be a FIFO that nobody opens at the other end (sbatch
// --input=FIFO): the agent waits for the child's report, so an open that blocked would stop the
// agent, and its heartbeats with it. The input reads end-of-file; the output is refused at once.
TEST_F(LauncherTest, AFifoWithNobodyAtTheOtherEndNeverHoldsTheLaunch) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  SpawnSpec s;
  s.argv = {"sh", "-c", "cat; echo read-all"};
  s.env = {"PATH=/usr/bin:/bin"};
  s.stdin_path = fifo;
  s.stdout_path = (dir_ / "out.txt").string();
  auto launch = std::async(std::launch::async, [&] { return Spawn(s); });
  if (launch.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    const int writer = ::open(fifo.c_str(), O_WRONLY);  // let it go, then fail
    ::close(writer);
    FAIL() << "the launch waited for a writer on the input FIFO";
  }
  auto sp = launch.get();
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  Wait(*sp);
  EXPECT_EQ(Read(s.stdout_path), "read-all\n");

  s.stdin_path.clear();
  s.stdout_path = fifo;
  auto out = std::async(std::launch::async, [&] { return Spawn(s); });
  if (out.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    ::close(reader);
    FAIL() << "the launch waited for a reader on the output FIFO";
  }
  auto refused = out.get();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cannot open output file " + fifo), std::string::npos)
      << refused.status().message();
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

// The keeper runs as root and writes the job's exit record as the job ends: never through a
// link planted at its temporary or final name, and never in a directory others can write.
TEST_F(LauncherTest, TheExitRecordIsNeverWrittenThroughALinkNorWhereOthersCanWrite) {
  for (const std::string keeper : {"", MUSTER_KEEPER}) {
    SCOPED_TRACE(keeper.empty() ? "a copy of the agent keeps it" : "muster-keeper keeps it");
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::filesystem::permissions(dir_, std::filesystem::perms(0711));
    const std::string precious = (dir_ / "precious").string();
    std::ofstream(precious) << "precious\n";
    std::filesystem::create_symlink(precious, dir_ / "exit.tmp");
    std::filesystem::create_symlink(precious, dir_ / "exit");
    SpawnSpec s;
    s.argv = {"sh", "-c", "exit 3"};
    s.env = {"PATH=/usr/bin:/bin"};
    s.stdout_path = "/dev/null";
    s.exit_file = (dir_ / "exit").string();
    s.keeper_program = keeper;
    auto sp = Spawn(s);
    ASSERT_TRUE(sp.ok()) << sp.status().ToString();
    Wait(*sp);
    EXPECT_EQ(Read(precious), "precious\n") << "the keeper wrote through a planted link";
    EXPECT_FALSE(std::filesystem::is_symlink(dir_ / "exit"));
    auto status = ReadExitFile(s.exit_file);
    ASSERT_TRUE(status.ok()) << status.status().ToString();
    int code, sig;
    DecodeWaitStatus(*status, &code, &sig);
    EXPECT_EQ(code, 3);

    std::filesystem::permissions(dir_, std::filesystem::perms::all);  // now anyone may plant links
    auto refused = Spawn(s);
    ASSERT_FALSE(refused.ok()) << "a keeper started with its record in a world-writable directory";
    EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(refused.status().message().find("another user could write"), std::string::npos)
        << refused.status().message();
  }
}

// As root (CI): a real user made by the test setup, with a supplementary group; the job runs as
// that user under a keeper, and what it daemonizes ends with it.
class RootLauncherTest : public LauncherTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a user and switch to it";
    const muster::testing::TestUser& u = muster::testing::TestUserFactory::Get();
    ASSERT_TRUE(u.ready) << "as root the test user must be made (useradd/groupadd)";
    LauncherTest::SetUp();
    // The user writes its output here; the keeper's record goes where only root writes.
    std::filesystem::permissions(dir_, std::filesystem::perms::all);
    keep_ = dir_ / "keeper";
    std::filesystem::create_directory(keep_);
    std::filesystem::permissions(keep_, std::filesystem::perms(0711));
    uid_ = u.uid;
    gid_ = u.gid;
    extra_ = u.extra_gid;
  }
  SpawnSpec AsUser(const std::string& script) {
    SpawnSpec s;
    s.argv = {"sh", "-c", script};
    s.env = {"PATH=/usr/bin:/bin", "FOO=bar"};
    s.cwd = dir_.string();
    s.change_user = true;
    s.uid = uid_;
    s.gid = gid_;
    s.groups = GroupsOf(muster::testing::TestUser::kName, gid_);
    s.stdout_path = (dir_ / "out.txt").string();
    s.exit_file = (keep_ / "exit").string();
    s.keeper_program = GetParam();
    return s;
  }
  std::filesystem::path keep_;
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

TEST_P(RootLauncherTest, RunsAsTheUserWithItsGroupsAndItsLeftoversEndWithIt) {
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

TEST_P(RootLauncherTest, SignallingTheJobReachesWhatEscapedItsSession) {
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

// Output files and the working directory are the user's business: opened and entered after the
// switch to the user, so root's rights never reach them.
TEST_P(RootLauncherTest, OutputAndDirectoryAreReachedAsTheUserNeverAsRoot) {
  // A file only root may write: -o pointing at it fails, and it is left as it was.
  const std::string precious = (keep_ / "precious").string();  // keep_ is root's, 0711
  std::ofstream(precious) << "root's\n";
  ::chmod(precious.c_str(), 0644);
  SpawnSpec s = AsUser("echo pwned");
  s.stdout_path = precious;
  auto sp = Spawn(s);
  ASSERT_FALSE(sp.ok()) << "wrote a root-only file";
  EXPECT_NE(sp.status().message().find("cannot open output file " + precious), std::string::npos)
      << sp.status().message();
  EXPECT_EQ(Read(precious), "root's\n");

  // A link the user planted at its output path, pointing at that file: followed as the user,
  // so refused the same way.
  const std::string planted = (dir_ / "planted.out").string();
  std::filesystem::create_symlink(precious, planted);
  s.stdout_path = planted;
  sp = Spawn(s);
  ASSERT_FALSE(sp.ok());
  EXPECT_EQ(Read(precious), "root's\n");
  s.stdout_path = (dir_ / "out.txt").string();
  s.stderr_path = planted;
  sp = Spawn(s);
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(sp.status().message().find("cannot open"), std::string::npos);
  EXPECT_EQ(Read(precious), "root's\n");

  // A directory the user cannot enter: the job fails to start and says why.
  const std::string closed = (keep_ / "closed").string();
  std::filesystem::create_directory(closed);
  ::chmod(closed.c_str(), 0700);
  s = AsUser("echo inside");
  s.cwd = closed;
  sp = Spawn(s);
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(sp.status().message().find("cannot change to directory " + closed), std::string::npos)
      << sp.status().message();
}

// Each batch script is kept either by a copy of the agent or by the muster-keeper program.
INSTANTIATE_TEST_SUITE_P(Keepers, RootLauncherTest, ::testing::Values("", MUSTER_KEEPER),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param.empty() ? std::string("AgentCopy")
                                                  : std::string("KeeperProgram");
                         });

// Processes are created inside their cgroup (clone3 CLONE_INTO_CGROUP), directly and under a
// keeper; failures still say what failed. Needs a writable cgroup v2 hierarchy (root).
TEST_F(LauncherTest, StartsInsideTheGivenCgroup) {
  JobCgroups cg = JobCgroups::Detect("", "launcher-test-" + std::to_string(::getpid()));
  if (!cg.enabled()) GTEST_SKIP() << cg.description();
  auto dir = cg.Create(7, {});
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  int fd = ::open(dir->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (const std::string mode : {"direct", "copy-kept", "program-kept"}) {
    const bool kept = mode != "direct";
    SpawnSpec s;
    if (mode == "program-kept") s.keeper_program = MUSTER_KEEPER;
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
    EXPECT_NE(got.find(want), std::string::npos) << mode << ": " << got;
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
