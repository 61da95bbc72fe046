// muster-keeper: the spec it is handed, the program itself, and what of the job it never sees.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "muster/keeper/keeper_spec.h"
#include "spawn.h"

namespace muster::keeper {
namespace {

KeeperSpec Full() {
  KeeperSpec s;
  s.report_fd = 5;
  s.exit_dir_fd = 6;
  s.exit_name = "exit";
  s.path = "/usr/bin/env";
  s.argv = {"env", "a b", "", "+-=\n\t\xff"};
  s.env = {"PATH=/usr/bin:/bin", "EMPTY=", "ODD=-"};
  s.cwd = "/tmp/work dir";
  s.change_user = true;
  s.uid = 4294967294u;
  s.gid = 1001;
  s.groups = {1001, 27, 0};
  s.stdout_path = "/tmp/out-%j";
  s.stderr_path = "";  // present but empty is not absent
  s.stdin_path = std::nullopt;
  s.tty_path = "/dev/pts/7";
  s.stdin_fd = -1;
  s.stdout_fd = 9;
  s.stderr_fd = -1;
  s.cgroup_procs_fd = 12;
  s.output_flags = 01101;
  s.cpu_mask = {0x5, 0, uint64_t{1} << 63};
  return s;
}

void ExpectSame(const KeeperSpec& a, const KeeperSpec& b) {
  EXPECT_EQ(a.report_fd, b.report_fd);
  EXPECT_EQ(a.exit_dir_fd, b.exit_dir_fd);
  EXPECT_EQ(a.exit_name, b.exit_name);
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.argv, b.argv);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.cwd, b.cwd);
  EXPECT_EQ(a.change_user, b.change_user);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.gid, b.gid);
  EXPECT_EQ(a.groups, b.groups);
  EXPECT_EQ(a.stdout_path, b.stdout_path);
  EXPECT_EQ(a.stderr_path, b.stderr_path);
  EXPECT_EQ(a.stdin_path, b.stdin_path);
  EXPECT_EQ(a.tty_path, b.tty_path);
  EXPECT_EQ(a.stdin_fd, b.stdin_fd);
  EXPECT_EQ(a.stdout_fd, b.stdout_fd);
  EXPECT_EQ(a.stderr_fd, b.stderr_fd);
  EXPECT_EQ(a.cgroup_procs_fd, b.cgroup_procs_fd);
  EXPECT_EQ(a.output_flags, b.output_flags);
  EXPECT_EQ(a.cpu_mask, b.cpu_mask);
}

TEST(KeeperSpecTest, EveryFieldSurvivesTheTrip) {
  const KeeperSpec s = Full();
  KeeperSpec back;
  ASSERT_TRUE(DecodeKeeperSpec(EncodeKeeperSpec(s), &back));
  ExpectSame(s, back);
  ASSERT_TRUE(back.stderr_path.has_value());
  EXPECT_FALSE(back.stdin_path.has_value());
}

TEST(KeeperSpecTest, AnythingButAWholeSpecIsRefused) {
  const std::string good = EncodeKeeperSpec(Full());
  KeeperSpec out;
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_FALSE(DecodeKeeperSpec(std::string_view(good).substr(0, len), &out)) << "prefix " << len;
  }
  EXPECT_FALSE(DecodeKeeperSpec(good + "x", &out)) << "trailing bytes";
  EXPECT_FALSE(DecodeKeeperSpec(good + std::string(1, '\0'), &out)) << "an extra field";
  std::string other = good;
  other.replace(0, 20, "muster-keeper-spec-9");
  EXPECT_FALSE(DecodeKeeperSpec(other, &out)) << "another version";

  auto with_field = [&](size_t index, const std::string& value) {
    std::vector<std::string> fields;
    std::string cur;
    for (char c : good) {
      if (c == '\0') {
        fields.push_back(cur);
        cur.clear();
      } else {
        cur.push_back(c);
      }
    }
    fields.at(index) = value;
    std::string joined;
    for (const auto& f : fields) joined += f + std::string(1, '\0');
    return joined;
  };
  EXPECT_TRUE(DecodeKeeperSpec(with_field(1, "5"), &out));
  EXPECT_FALSE(DecodeKeeperSpec(with_field(1, "5x"), &out)) << "not a number";
  EXPECT_FALSE(DecodeKeeperSpec(with_field(1, "-2"), &out)) << "not a descriptor";
  EXPECT_FALSE(DecodeKeeperSpec(with_field(1, "99999999999"), &out)) << "out of range";
  EXPECT_FALSE(DecodeKeeperSpec(with_field(5, "2000000000"), &out)) << "argc beyond the input";
  EXPECT_FALSE(DecodeKeeperSpec(with_field(5, "0"), &out)) << "no program arguments";
  EXPECT_FALSE(DecodeKeeperSpec(with_field(3, ""), &out)) << "no exit record name";
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int RunKeeper(const std::vector<std::string>& args, std::string* err) {
  const std::string errfile =
      std::filesystem::temp_directory_path() / ("muster-keeper-err-" + std::to_string(::getpid()));
  std::string cmd = MUSTER_KEEPER;
  for (const auto& a : args) cmd += " " + a;
  const int status = std::system((cmd + " 2>" + errfile).c_str());
  *err = Read(errfile);
  std::filesystem::remove(errfile);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(KeeperProgramTest, WithoutAGoodSpecItStartsNothingAndSaysWhy) {
  std::string err;
  EXPECT_EQ(RunKeeper({}, &err), 127);
  EXPECT_NE(err.find("usage: muster-keeper SPEC_FD"), std::string::npos) << err;
  EXPECT_EQ(RunKeeper({"0"}, &err), 127) << "stdin is no spec";
  EXPECT_EQ(RunKeeper({"7x"}, &err), 127);
  // A memfd with garbage in it, on fd 9 of the keeper.
  const int fd = ::memfd_create("garbage", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "muster-keeper-spec-1\0zz", 23), 23);
  EXPECT_EQ(RunKeeper({"9", "9<&" + std::to_string(fd)}, &err), 127);
  EXPECT_NE(err.find("malformed"), std::string::npos) << err;
  ::close(fd);
}

// The keeper runs as root: the job's environment must not be its environment (a job's LD_PRELOAD
// or GCONV_PATH steering root's process), and neither the environment nor the arguments may show
// on its command line, which every user of the node can read.
TEST(KeeperProgramTest, TheJobsEnvironmentNeverReachesTheKeeperOrItsCommandLine) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("muster-keeper-env-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms(0755));
  agent::SpawnSpec s;
  s.argv = {"sh", "-c", "sleep 2; echo $SECRET", "hunter3"};
  s.env = {"PATH=/usr/bin:/bin", "SECRET=hunter2", "LD_PRELOAD=/nonexistent/evil.so"};
  s.stdout_path = (dir / "out").string();
  s.exit_file = (dir / "exit").string();
  s.keeper_program = MUSTER_KEEPER;
  auto sp = agent::Spawn(s);
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  const std::string keeper = "/proc/" + std::to_string(sp->pid);
  const std::string cmdline = Read(keeper + "/cmdline");
  EXPECT_NE(cmdline.find("muster-keeper"), std::string::npos) << "not the keeper program";
  EXPECT_EQ(cmdline.find("hunter"), std::string::npos) << cmdline;
  EXPECT_EQ(Read(keeper + "/environ"), "") << "the keeper has no environment at all";
  // (It may read empty for a moment, while the shell changes programs.)
  std::string task_env;
  for (int i = 0; i < 100 && task_env.empty(); ++i, ::usleep(10'000)) {
    task_env = Read("/proc/" + std::to_string(sp->task_pid) + "/environ");
  }
  EXPECT_NE(task_env.find("SECRET=hunter2"), std::string::npos) << "the task has its own";
  int status = 0;
  ::waitpid(sp->pid, &status, 0);
  ::close(sp->pidfd);
  EXPECT_NE(Read(s.stdout_path).find("hunter2\n"), std::string::npos) << "the task's own, as given";
  auto recorded = agent::ReadExitFile(s.exit_file);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  EXPECT_EQ(*recorded, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace muster::keeper
