// `muster local up` starts daemons that do what the directory's config says: it refuses a
// directory, or a config in it, that another user made or could change.
#include "muster/client/local_cluster.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace muster::client
