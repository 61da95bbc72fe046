// --propagate on the node (the clamp to the node's hard limits) and --get-user-env's pure parts.
#include "resource_limits.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "login_env.h"

namespace muster::agent {
namespace {

v1::ResourceLimit Want(const std::string& name, uint64_t soft, uint64_t hard) {
  v1::ResourceLimit l;
  l.set_name(name);
  l.set_soft(soft);
  l.set_hard(hard);
  return l;
}

// A node whose hard NOFILE is 4096, STACK unlimited, CORE unknown.
std::optional<uint64_t> Node(int resource) {
  if (resource == RLIMIT_NOFILE) return 4096;
  if (resource == RLIMIT_CORE) return std::nullopt;
  return UINT64_MAX;
}

TEST(ResourceLimitsTest, AValueWithinTheNodesHardLimitIsSetAsGiven) {
  ClampedLimits c =
      ClampLimits({Want("NOFILE", 1024, 2048), Want("STACK", 8 << 20, UINT64_MAX)}, Node);
  ASSERT_EQ(c.set.size(), 2u);
  EXPECT_EQ(c.set[0].resource, RLIMIT_NOFILE);
  EXPECT_EQ(c.set[0].soft, 1024u);
  EXPECT_EQ(c.set[0].hard, 4096u) << "the soft value goes over; the node keeps its hard one";
  EXPECT_EQ(c.set[1].resource, RLIMIT_STACK);
  EXPECT_EQ(c.set[1].hard, UINT64_MAX);
  EXPECT_TRUE(c.notes.empty());
}

TEST(ResourceLimitsTest, NothingIsRaisedAboveTheNodesHardLimit) {
  ClampedLimits c = ClampLimits({Want("NOFILE", 65536, UINT64_MAX)}, Node);
  ASSERT_EQ(c.set.size(), 1u);
  EXPECT_EQ(c.set[0].soft, 4096u);
  EXPECT_EQ(c.set[0].hard, 4096u);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("above the node's hard limit 4096"), std::string::npos) << c.notes[0];
  // A soft value above its own hard one is brought down to it.
  c = ClampLimits({Want("NOFILE", 3000, 100)}, Node);
  ASSERT_EQ(c.set.size(), 1u);
  EXPECT_EQ(c.set[0].soft, 100u);
  EXPECT_EQ(c.set[0].hard, 4096u);
}

TEST(ResourceLimitsTest, WhatCannotBeSetKeepsTheNodesLimitAndIsNoted) {
  ClampedLimits c = ClampLimits({Want("CORE", 0, 0), Want("BOGUS", 1, 1)}, Node);
  EXPECT_TRUE(c.set.empty());
  ASSERT_EQ(c.notes.size(), 2u);
  EXPECT_NE(c.notes[0].find("Can't propagate RLIMIT_CORE"), std::string::npos) << c.notes[0];
  EXPECT_NE(c.notes[1].find("Can't propagate RLIMIT_BOGUS"), std::string::npos) << c.notes[1];
}

TEST(ResourceLimitsTest, RssIsCappedByTheJobsMemory) {
  ClampedLimits c = ClampLimits({Want("RSS", UINT64_MAX, UINT64_MAX), Want("AS", 1, UINT64_MAX)},
                                Node, uint64_t{1} << 30);
  ASSERT_EQ(c.set.size(), 2u);
  EXPECT_EQ(c.set[0].hard, uint64_t{1} << 30);
  EXPECT_EQ(c.set[1].hard, UINT64_MAX) << "AS is the cgroup's business, not capped by --mem";
}

TEST(ResourceLimitsTest, StepLimitsComeOutOfTheEnvironment) {
  std::vector<std::string> env = {"A=1", "SLURM_RLIMIT_NOFILE=1024,4096",
                                  "SLURM_RLIMIT_STACK=unlimited,unlimited", "SLURM_RLIMIT_CPU=x,1",
                                  "B=2"};
  std::vector<std::string> notes;
  std::vector<v1::ResourceLimit> got = TakeRlimitEnv(&env, &notes);
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "B=2"})) << "the tasks never see them";
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name(), "NOFILE");
  EXPECT_EQ(got[0].soft(), 1024u);
  EXPECT_EQ(got[0].hard(), 4096u);
  EXPECT_EQ(got[1].soft(), UINT64_MAX);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("RLIMIT_CPU"), std::string::npos);
}

TEST(LoginEnvTest, ParsesNulSeparatedEnvironment) {
  using namespace std::string_literals;
  const std::string env =
      "HOME=/home/u\0FROM_PROFILE=yes\0MULTI=a\nb\0BASH_FUNC_f%%=() { :; }\0"
      "=x\0noeq\0"s;
  // What a profile prints before the marker is not part of the first variable.
  const std::string out = "Welcome to the cluster\nX=1\0" + std::string(kLoginEnvMarker) + env;
  EXPECT_EQ(ParseLoginEnv(out),
            (std::vector<std::string>{"HOME=/home/u", "FROM_PROFILE=yes", "MULTI=a\nb"}));
  EXPECT_TRUE(ParseLoginEnv(env).empty()) << "no marker: the shell never reached it";
}

TEST(LoginEnvTest, RunsTheShellAsALoginShellInACleanEnvironment) {
  LoginUser u{
      .name = "alice", .home = "/home/alice", .shell = "/bin/bash", .uid = 1000, .gid = 1000};
  SpawnSpec sp = LoginEnvSpawn(u, "");
  EXPECT_EQ(sp.argv, (std::vector<std::string>{
                         "/bin/bash", "-l", "-c",
                         "echo MUSTER_LOGIN_ENVIRONMENT_FOLLOWS; exec /usr/bin/env -0"}));
  EXPECT_EQ(sp.env,
            (std::vector<std::string>{"HOME=/home/alice", "USER=alice", "LOGNAME=alice",
                                      "SHELL=/bin/bash", "PATH=/usr/local/bin:/usr/bin:/bin"}));
  EXPECT_EQ(sp.cwd, "/home/alice");
  EXPECT_EQ(LoginEnvSpawn(u, "S").argv[1], "-c") << "mode S: not a login shell";
  v1::UserEnvRequest r;
  EXPECT_EQ(LoginEnvTimeoutS(r), 8u);
  r.set_timeout_s(10'000);
  EXPECT_EQ(LoginEnvTimeoutS(r), kMaxLoginEnvTimeoutS);
}

}  // namespace
}  // namespace muster::agent
