// The controller's mail sender: the command it builds (Slurm's argv, a fixed environment plus
// the notice's SLURM_*), a real program run with it, a program past its timeout killed, and the
// bounded queue.
#include "mail_sender.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace muster::rpc {
namespace {

using std::chrono::milliseconds;

controller::MailNotice Notice(uint64_t id = 12) {
  controller::MailNotice n;
  n.job_id = id;
  n.recipient = "alice@example.org";
  n.subject = "Slurm Job_id=12 Name=train $(id) Began, Queued time 00:00:01";
  n.env = {{"SLURM_JOB_ID", "12"},
           {"SLURM_JOB_MAIL_TYPE", "Began"},
           {"PATH", "/tmp/evil"},
           {"LD_PRELOAD", "/tmp/evil.so"}};
  return n;
}

TEST(MailSenderTest, CommandIsSlurmsArgvAndAFixedEnvironment) {
  const MailCommand c =
      BuildMailCommand({.program = "/usr/bin/mail", .cluster_name = "lab"}, Notice());
  EXPECT_EQ(c.argv, (std::vector<std::string>{
                        "/usr/bin/mail", "-s",
                        "Slurm Job_id=12 Name=train $(id) Began, Queued time 00:00:01",
                        "alice@example.org"}));
  EXPECT_EQ(c.env,
            (std::vector<std::string>{
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C",
                "SLURM_CLUSTER_NAME=lab", "SLURM_JOB_ID=12", "SLURM_JOB_MAIL_TYPE=Began"}))
      << "only SLURM_* of a notice; nothing of the controller's own environment";
}

class MailSenderRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::off);
    char tmpl[] = "/tmp/mail_sender_testXXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    chmod(path.c_str(), 0755);
    return path;
  }
  std::string Read(const std::string& name) {
    std::ifstream in(dir_ + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
};

TEST_F(MailSenderRunTest, RunsTheProgramWithoutAShell) {
  setenv("MUSTER_SECRET_FOR_TEST", "leak", 1);
  const std::string prog =
      Script("mail", "for a in \"$@\"; do printf '[%s]' \"$a\"; done > " + dir_ + "/out\necho >> " +
                         dir_ + "/out\nenv | sort >> " + dir_ +
                         "/out\nread line && echo \"stdin: $line\" >> " + dir_ + "/out\nexit 0\n");
  MailSender sender({.program = prog, .cluster_name = "lab"});
  sender.Send({Notice()});
  ASSERT_TRUE(sender.WaitIdle(milliseconds(20'000)));
  EXPECT_EQ(sender.finished(), 1u);
  const std::string out = Read("out");
  EXPECT_NE(out.find("[-s][Slurm Job_id=12 Name=train $(id) Began, Queued time "
                     "00:00:01][alice@example.org]\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("SLURM_JOB_MAIL_TYPE=Began\n"), std::string::npos) << out;
  EXPECT_NE(out.find("SLURM_CLUSTER_NAME=lab\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("MUSTER_SECRET_FOR_TEST"), std::string::npos) << out;
  EXPECT_EQ(out.find("LD_PRELOAD"), std::string::npos) << out;
  EXPECT_EQ(out.find("/tmp/evil"), std::string::npos) << out;
  EXPECT_EQ(out.find("stdin:"), std::string::npos) << "stdin is /dev/null: " << out;
  unsetenv("MUSTER_SECRET_FOR_TEST");
}

TEST_F(MailSenderRunTest, UnderARootControllerTheProgramRunsAsTheMailUserNeverAsRoot) {
  MailSenderOptions options{.program = "", .cluster_name = "lab"};
  if (geteuid() != 0) {
    ASSERT_TRUE(ResolveMailUser("nobody", &options).ok());
    EXPECT_FALSE(options.run_as_uid) << "not root: it runs as the controller's own user";
    GTEST_SKIP() << "needs root to change users";
  }
  EXPECT_EQ(ResolveMailUser("no-such-user-here", &options).code(), StatusCode::kNotFound);
  EXPECT_EQ(ResolveMailUser("root", &options).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(ResolveMailUser("nobody", &options).ok());
  ASSERT_TRUE(options.run_as_uid);
  chmod(dir_.c_str(), 0777);  // nobody writes its answer here
  options.program = Script("mail", "echo \"$(id -u) $(id -G) $(pwd)\" > " + dir_ + "/who\n");
  MailSender sender(options);
  sender.Send({Notice()});
  ASSERT_TRUE(sender.WaitIdle(milliseconds(20'000)));
  EXPECT_EQ(Read("who"), std::to_string(*options.run_as_uid) + " " +
                             std::to_string(*options.run_as_gid) + " /\n")
      << "its uid, its group alone (no supplementary groups of root's), in /";
}

TEST_F(MailSenderRunTest, AProgramPastItsTimeoutIsKilledWithWhatItStarted) {
  const std::string prog = Script("slow", "sleep 30 &\necho $! > " + dir_ +
                                              "/child\nwait\necho done > " + dir_ + "/finished\n");
  MailSender sender({.program = prog, .timeout = milliseconds(300)});
  const auto began = std::chrono::steady_clock::now();
  sender.Send({Notice()});
  ASSERT_TRUE(sender.WaitIdle(milliseconds(20'000)));
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10));
  EXPECT_EQ(Read("finished"), "");
  const std::string child = Read("child");
  ASSERT_FALSE(child.empty());
  // The whole process group went: the background child is gone too (or a zombie of init's).
  // SIGKILL is delivered at once, but the dying process may take a moment to be reaped or become
  // a zombie on a loaded machine.
  const pid_t pid = std::atoi(child.c_str());
  bool ended = false;
  std::string line;
  for (int tries = 0; tries < 200 && !ended; ++tries) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    line.clear();
    ended = !std::getline(stat, line) || line.find(") Z") != std::string::npos;
    if (!ended) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(ended) << line;
}

TEST_F(MailSenderRunTest, TheQueueIsBoundedAndFailuresAreNotFatal) {
  const std::string prog = Script("fail", "exit 3\n");
  MailSender sender({.program = prog, .max_running = 1, .max_queued = 2});
  sender.Send({Notice(1), Notice(2), Notice(3), Notice(4), Notice(5)});
  ASSERT_TRUE(sender.WaitIdle(milliseconds(20'000)));
  EXPECT_EQ(sender.dropped(), 3u);
  EXPECT_EQ(sender.finished(), 2u);
  // One recipient's mails cannot fill the queue for everyone.
  MailSender fair(
      {.program = prog, .max_running = 1, .max_queued = 10, .max_queued_per_recipient = 2});
  std::vector<controller::MailNotice> flood;
  for (uint64_t id = 1; id <= 6; ++id) flood.push_back(Notice(id));
  controller::MailNotice other = Notice(7);
  other.recipient = "bob@example.org";
  flood.push_back(other);
  fair.Send(std::move(flood));
  ASSERT_TRUE(fair.WaitIdle(milliseconds(20'000)));
  EXPECT_EQ(fair.finished(), 3u) << "two of alice's (at most), and bob's";
  EXPECT_EQ(fair.dropped(), 4u);
  // A program that cannot be run at all is logged, not fatal.
  MailSender missing({.program = dir_ + "/no-such-program"});
  missing.Send({Notice()});
  ASSERT_TRUE(missing.WaitIdle(milliseconds(20'000)));
  EXPECT_EQ(missing.finished(), 1u);
}

}  // namespace
}  // namespace muster::rpc
