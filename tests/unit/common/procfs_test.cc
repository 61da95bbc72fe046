#include "muster/common/procfs.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace muster {
namespace {

TEST(ProcfsTest, ReadsThisProcessStatLine) {
  auto s = ReadProcStat(::getpid());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->pid, ::getpid());
  EXPECT_EQ(s->state, 'R');
  EXPECT_EQ(s->ppid, ::getppid());
  EXPECT_EQ(s->pgrp, ::getpgrp());
  EXPECT_GT(s->start_time, 0u);
  EXPECT_EQ(ReadProcStat(::getpid())->start_time, s->start_time) << "stable: it names the process";
  EXPECT_FALSE(ReadProcStat(-1).has_value());
}

TEST(ProcfsTest, SeesChildrenGroupsAndZombies) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setpgid(0, 0);
    ::pause();
    ::_exit(0);
  }
  ::setpgid(child, child);  // either side may win the race; both ask for the same
  const auto below = DescendantsOf(::getpid());
  EXPECT_NE(std::find(below.begin(), below.end(), child), below.end());
  EXPECT_TRUE(ProcessAlive(child));
  EXPECT_TRUE(GroupHasLiveProcess(child));
  EXPECT_EQ(ProcessProgram(child), ProcessProgram(::getpid())) << "a fork runs our program";

  ::kill(child, SIGKILL);
  // Not reaped yet: a zombie, which holds nothing and counts as gone.
  for (int i = 0; i < 200 && ReadProcStat(child) && !ReadProcStat(child)->zombie(); ++i) {
    ::usleep(5'000);
  }
  ASSERT_TRUE(ReadProcStat(child).has_value());
  EXPECT_TRUE(ReadProcStat(child)->zombie());
  EXPECT_FALSE(ProcessAlive(child));
  EXPECT_FALSE(GroupHasLiveProcess(child));
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(ReadProcStat(child).has_value());
}

TEST(ProcfsTest, FindsTheCgroupHierarchyWhenThereIsOne) {
  const std::string mount = Cgroup2Mount();
  if (mount.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy mounted here";
  EXPECT_EQ(mount[0], '/');
  EXPECT_EQ(mount.find(' '), std::string::npos) << "the mount point, not the whole line";
  const std::string own = OwnCgroup2();
  EXPECT_EQ(own.empty() || own[0] == '/', true) << own;
}

}  // namespace
}  // namespace muster
