// `muster local up` starts daemons that do what the directory's config says: it refuses a
// directory, or a config in it, that another user made or could change.
#include "muster/client/local_cluster.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "muster/common/config.h"

namespace muster::client {
namespace {

namespace fs = std::filesystem;

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("muster-lc-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Status Up() {
    LocalClusterOptions o;
    o.dir = dir_.string();
    o.bin_dir = "/nonexistent";  // nothing may start in these cases
    o.wait_s = 1;
    return LocalUp(o, nullptr).status();
  }
  fs::path dir_;
};

TEST_F(LocalClusterTest, ADirectoryOthersCanWriteIsRefused) {
  fs::permissions(dir_, fs::perms::all);
  Status st = Up();
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_NE(st.message().find("can be written by other users"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(dir_ / "muster.toml")) << "nothing written there";
}

TEST_F(LocalClusterTest, AConfigThatIsALinkOrWritableByOthersIsRefused) {
  for (const char* sub : {"run", "log", "state", "spool"}) fs::create_directories(dir_ / sub);
  std::ofstream(dir_ / "elsewhere.toml") << "[controller]\n";
  fs::create_symlink(dir_ / "elsewhere.toml", dir_ / "muster.toml");
  Status st = Up();
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos) << st.message();

  fs::remove(dir_ / "muster.toml");
  std::ofstream(dir_ / "muster.toml") << "[controller]\n";
  fs::permissions(dir_ / "muster.toml", fs::perms(0666));
  st = Up();
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
}

// `local down --purge` deletes the jobs' state directory on /dev/shm only when it is the
// cluster's own: one another user made there is left alone.
TEST_F(LocalClusterTest, PurgeLeavesAJobStateDirectoryOfSomeoneElseAlone) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a directory of another user";
  ASSERT_FALSE(Up().ok()) << "nothing can start from /nonexistent";
  auto conf = LoadConfig((dir_ / "muster.toml").string());
  ASSERT_TRUE(conf.ok()) << conf.status().ToString();
  const std::string shm = conf->agent.job_state_dir;
  if (shm.empty()) GTEST_SKIP() << "/dev/shm is not a writable tmpfs here";
  fs::remove_all(shm);
  fs::create_directories(shm + "/node1");
  std::ofstream(shm + "/node1/theirs") << "not yours\n";
  ASSERT_EQ(::chown(shm.c_str(), 65534, 65534), 0);
  EXPECT_TRUE(LocalDown(dir_.string(), /*purge=*/true, nullptr).ok());
  EXPECT_TRUE(fs::exists(shm + "/node1/theirs")) << "deleted another user's directory";
  fs::remove_all(shm);

  // Its own is deleted with the cluster. A new cluster in the same directory gets another
  // name: nobody can work it out, and make it, before the cluster does.
  ASSERT_FALSE(Up().ok());
  auto again = LoadConfig((dir_ / "muster.toml").string());
  ASSERT_TRUE(again.ok());
  const std::string mine = again->agent.job_state_dir;
  EXPECT_NE(mine, shm);
  fs::create_directories(mine + "/node1");
  fs::permissions(mine, fs::perms(0755));
  EXPECT_TRUE(LocalDown(dir_.string(), /*purge=*/true, nullptr).ok());
  EXPECT_FALSE(fs::exists(mine));
}

// A cluster that does not come up leaves nothing running: what `local up` started is stopped.
TEST_F(LocalClusterTest, WhatAFailedUpStartedIsStoppedAgain) {
  const fs::path bin = dir_ / "bin";
  fs::create_directories(bin);
  for (const char* name : {"musterctld", "musterd"}) {
    // A controller that never answers: it records its pid, then waits.
    std::ofstream(bin / name) << "#!/bin/sh\necho $$ > " << (dir_ / name).string()
                              << ".spawned\nexec sleep 60\n";
    fs::permissions(bin / name, fs::perms(0755));
  }
  LocalClusterOptions o;
  o.dir = (dir_ / "cluster").string();
  o.bin_dir = bin.string();
  o.wait_s = 1;
  Status up = LocalUp(o, nullptr).status();
  EXPECT_EQ(up.code(), StatusCode::kDeadlineExceeded) << up.ToString();
  std::ifstream spawned((dir_ / "musterctld").string() + ".spawned");
  pid_t pid = 0;
  ASSERT_TRUE(spawned >> pid) << "the stand-in controller did not start";
  EXPECT_NE(::kill(pid, 0), 0) << "musterctld (pid " << pid << ") left running";
  EXPECT_FALSE(fs::exists(o.dir + "/run/musterctld.pid"));
}

}  // namespace
}  // namespace muster::client
