#include "muster/common/tls_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace muster {
namespace {

namespace fs = std::filesystem;

class TlsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("muster-tlsfiles-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Write("ca.crt", "-----BEGIN CERTIFICATE-----\nca\n", 0644);
    Write("n.crt", "-----BEGIN CERTIFICATE-----\nn\n", 0644);
    Write("n.key", "-----BEGIN PRIVATE KEY-----\nk\n", 0600);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text, mode_t mode) {
    std::ofstream(dir_ + "/" + name) << text;
    ::chmod((dir_ + "/" + name).c_str(), mode);
  }
  Result<TlsIdentity> Load() { return LoadTlsIdentity(P("ca.crt"), P("n.crt"), P("n.key")); }
  std::string P(const std::string& name) { return dir_ + "/" + name; }

  std::string dir_;
};

TEST_F(TlsFilesTest, ReadsTheThreeFiles) {
  auto id = Load();
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->ca_pem, "-----BEGIN CERTIFICATE-----\nca\n");
  EXPECT_EQ(id->key_pem, "-----BEGIN PRIVATE KEY-----\nk\n");
}

TEST_F(TlsFilesTest, APrivateKeyOthersCanReadIsRefused) {
  for (mode_t mode : {0640, 0604, 0644}) {
    ::chmod(P("n.key").c_str(), mode);
    auto id = Load();
    ASSERT_FALSE(id.ok()) << std::oct << mode;
    EXPECT_NE(id.status().message().find("others can read"), std::string::npos)
        << id.status().message();
  }
}

TEST_F(TlsFilesTest, ACertificateOthersCanChangeIsRefused) {
  // Whoever can rewrite the CA file decides which agents are trusted.
  ::chmod(P("ca.crt").c_str(), 0664);
  auto id = Load();
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("changed by other users"), std::string::npos)
      << id.status().message();
}

TEST_F(TlsFilesTest, MissingEmptyAndNonPemFilesAreClearErrors) {
  auto missing = LoadTlsIdentity(P("nope.crt"), P("n.crt"), P("n.key"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(P("nope.crt")), std::string::npos);
  Write("n.crt", "not a certificate", 0644);
  auto garbage = Load();
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("no PEM data"), std::string::npos);
  auto dir = LoadTlsIdentity(dir_, P("n.crt"), P("n.key"));
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace muster
