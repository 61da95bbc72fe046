#include "muster/common/node_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace muster {
namespace {

namespace fs = std::filesystem;

class NodeKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("muster-nodekeys-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auth_.key_file = dir_ + "/%n.key";
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& node, const std::string& text, mode_t mode) {
    std::ofstream(dir_ + "/" + node + ".key") << text;
    ::chmod((dir_ + "/" + node + ".key").c_str(), mode);
  }

  std::string dir_;
  NodeAuthConfig auth_;
};

TEST_F(NodeKeysTest, ReadsTheNodesOwnKey) {
  const std::string raw(kNodeKeyBytes, '\x5a');
  Write("node1", NodeKeyText(raw), 0600);
  auto key = LoadNodeKey(auth_, "node1");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(*key, raw);
  EXPECT_EQ(LoadNodeKey(auth_, "node2").status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(NodeKeysTest, RefusesAKeyOthersCanReadOrThatIsNotAKey) {
  Write("node1", NodeKeyText(std::string(kNodeKeyBytes, '\x01')), 0644);
  auto readable = LoadNodeKey(auth_, "node1");
  EXPECT_EQ(readable.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(readable.status().message().find("others can read"), std::string::npos)
      << readable.status().message();
  Write("node1", "not hex at all\n", 0600);
  EXPECT_NE(LoadNodeKey(auth_, "node1").status().message().find("hex digits"), std::string::npos);
  Write("node1", std::string(62, 'a') + "\n", 0600);  // one byte short
  EXPECT_FALSE(LoadNodeKey(auth_, "node1").ok());
}

TEST_F(NodeKeysTest, ANodeNameNeverLeavesTheKeyDirectory) {
  EXPECT_EQ(LoadNodeKey(auth_, "../node1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadNodeKey(NodeAuthConfig{}, "node1").status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace muster
