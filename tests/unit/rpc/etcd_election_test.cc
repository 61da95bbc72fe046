// Leader election against a real etcd (Debian's etcd-server), started by each test on loopback
// and stopped by its pid. Skipped where /usr/bin/etcd is missing.
#include "muster/rpc/etcd_election.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

namespace muster::rpc {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kEtcd = "/usr/bin/etcd";

// Two distinct free loopback ports (both held open while chosen, so they differ).
std::pair<uint16_t, uint16_t> FreePorts() {
  uint16_t ports[2];
  int fds[2];
  for (int i = 0; i < 2; ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fds[i], reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&a), &len);
    ports[i] = ntohs(a.sin_port);
  }
  ::close(fds[0]);
  ::close(fds[1]);
  return {ports[0], ports[1]};
}

class EtcdElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(kEtcd, X_OK) != 0) GTEST_SKIP() << kEtcd << " is not installed (etcd-server)";
    dir_ = std::filesystem::temp_directory_path() /
           ("muster-etcd-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const auto [client_port, peer_port] = FreePorts();
    const std::string client = "127.0.0.1:" + std::to_string(client_port);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port);
    endpoint_ = client;
    std::vector<std::string> args = {kEtcd,
                                     "--name=t",
                                     "--data-dir=" + (dir_ / "data").string(),
                                     "--listen-client-urls=http://" + client,
                                     "--advertise-client-urls=http://" + client,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=t=" + peer,
                                     "--logger=zap",
                                     "--log-outputs=" + (dir_ / "etcd.log").string()};
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(kEtcd, argv.data());
      ::_exit(127);
    }
    auto probe = Candidate("probe");
    Status last;
    for (int i = 0; i < 100; ++i) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "etcd exited at start; see " << (dir_ / "etcd.log");
      }
      auto leader = probe->Leader();
      if (leader.status().code() == StatusCode::kNotFound) return;
      last = leader.status();
      std::this_thread::sleep_for(100ms);
    }
    FAIL() << "etcd did not start (" << last.ToString() << "); see " << (dir_ / "etcd.log");
  }

  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      int status;
      ::waitpid(pid_, &status, 0);
    }
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<EtcdElection> Candidate(const std::string& name) {
    EtcdElectionOptions o;
    o.endpoints = {endpoint_};
    o.candidate = name;
    o.ttl_s = 2;
    o.poll = 100ms;
    auto e = EtcdElection::Create(o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(*e) : nullptr;
  }

  std::filesystem::path dir_;
  std::string endpoint_;
  pid_t pid_ = -1;
};

TEST_F(EtcdElectionTest, TheFirstCandidateLeadsAndTheOtherStandsBy) {
  auto a = Candidate("ctl-a:6817");
  auto b = Candidate("ctl-b:6817");
  auto won = a->Campaign(nullptr);
  ASSERT_TRUE(won.ok()) << won.status().ToString();
  EXPECT_GT(won->epoch, 0);
  EXPECT_TRUE(a->leading());
  auto seen = b->Leader();
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->leader, "ctl-a:6817");
  EXPECT_EQ(seen->epoch, won->epoch);

  auto standby = std::async(std::launch::async, [&] { return b->Campaign(nullptr); });
  EXPECT_EQ(standby.wait_for(3s), std::future_status::timeout)
      << "the standby took over from a leader that keeps its lease";
  EXPECT_TRUE(a->leading()) << "the leader renewed its lease past its TTL";
  b->Stop();
  auto stopped = standby.get();
  EXPECT_EQ(stopped.status().code(), StatusCode::kCancelled);
}

// A leader that dies or freezes (Stop: no more renewals, nothing revoked) is replaced once its
// lease runs out, and the new leader's epoch is larger: the old one is fenced.
TEST_F(EtcdElectionTest, ALeaderThatStopsAnsweringIsReplacedWithinItsTtlUnderALargerEpoch) {
  auto a = Candidate("ctl-a:6817");
  auto b = Candidate("ctl-b:6817");
  auto first = a->Campaign(nullptr);
  ASSERT_TRUE(first.ok());
  auto standby = std::async(std::launch::async, [&] { return b->Campaign(nullptr); });
  std::this_thread::sleep_for(500ms);
  const Clock::time_point gone = Clock::now();
  a->Stop();
  ASSERT_EQ(standby.wait_for(5s), std::future_status::ready) << "no takeover within 5 s";
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - gone);
  auto second = standby.get();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->leader, "ctl-b:6817");
  EXPECT_GT(second->epoch, first->epoch);
  EXPECT_LT(took, 4000ms) << "the TTL (2 s), a poll and a loaded machine's delays, no more";
  std::printf("takeover after the leader stopped: %lld ms\n", static_cast<long long>(took.count()));
}

TEST_F(EtcdElectionTest, AResigningLeaderIsReplacedAtOnce) {
  auto a = Candidate("ctl-a:6817");
  auto b = Candidate("ctl-b:6817");
  ASSERT_TRUE(a->Campaign(nullptr).ok());
  auto standby = std::async(std::launch::async, [&] { return b->Campaign(nullptr); });
  std::this_thread::sleep_for(300ms);
  a->Resign();
  EXPECT_FALSE(a->leading());
  ASSERT_EQ(standby.wait_for(1500ms), std::future_status::ready)
      << "resigning should not wait a TTL";
  auto second = standby.get();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->leader, "ctl-b:6817");
}

// Cut off from etcd (here: etcd frozen with SIGSTOP), a leader must assume it lost the lead once
// a TTL has passed without a confirmed renewal: by then etcd may have handed it to another.
TEST_F(EtcdElectionTest, ALeaderCutOffFromEtcdGivesUpTheLeadWithinItsTtl) {
  auto a = Candidate("ctl-a:6817");
  std::promise<Clock::time_point> lost;
  ASSERT_TRUE(a->Campaign([&] { lost.set_value(Clock::now()); }).ok());
  std::this_thread::sleep_for(500ms);
  const Clock::time_point cut = Clock::now();
  ASSERT_EQ(::kill(pid_, SIGSTOP), 0);
  auto when = lost.get_future();
  ASSERT_EQ(when.wait_for(4s), std::future_status::ready) << "still believes it leads";
  EXPECT_FALSE(a->leading());
  // It gives up at 0.9 TTL after its last confirmed renewal, which came before the cut: so
  // within the TTL, plus what a loaded machine may delay its timer by.
  EXPECT_LE(when.get() - cut, 2500ms) << "a TTL after the last confirmed renewal, at the latest";
  ::kill(pid_, SIGCONT);
}

TEST(EtcdElectionOptionsTest, MistakesAreRefused) {
  EtcdElectionOptions o;
  o.candidate = "x";
  EXPECT_EQ(EtcdElection::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.endpoints = {"10.0.0.5:2379"};
  auto remote = EtcdElection::Create(o);
  EXPECT_EQ(remote.status().code(), StatusCode::kUnimplemented) << "no TLS to etcd yet";
  o.endpoints = {"127.0.0.1:2379"};
  o.ttl_s = 0;
  EXPECT_EQ(EtcdElection::Create(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace muster::rpc
