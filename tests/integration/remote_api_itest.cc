// The user API over TCP with MUNGE, as login and compute nodes use it: every command works, a
// job's own script calls back into the API and starts steps, another user is still another user,
// and a host without a working munged is told why.
#include <sys/wait.h>

#include "harness/cluster_test.h"
#include "harness/test_user.h"

namespace muster::testing {
namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";

struct CliRun {
  int exit_code = -1;
  std::string out;
};

// Runs the muster CLI (as `uid`/`gid` when given), with MUSTER_CONF and MUSTER_API=tcp: the way
// it runs on a host that has no controller socket.
CliRun RunMuster(const std::string& config, const std::vector<std::string>& args, uid_t uid = 0,
                 gid_t gid = 0, const std::string& api = "tcp",
                 const std::string& program = kMuster) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::close(pipefd[0]);
    if (uid != 0 && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) {
      ::_exit(126);
    }
    if (::chdir("/") != 0) ::_exit(126);  // the test's own directory may be closed to the user
    std::vector<std::string> env_s = {"MUSTER_CONF=" + config, "MUSTER_API=" + api,
                                      "PATH=/usr/bin:/bin"};
    std::vector<char*> env, argv{const_cast<char*>(program.c_str())};
    for (auto& e : env_s) env.push_back(e.data());
    env.push_back(nullptr);
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execve(program.c_str(), argv.data(), env.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  CliRun r;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) r.out.append(buf, n);
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::unique_ptr<InProcessCluster> StartRemoteCluster(int nodes) {
  InProcessClusterOptions o;
  o.nodes = nodes;
  o.remote_api = true;
  auto c = InProcessCluster::Start(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(RemoteApiTest, AGangSubmittedOverTcpRunsAndItsScriptUsesTheApi) {
  auto cluster = StartRemoteCluster(2);
  ASSERT_TRUE(cluster);
  const std::string out = cluster->dir() + "/jobs/";
  // The job's script queries the queue and starts a step on both nodes, over TCP.
  const std::string script =
      "#!/bin/sh\n"
      "export MUSTER_API=tcp\n" +
      kMuster + " queue --noheader -j $SLURM_JOB_ID > " + out + "queue.txt 2>&1\n" + kMuster +
      " run -N2 hostname > " + out + "step.txt 2>&1\n";
  auto client = client::ControllerClient::ConnectTcp(cluster->config());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  v1::SubmitJobRequest req;
  *req.mutable_spec() = Gang(2, 1);
  req.mutable_spec()->set_script(script);
  req.mutable_spec()->set_work_dir(cluster->dir());
  req.mutable_spec()->set_stdout_pattern(out + "job.out");
  auto submitted = client->SubmitJob(req);
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  const uint64_t id = submitted->job_id();
  ASSERT_EVENTUALLY(cluster->State(id) == v1::COMPLETED, 20'000)
      << Read(out + "job.out") << Read(out + "queue.txt") << Read(out + "step.txt");
  EXPECT_NE(Read(out + "queue.txt").find(std::to_string(id)), std::string::npos)
      << Read(out + "queue.txt");
  std::string step = Read(out + "step.txt");
  EXPECT_EQ(std::count(step.begin(), step.end(), '\n'), 2) << step;
  // And the CLI from "another host" (no socket) sees it finished.
  CliRun acct = RunMuster(cluster->config_path(), {"acct", "-j", std::to_string(id), "-n", "-X"});
  EXPECT_EQ(acct.exit_code, 0) << acct.out;
  EXPECT_NE(acct.out.find("COMPLETED"), std::string::npos) << acct.out;
}

TEST(RemoteApiTest, AnotherUserOverTcpIsStillAnotherUser) {
  const TestUser& user = TestUserFactory::Get();
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  ASSERT_TRUE(user.ready) << "cannot create the muster-test user";
  auto cluster = StartRemoteCluster(1);
  ASSERT_TRUE(cluster);
  // The build tree may sit where the other user cannot reach (/root): a copy of the CLI it can.
  const std::string cli = cluster->dir() + "/muster";
  std::filesystem::copy_file(kMuster, cli);
  std::filesystem::permissions(cli, std::filesystem::perms(0755));
  auto as_user = [&](const std::vector<std::string>& args) {
    return RunMuster(cluster->config_path(), args, user.uid, user.gid, "tcp", cli);
  };
  auto victim = cluster->Submit("#!/bin/sh\nsleep 60\n", Gang(1, 1));
  ASSERT_TRUE(victim.ok()) << victim.status().ToString();
  ASSERT_EVENTUALLY(cluster->State(*victim) == v1::RUNNING, 10'000);
  // The other user sees the queue (no privacy configured) but cannot touch root's job.
  CliRun queue = as_user({"queue", "--noheader"});
  EXPECT_EQ(queue.exit_code, 0) << queue.out;
  EXPECT_NE(queue.out.find(std::to_string(*victim)), std::string::npos) << queue.out;
  CliRun cancel = as_user({"cancel", std::to_string(*victim)});
  EXPECT_NE(cancel.exit_code, 0) << cancel.out;
  CliRun hold = as_user({"control", "hold", std::to_string(*victim)});
  EXPECT_NE(hold.exit_code, 0) << hold.out;
  EXPECT_EQ(cluster->State(*victim), v1::RUNNING);
  // Its own submission is its own: the job runs as that user.
  CliRun submit =
      as_user({"submit", "--parsable", "--chdir=/tmp", "-o", "/dev/null", "--wrap", "id -u"});
  ASSERT_EQ(submit.exit_code, 0) << submit.out;
  auto mine = cluster->Job(std::stoull(submit.out));
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(mine->user(), TestUser::kName);
}

TEST(RemoteApiTest, WithoutMungeTheCommandSaysWhyAndGetsNothing) {
  auto cluster = StartRemoteCluster(1);
  ASSERT_TRUE(cluster);
  // The same cluster seen from a host whose munged is not running.
  std::string text = Read(cluster->config_path());
  const std::string socket = cluster->dir() + "/munge/munge.sock";
  text.replace(text.find(socket), socket.size(), cluster->dir() + "/no-munged.sock");
  const std::string other_host = cluster->dir() + "/other-host.toml";
  std::ofstream(other_host) << text;
  CliRun r = RunMuster(other_host, {"queue"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("munged"), std::string::npos) << r.out;
  // On the controller's host the socket still works, whatever MUNGE does.
  CliRun local = RunMuster(other_host, {"queue"}, 0, 0, "");
  EXPECT_EQ(local.exit_code, 0) << local.out;
}

}  // namespace
}  // namespace muster::testing
