// The daemons' log: one record per line whatever a user put in a job or node name, and a file
// only its owner and group read, never reached through a link.
#include "muster/logging/logging.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

}  // namespace
}  // namespace muster
