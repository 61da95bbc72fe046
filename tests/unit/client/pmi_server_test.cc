#include "muster/client/pmi_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include "muster/common/framing.h"

namespace muster::client {
namespace {

TEST(PmiServerTest, ProcessMappingGroupsNodesWithEqualTaskCounts) {
  EXPECT_EQ(PmiServer::ProcessMapping({2, 2, 2, 2}), "(vector,(0,4,2))");
  EXPECT_EQ(PmiServer::ProcessMapping({2, 2, 1}), "(vector,(0,2,2),(2,1,1))");
  EXPECT_EQ(PmiServer::ProcessMapping({1}), "(vector,(0,1,1))");
}

// A rank as MPICH's PMI client drives it: one line out, the server's lines back.
class FakeRank {
 public:
  FakeRank(PmiServer& server, const std::string& where) : server_(server) {
    auto fd = ConnectTcp(where, 1000);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    fd_ = fd.ok() ? *fd : -1;
    Pump();  // accept
  }
  ~FakeRank() {
    if (fd_ >= 0) ::close(fd_);
  }
  void Send(const std::string& line) {
    std::string l = line + "\n";
    ASSERT_EQ(::write(fd_, l.data(), l.size()), static_cast<ssize_t>(l.size()));
    Pump();
  }
  // The next line from the server ("" when none arrives).
  std::string Line() {
    while (buf_.find('\n') == std::string::npos) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) return "";
      char b[1024];
      ssize_t n = ::read(fd_, b, sizeof b);
      if (n <= 0) return "";
      buf_.append(b, static_cast<size_t>(n));
    }
    size_t nl = buf_.find('\n');
    std::string l = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    return l;
  }
  // Lets the server serve everything that is waiting.
  void Pump() {
    for (int round = 0; round < 20; ++round) {
      std::vector<int> fds = server_.Fds();
      std::vector<pollfd> p;
      for (int fd : fds) p.push_back({fd, POLLIN, 0});
      if (::poll(p.data(), p.size(), round == 0 ? 100 : 10) <= 0) return;
      for (const auto& q : p) {
        if (q.revents) server_.Handle(q.fd);
      }
    }
  }

 private:
  PmiServer& server_;
  int fd_ = -1;
  std::string buf_;
};

TEST(PmiServerTest, RanksExchangeBusinessCardsThroughPutBarrierGet) {
  PmiServer server(2, "kvs_7_0", {1, 1});
  auto where = server.Listen("127.0.0.1");
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  FakeRank r0(server, *where), r1(server, *where);
  r0.Send("cmd=initack pmiid=0");
  EXPECT_EQ(r0.Line(), "cmd=initack");
  EXPECT_EQ(r0.Line(), "cmd=set size=2");
  EXPECT_EQ(r0.Line(), "cmd=set rank=0");
  EXPECT_EQ(r0.Line(), "cmd=set debug=0");
  r1.Send("cmd=initack pmiid=1");
  for (int i = 0; i < 4; ++i) r1.Line();
  r0.Send("cmd=init pmi_version=1 pmi_subversion=1");
  EXPECT_EQ(r0.Line(), "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
  r0.Send("cmd=get_my_kvsname");
  EXPECT_EQ(r0.Line(), "cmd=my_kvsname kvsname=kvs_7_0");
  r0.Send("cmd=put kvsname=kvs_7_0 key=card0 value=tcp://a:1");
  EXPECT_EQ(r0.Line(), "cmd=put_result rc=0 msg=success");
  r1.Send("cmd=put kvsname=kvs_7_0 key=card1 value=tcp://b:2");
  r1.Line();
  // Nobody leaves the barrier until both are in.
  r0.Send("cmd=barrier_in");
  EXPECT_EQ(r0.Line(), "");
  r1.Send("cmd=barrier_in");
  EXPECT_EQ(r0.Line(), "cmd=barrier_out");
  EXPECT_EQ(r1.Line(), "cmd=barrier_out");
  r1.Send("cmd=get kvsname=kvs_7_0 key=card0");
  EXPECT_EQ(r1.Line(), "cmd=get_result rc=0 msg=success value=tcp://a:1");
  r0.Send("cmd=get kvsname=kvs_7_0 key=PMI_process_mapping");
  EXPECT_EQ(r0.Line(), "cmd=get_result rc=0 msg=success value=(vector,(0,2,1))");
  r0.Send("cmd=get kvsname=kvs_7_0 key=nothing");
  EXPECT_EQ(r0.Line().rfind("cmd=get_result rc=-1", 0), 0u);
  EXPECT_FALSE(server.aborted());
  r1.Send("cmd=abort exitcode=3");
  EXPECT_TRUE(server.aborted());
  EXPECT_EQ(server.abort_message(), "rank 1 called MPI_Abort (exit code 3)");
  r0.Send("cmd=finalize");
  EXPECT_EQ(r0.Line(), "cmd=finalize_ack");
}

TEST(PmiServerTest, AConnectionSendingNoLinesIsDropped) {
  PmiServer server(1, "kvs", {1});
  auto where = server.Listen("127.0.0.1");
  ASSERT_TRUE(where.ok());
  FakeRank junk(server, *where);
  ASSERT_EQ(server.Fds().size(), 2u);
  junk.Send(std::string(70 * 1024, 'x'));
  junk.Pump();
  EXPECT_EQ(server.Fds().size(), 1u) << "only the listener is left";
}

// The PMI port is reachable by anyone: another user once sent `abort` and ended a step. Only a
// connection that first names itself with a task's secret PMI_ID is served, each rank once; after
// a few strangers the server stops accepting.
TEST(PmiServerTest, OnlyTheStepsTasksAreServed) {
  const uint32_t base = 0x7ffffff0;  // ids wrap past 2^31
  PmiServer server(2, "kvs", {2}, base);
  auto where = server.Listen("127.0.0.1");
  ASSERT_TRUE(where.ok());
  {
    FakeRank stranger(server, *where);
    stranger.Send("cmd=abort exitcode=9");
    EXPECT_FALSE(server.aborted()) << "a stranger ended the step";
    EXPECT_EQ(stranger.Line(), "");
  }
  {
    FakeRank guesser(server, *where);
    guesser.Send("cmd=initack pmiid=0");  // rank 0's id without the secret
    EXPECT_EQ(guesser.Line(), "") << "served without the step's secret";
    guesser.Send("cmd=abort exitcode=9");
    EXPECT_FALSE(server.aborted());
  }
  FakeRank r1(server, *where);
  r1.Send("cmd=initack pmiid=" + std::to_string(PmiServer::IdOf(base, 1)));
  EXPECT_EQ(r1.Line(), "cmd=initack");
  EXPECT_EQ(r1.Line(), "cmd=set size=2");
  EXPECT_EQ(r1.Line(), "cmd=set rank=1");
  {
    FakeRank again(server, *where);  // rank 1's id a second time
    again.Send("cmd=initack pmiid=" + std::to_string(PmiServer::IdOf(base, 1)));
    EXPECT_EQ(again.Line(), "") << "a rank connected twice";
  }
  // Three strangers so far; the rest of the allowance, and the listener is gone.
  for (int i = 3; i < PmiServer::kMaxStrangers; ++i) {
    FakeRank s(server, *where);
    s.Send("cmd=initack pmiid=" + std::to_string(i + 100));
  }
  EXPECT_FALSE(ConnectTcp(*where, 500).ok()) << "a stranger could still connect";
  EXPECT_EQ(server.Fds().size(), 1u) << "only rank 1's connection is left";
  r1.Send("cmd=abort exitcode=3");
  EXPECT_TRUE(server.aborted()) << "a real task still can";
}

}  // namespace
}  // namespace muster::client
