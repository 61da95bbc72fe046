// The daemons' log: one record per line whatever a user put in a job or node name, and a file
// only its owner and group read, never reached through a link; the JSON format and the journal
// with the message's key=value fields lifted into their own.
#include "muster/logging/logging.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace muster {
namespace {

namespace fs = std::filesystem;

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("muster-logging-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms(0755));
  }
  void TearDown() override {
    spdlog::drop("logtest");
    fs::remove_all(dir_);
  }
  std::string dir_;
};

TEST_F(LoggingTest, AUsersTextStaysOnItsLineAndTheFileIsNotWorldReadable) {
  const std::string log = dir_ + "/d.log";
  ASSERT_TRUE(InitLogging("logtest", "info", log).ok());
  spdlog::info("job name '{}'", "x\n2026-11-27T00:00:00.000 error musterctld: forged\x1b[2J");
  spdlog::default_logger()->flush();
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 1) << all;
  EXPECT_NE(all.find("x\\n2026-11-27T00:00:00.000 error musterctld: forged\\x1b[2J"),
            std::string::npos)
      << all;
  struct stat st {};
  ASSERT_EQ(::stat(log.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST_F(LoggingTest, ALinkOrAFileOthersCanChangeIsRefused) {
  fs::create_symlink("/etc/passwd", dir_ + "/link.log");
  EXPECT_EQ(InitLogging("logtest", "info", dir_ + "/link.log").code(),
            StatusCode::kFailedPrecondition);
  std::ofstream(dir_ + "/open.log") << "";
  fs::permissions(dir_ + "/open.log", fs::perms(0666));
  Status open = InitLogging("logtest", "info", dir_ + "/open.log");
  EXPECT_EQ(open.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(open.message().find("changed by other users"), std::string::npos) << open.message();
  // One others may read (made by an older version) is tightened.
  std::ofstream(dir_ + "/old.log") << "";
  fs::permissions(dir_ + "/old.log", fs::perms(0644));
  ASSERT_TRUE(InitLogging("logtest", "info", dir_ + "/old.log").ok());
  EXPECT_EQ(fs::status(dir_ + "/old.log").permissions() & fs::perms::all, fs::perms(0640));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(LogFieldsTest, TheKnownFieldsOfTheirShapeInOrder) {
  const auto f = LogFields(
      "register job=42_7 node=gpu1 user=alice step=3 x=1, Node=2 uid=1000 account=phys "
      "partition=gpu epoch=9 job=42_7 gpus=8");
  std::vector<std::pair<std::string, std::string>> want = {
      {"job", "42_7"}, {"node", "gpu1"},    {"user", "alice"},    {"step", "3"},
      {"uid", "1000"}, {"account", "phys"}, {"partition", "gpu"}, {"epoch", "9"}};
  EXPECT_EQ(f, want) << "x= and gpus= are no fields of ours; the same job twice is one";
  EXPECT_TRUE(LogFields("no fields here; job= node=a/b uid=12x job=1;2").empty());
  EXPECT_EQ(LogFields("scheduling pass: start of job=5 no longer fits"),
            (std::vector<std::pair<std::string, std::string>>{{"job", "5"}}))
      << "a colon before any field is prose";
}

TEST(LogFieldsTest, AUsersTextCannotPassForTheRecordsFields) {
  using Fields = std::vector<std::pair<std::string, std::string>>;
  // Quoted text is what a user or an unproven peer chose, even when it closes the quote itself.
  EXPECT_EQ(LogFields("refused a registration as an unknown node 'x' node=gpu7 user=root ''"),
            Fields{});
  EXPECT_EQ(LogFields("node=gpu2 job name 'x job=999'"), (Fields{{"node", "gpu2"}}));
  // After a colon that follows the fields comes free text (a reason, an error).
  EXPECT_EQ(LogFields("job=7 node=gpu1 launch failed: cannot open node=gpu9 user=root"),
            (Fields{{"job", "7"}, {"node", "gpu1"}}));
  EXPECT_EQ(LogFields("node=gpu1: drained user=root"), (Fields{{"node", "gpu1"}}));
  // A key repeated with another value: neither is believed.
  EXPECT_EQ(LogFields("user=alice step ended user=root"), Fields{});
  EXPECT_EQ(LogFields("node=gpu1 agent's link can't register job=5"),
            (Fields{{"node", "gpu1"}, {"job", "5"}}));
}

TEST_F(LoggingTest, JsonIsOneObjectALineWithTheMessagesFields) {
  const std::string log = dir_ + "/j.log";
  LogOptions o;
  o.program = "logtest";
  o.file = log;
  o.format = "json";
  ASSERT_TRUE(InitLogging(o).ok());
  spdlog::warn("job={} node={} launch failed: {}", 42, "gpu1", "bad \"quote\"\nand\x01 \xff");
  spdlog::default_logger()->flush();
  const std::string all = ReadFile(log);
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 1) << all;
  EXPECT_EQ(all.rfind("{\"time\":\"", 0), 0u) << all;
  EXPECT_NE(all.find("\",\"level\":\"warn\",\"program\":\"logtest\",\"msg\":\"job=42 node=gpu1 "
                     "launch failed: bad \\\"quote\\\"\\\\nand\\\\x01 \\\\xff\",\"job\":\"42\","
                     "\"node\":\"gpu1\"}\n"),
            std::string::npos)
      << all;
  if (std::system("command -v python3 >/dev/null 2>&1") == 0) {
    EXPECT_EQ(
        std::system(
            ("python3 -c 'import json,sys; json.loads(open(sys.argv[1]).read())' " + log).c_str()),
        0)
        << "valid JSON: " << all;
  }
  o.format = "yaml";
  EXPECT_EQ(InitLogging(o).code(), StatusCode::kInvalidArgument);
}

TEST_F(LoggingTest, UnderSystemdRecordsGoToTheJournalWithTheirFields) {
  // A stand-in journal: a datagram socket, and JOURNAL_STREAM naming this process's stderr as
  // systemd sets it for a unit whose stderr is the journal.
  const std::string path = dir_ + "/journal.sock";
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  struct stat err {};
  ASSERT_EQ(::fstat(STDERR_FILENO, &err), 0);
  const std::string stream = std::to_string(static_cast<unsigned long long>(err.st_dev)) + ":" +
                             std::to_string(static_cast<unsigned long long>(err.st_ino));
  ::setenv("JOURNAL_STREAM", stream.c_str(), 1);
  LogOptions o;
  o.program = "logtest";
  o.journal_socket = path;
  const Status st = InitLogging(o);
  ::unsetenv("JOURNAL_STREAM");
  ASSERT_TRUE(st.ok()) << st.ToString();
  spdlog::error("node={} drained: {}", "gpu7", "two\nlines");
  char buf[65536];
  const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  ::close(fd);
  ASSERT_GT(n, 0) << "nothing reached the journal";
  const std::string d(buf, static_cast<size_t>(n));
  EXPECT_NE(d.find("PRIORITY=3\n"), std::string::npos) << d;
  EXPECT_NE(d.find("SYSLOG_IDENTIFIER=logtest\n"), std::string::npos);
  EXPECT_NE(d.find("MUSTER_NODE=gpu7\n"), std::string::npos);
  // The message printable, as in the other formats: one line, no control bytes.
  EXPECT_NE(d.find("MESSAGE=node=gpu7 drained: two\\nlines\n"), std::string::npos) << d;
}

}  // namespace
}  // namespace muster
