#include "muster/client/certificates.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace muster::client {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

mode_t Mode(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_mode & 07777;
}

// What `openssl x509 -text` says of a certificate.
std::string Describe(const std::string& crt) {
  std::string out;
  FILE* p = ::popen(("openssl x509 -noout -text -in " + crt).c_str(), "r");
  char buf[4096];
  for (size_t n; p && (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (p) ::pclose(p);
  return out;
}

class CertificatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("muster-certs-" + std::to_string(::getpid()));
    fs::remove_all(base_);
    o_.dir = base_ + "/tls";
    o_.nodes = {"node1", "node2"};
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string base_;
  CertificateOptions o_;
};

TEST_F(CertificatesTest, MakesACaAndCertificatesThatNameTheirHolders) {
  auto r = MakeCertificates(o_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->written.size(), 8u);
  for (const char* f : {"ca", "controller", "node1", "node2"}) {
    EXPECT_EQ(Mode(o_.dir + "/" + f + ".key"), 0600u) << f;
    EXPECT_EQ(Mode(o_.dir + "/" + f + ".crt"), 0644u) << f;
  }
  std::string node = Describe(o_.dir + "/node1.crt");
  EXPECT_NE(node.find("CN = node1"), std::string::npos) << node;
  EXPECT_NE(node.find("DNS:node1"), std::string::npos) << node;
  EXPECT_NE(node.find("TLS Web Client Authentication"), std::string::npos) << node;
  EXPECT_EQ(node.find("TLS Web Server Authentication"), std::string::npos) << node;
  std::string ctl = Describe(o_.dir + "/controller.crt");
  EXPECT_NE(ctl.find("DNS:musterctld"), std::string::npos) << ctl;
  EXPECT_NE(ctl.find("TLS Web Server Authentication"), std::string::npos) << ctl;
  // A standby controller follows the leader with it: a client's too.
  EXPECT_NE(ctl.find("TLS Web Client Authentication"), std::string::npos) << ctl;
  EXPECT_NE(Describe(o_.dir + "/ca.crt").find("CA:TRUE"), std::string::npos);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(o_.dir)) {
    EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
  }
}

TEST_F(CertificatesTest, RunningAgainKeepsWhatExistsAndRenewReplacesIt) {
  ASSERT_TRUE(MakeCertificates(o_).ok());
  const std::string ca = Read(o_.dir + "/ca.crt"), key = Read(o_.dir + "/node1.key");
  o_.nodes.push_back("node3");
  auto again = MakeCertificates(o_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->written.size(), 2u);  // node3's key and certificate
  EXPECT_EQ(again->kept.size(), 3u);
  EXPECT_EQ(Read(o_.dir + "/node1.key"), key);
  o_.renew = true;
  auto renewed = MakeCertificates(o_);
  ASSERT_TRUE(renewed.ok());
  EXPECT_NE(Read(o_.dir + "/node1.key"), key);
  EXPECT_EQ(Read(o_.dir + "/ca.crt"), ca) << "renewal keeps the CA";
}

TEST_F(CertificatesTest, RefusesADirectoryOthersCanWriteAndNamesThatCollide) {
  fs::create_directories(o_.dir);
  ::chmod(o_.dir.c_str(), 0777);
  auto r = MakeCertificates(o_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("can be written by other users"), std::string::npos)
      << r.status().message();
  ::chmod(o_.dir.c_str(), 0755);
  for (const char* bad : {"ca", "controller", "musterctld", "../x", ""}) {
    o_.nodes = {bad};
    EXPECT_EQ(MakeCertificates(o_).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(CertificatesTest, NodeKeysAreRandomPrivateAndKeptUnlessRenewed) {
  o_.dir = base_ + "/node-keys";
  auto r = MakeNodeKeys(o_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->written.size(), 2u);
  EXPECT_EQ(Mode(o_.dir), 0700u);
  const std::string k1 = Read(o_.dir + "/node1.key"), k2 = Read(o_.dir + "/node2.key");
  EXPECT_EQ(Mode(o_.dir + "/node1.key"), 0600u);
  EXPECT_EQ(k1.size(), 65u);
  EXPECT_EQ(k1.find_first_not_of("0123456789abcdef\n"), std::string::npos) << k1;
  EXPECT_NE(k1, k2);
  auto again = MakeNodeKeys(o_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->kept.size(), 2u);
  EXPECT_EQ(Read(o_.dir + "/node1.key"), k1);
  o_.renew = true;
  ASSERT_TRUE(MakeNodeKeys(o_).ok());
  EXPECT_NE(Read(o_.dir + "/node1.key"), k1);
  // A link left in place of a key is not taken for one.
  o_.renew = false;
  fs::remove(o_.dir + "/node2.key");
  fs::create_symlink("/etc/hostname", o_.dir + "/node2.key");
  EXPECT_FALSE(MakeNodeKeys(o_).ok());
}

TEST_F(CertificatesTest, AMissingOpensslIsAClearError) {
  o_.openssl = "/nonexistent/openssl";
  auto r = MakeCertificates(o_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("install Debian's openssl package"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace muster::client
