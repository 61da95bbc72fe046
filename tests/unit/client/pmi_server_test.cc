#include "muster/client/pmi_server.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

namespace muster::client {
namespace {

TEST(PmiServerTest, ProcessMappingGroupsNodesWithEqualTaskCounts) {
  EXPECT_EQ(PmiServer::ProcessMapping({2, 2, 2, 2}), "(vector,(0,4,2))");
  EXPECT_EQ(PmiServer::ProcessMapping({2, 2, 1}), "(vector,(0,2,2),(2,1,1))");
  EXPECT_EQ(PmiServer::ProcessMapping({1}), "(vector,(0,1,1))");
}

// The ranks' sockets as the step supervisors relay them: what each rank was sent, line by line.
class Ranks {
 public:
  PmiServer::Send Sender() {
    return [this](uint32_t rank, const std::string& bytes) {
      if (bytes.empty()) dropped_.insert(rank);
      std::string& buf = partial_[rank];
      buf += bytes;
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        lines_[rank].push_back(buf.substr(0, nl));
        buf.erase(0, nl + 1);
      }
    };
  }
  const std::set<uint32_t>& Dropped() const { return dropped_; }
  // The next line rank `r` was sent ("" when none).
  std::string Line(uint32_t r) {
    auto& q = lines_[r];
    if (q.empty()) return "";
    std::string l = q.front();
    q.pop_front();
    return l;
  }

 private:
  std::set<uint32_t> dropped_;
  std::map<uint32_t, std::string> partial_;
  std::map<uint32_t, std::deque<std::string>> lines_;
};

// -m cyclic and plane=N: the mapping follows the ranks round the nodes, one tuple per pass, as
// Slurm's (MPICH finds each rank's node neighbours by it).
TEST(PmiServerTest, ProcessMappingOfCyclicAndPlaneLayouts) {
  EXPECT_EQ(PmiServer::MappingOfRanks({0, 1, 0, 1}), "(vector,(0,2,1),(0,2,1))");
  EXPECT_EQ(PmiServer::MappingOfRanks({0, 1, 0, 1, 0}), "(vector,(0,2,1),(0,2,1),(0,1,1))");
  EXPECT_EQ(PmiServer::MappingOfRanks({0, 0, 1, 1, 0, 0}), "(vector,(0,2,2),(0,1,2))");
  EXPECT_EQ(PmiServer::MappingOfRanks({0, 0, 1, 1}), "(vector,(0,2,2))") << "a block";
  EXPECT_EQ(PmiServer::MappingOfRanks({1, 0}), "(vector,(1,1,1),(0,1,1))");
  EXPECT_EQ(PmiServer::RanksInBlocks(5, {2, 2}), (std::vector<uint32_t>{0, 0, 1, 1, 1}));
  // A cyclic server answers its mapping.
  Ranks r;
  PmiServer server("7.0", {0, 1, 0, 1}, r.Sender());
  server.FromTask(2, "cmd=init pmi_version=1 pmi_subversion=1\n");
  r.Line(2);
  server.FromTask(2, "cmd=get kvsname=7.0 key=PMI_process_mapping\n");
  EXPECT_EQ(r.Line(2), "cmd=get_result rc=0 msg=success value=(vector,(0,2,1),(0,2,1))");
}

TEST(PmiServerTest, RanksExchangeBusinessCardsThroughPutBarrierGet) {
  Ranks r;
  PmiServer server(2, "kvs_7_0", {1, 1}, r.Sender());
  server.FromTask(0, "cmd=init pmi_version=1 pmi_subversion=1\n");
  EXPECT_EQ(r.Line(0), "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
  server.FromTask(0, "cmd=get_maxes\n");
  EXPECT_EQ(r.Line(0), "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024");
  server.FromTask(0, "cmd=get_my_kvsname\n");
  EXPECT_EQ(r.Line(0), "cmd=my_kvsname kvsname=kvs_7_0");
  // A line may come in pieces, as a relay reads it.
  server.FromTask(0, "cmd=put kvsname=kvs_7_0 key=card0 ");
  EXPECT_EQ(r.Line(0), "");
  server.FromTask(0, "value=tcp://a:1\n");
  EXPECT_EQ(r.Line(0), "cmd=put_result rc=0 msg=success");
  server.FromTask(1, "cmd=put kvsname=kvs_7_0 key=card1 value=tcp://b:2\n");
  EXPECT_EQ(r.Line(1), "cmd=put_result rc=0 msg=success");
  // Nobody leaves the barrier until both are in.
  server.FromTask(0, "cmd=barrier_in\n");
  EXPECT_EQ(r.Line(0), "");
  server.FromTask(1, "cmd=barrier_in\n");
  EXPECT_EQ(r.Line(0), "cmd=barrier_out");
  EXPECT_EQ(r.Line(1), "cmd=barrier_out");
  // Two lines in one read.
  server.FromTask(1, "cmd=get kvsname=kvs_7_0 key=card0\ncmd=get kvsname=kvs_7_0 key=nothing\n");
  EXPECT_EQ(r.Line(1), "cmd=get_result rc=0 msg=success value=tcp://a:1");
  EXPECT_EQ(r.Line(1).rfind("cmd=get_result rc=-1", 0), 0u);
  server.FromTask(0, "cmd=get kvsname=kvs_7_0 key=PMI_process_mapping\n");
  EXPECT_EQ(r.Line(0), "cmd=get_result rc=0 msg=success value=(vector,(0,2,1))");
  server.FromTask(0, "cmd=spawn nprocs=2\n");
  EXPECT_EQ(r.Line(0), "cmd=spawn_result rc=-1 msg=not_supported_by_muster");
  EXPECT_FALSE(server.aborted());
  server.FromTask(1, "cmd=abort exitcode=3\n");
  EXPECT_TRUE(server.aborted());
  EXPECT_EQ(server.abort_message(), "rank 1 called MPI_Abort (exit code 3)");
  server.FromTask(0, "cmd=finalize\n");
  EXPECT_EQ(r.Line(0), "cmd=finalize_ack");
}

// What one rank may make the server hold: lines and keys of the sizes PMI promises.
TEST(PmiServerTest, ARankIsBoundedToTheSizesPmiPromises) {
  Ranks r;
  PmiServer server(2, "kvs", {2}, r.Sender());
  server.FromTask(0, "cmd=put kvsname=kvs key=k value=" + std::string(1025, 'v') + "\n");
  EXPECT_EQ(r.Line(0), "cmd=put_result rc=-1 msg=key_or_value_too_long");
  server.FromTask(0, "cmd=put kvsname=kvs key=" + std::string(257, 'k') + " value=v\n");
  EXPECT_EQ(r.Line(0), "cmd=put_result rc=-1 msg=key_or_value_too_long");
  server.FromTask(0, "cmd=put kvsname=kvs key=k value=" + std::string(1024, 'v') + "\n");
  EXPECT_EQ(r.Line(0), "cmd=put_result rc=0 msg=success");
  // An answer never echoes more than a key's worth of what it was sent.
  server.FromTask(0, "cmd=get kvsname=kvs key=" + std::string(60000, 'k') + "\n");
  EXPECT_EQ(r.Line(0), "cmd=get_result rc=-1 msg=key_too_long");
  server.FromTask(0, "cmd=" + std::string(60000, 'c') + "\n");
  EXPECT_EQ(r.Line(0), "cmd=" + std::string(64, 'c') + "_result rc=-1 msg=not_supported_by_muster");
  server.FromTask(0, "\n\n\n");
  EXPECT_EQ(r.Line(0), "") << "an empty line is answered";
  // A rank that sends no newline is no longer served, and is told so (its socket closes); the
  // others are served on.
  server.FromTask(1, std::string(PmiServer::kMaxLine + 1, 'x'));
  EXPECT_EQ(r.Dropped(), std::set<uint32_t>{1});
  server.FromTask(1, "\ncmd=init\n");
  EXPECT_EQ(r.Line(1), "") << "a rank past the line limit is still served";
  server.FromTask(0, "cmd=init\n");
  EXPECT_NE(r.Line(0), "");
  // A line longer than the limit, newline and all, drops its rank too.
  Ranks r2;
  PmiServer other(1, "kvs", {1}, r2.Sender());
  other.FromTask(0, "cmd=init " + std::string(PmiServer::kMaxLine, 'y') + "\n");
  EXPECT_EQ(r2.Line(0), "");
  EXPECT_EQ(r2.Dropped(), std::set<uint32_t>{0});
  // The key-value space of a step is bounded, and so is what one rank may put in it.
  Ranks r3;
  PmiServer full(64, "kvs", {64}, r3.Sender());
  const std::string value(PmiServer::kMaxValue, 'v');
  size_t stored = 0;
  for (size_t i = 0;; ++i) {
    const uint32_t rank = static_cast<uint32_t>(i / PmiServer::kMaxKeysPerRank);
    ASSERT_LT(rank, 64u);
    const std::string key = "k" + std::to_string(i);
    full.FromTask(rank, "cmd=put kvsname=kvs key=" + key + " value=" + value + "\n");
    const std::string answer = r3.Line(rank);
    if (stored + key.size() + value.size() > PmiServer::kMaxSpaceBytes) {
      EXPECT_EQ(answer, "cmd=put_result rc=-1 msg=key_value_space_full");
      break;
    }
    ASSERT_EQ(answer, "cmd=put_result rc=0 msg=success") << i;
    stored += key.size() + value.size();
  }
  full.FromTask(63, "cmd=put kvsname=kvs key=k0 value=overwritten\n");
  EXPECT_EQ(r3.Line(63), "cmd=put_result rc=0 msg=success") << "overwriting makes no room";
  Ranks r4;
  PmiServer one(1, "kvs", {1}, r4.Sender());
  for (uint32_t i = 0; i < PmiServer::kMaxKeysPerRank; ++i) {
    one.FromTask(0, "cmd=put kvsname=kvs key=k" + std::to_string(i) + " value=v\n");
    ASSERT_EQ(r4.Line(0), "cmd=put_result rc=0 msg=success");
  }
  one.FromTask(0, "cmd=put kvsname=kvs key=more value=v\n");
  EXPECT_EQ(r4.Line(0), "cmd=put_result rc=-1 msg=too_many_keys_from_this_rank");
  one.FromTask(0, "cmd=put kvsname=kvs key=k1 value=w\n");
  EXPECT_EQ(r4.Line(0), "cmd=put_result rc=0 msg=success");
  // Ranks outside the step are nobody.
  server.FromTask(2, "cmd=abort exitcode=9\n");
  server.FromTask(0xffffffff, "cmd=abort exitcode=9\n");
  EXPECT_FALSE(server.aborted());
}

}  // namespace
}  // namespace muster::client
