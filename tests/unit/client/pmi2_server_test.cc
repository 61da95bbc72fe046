// PMI-2 as srun --mpi=pmi2 serves it: the wire format, the commands, and what a hostile task
// can and cannot make the server do.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

#include "muster/client/pmi2_wire.h"
#include "muster/client/pmi_server.h"

namespace muster::client {
namespace {

TEST(Pmi2WireTest, LengthsArePaddedEitherWay) {
  EXPECT_EQ(pmi2::ParseLength("    42"), 42u);  // MPICH's "%6u"
  EXPECT_EQ(pmi2::ParseLength("42    "), 42u);  // Slurm's "%-6d"
  EXPECT_EQ(pmi2::ParseLength("000007"), 7u);
  EXPECT_EQ(pmi2::ParseLength("      "), std::nullopt);
  EXPECT_EQ(pmi2::ParseLength("4 2   "), std::nullopt);
  EXPECT_EQ(pmi2::ParseLength("-1    "), std::nullopt);
  EXPECT_EQ(pmi2::ParseLength("12345"), std::nullopt) << "six characters, no fewer";
  EXPECT_EQ(pmi2::Frame("cmd=x;"), "6     cmd=x;");
}

TEST(Pmi2WireTest, CommandsSplitOnSemicolons) {
  auto c = pmi2::ParseCommand("cmd=kvs-put;key=a;value=tcp://h:1=2;");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cmd, "kvs-put");
  ASSERT_EQ(c->fields.size(), 2u);
  EXPECT_EQ(*c->Find("key"), "a");
  EXPECT_EQ(*c->Find("value"), "tcp://h:1=2") << "a value runs to the next ';'";
  EXPECT_EQ(c->Find("thrid"), nullptr);
  // The last ';' may be missing; an empty field is skipped; a bare key has an empty value.
  c = pmi2::ParseCommand("cmd=kvs-fence;;threaded");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cmd, "kvs-fence");
  ASSERT_EQ(c->fields.size(), 1u);
  EXPECT_EQ(*c->Find("threaded"), "");
  for (const char* bad : {"", ";", "key=a;cmd=x;", "cmd=;", "cmd", "cmd=x;=v;"}) {
    EXPECT_FALSE(pmi2::ParseCommand(bad)) << bad;
  }
  std::string many = "cmd=x;";
  for (size_t i = 0; i <= pmi2::kMaxFields; ++i) many += "k=v;";
  EXPECT_FALSE(pmi2::ParseCommand(many)) << "too many fields";
}

// The ranks' sockets as the step supervisors relay them: what each rank was sent, message by
// message, in whichever protocol it speaks (a PMI-2 rank's first answer is still a line).
class Ranks {
 public:
  PmiServer::Send Sender() {
    return [this](uint32_t rank, const std::string& bytes) {
      if (bytes.empty()) dropped_.insert(rank);
      buf_[rank] += bytes;
    };
  }
  const std::set<uint32_t>& Dropped() const { return dropped_; }
  // The next line rank `r` was sent ("" when none).
  std::string Line(uint32_t r) {
    std::string& b = buf_[r];
    const size_t nl = b.find('\n');
    if (nl == std::string::npos) return "";
    std::string l = b.substr(0, nl);
    b.erase(0, nl + 1);
    return l;
  }
  // The next PMI-2 message rank `r` was sent, without its length ("" when none); a length that
  // is not the message's fails the test.
  std::string Message(uint32_t r) {
    std::string& b = buf_[r];
    if (b.size() < 6) return "";
    auto len = pmi2::ParseLength(b.substr(0, 6));
    EXPECT_TRUE(len) << b;
    if (!len || b.size() < 6 + *len) return "";
    std::string m = b.substr(6, *len);
    b.erase(0, 6 + *len);
    return m;
  }
  bool Nothing(uint32_t r) { return buf_[r].empty(); }

 private:
  std::set<uint32_t> dropped_;
  std::map<uint32_t, std::string> buf_;
};

// A rank's PMI-2 start: the PMI-1 init line, then fullinit.
void Init2(PmiServer& server, Ranks& r, uint32_t rank, uint32_t size) {
  server.FromTask(rank, "cmd=init pmi_version=2 pmi_subversion=0\n");
  ASSERT_EQ(r.Line(rank), "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0");
  server.FromTask(rank, pmi2::Frame("cmd=fullinit;pmijobid=7.0;pmirank=" + std::to_string(rank) +
                                    ";threaded=FALSE;"));
  ASSERT_EQ(r.Message(rank), "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=" +
                                 std::to_string(rank) + ";size=" + std::to_string(size) +
                                 ";appnum=0;debugged=FALSE;pmiverbose=FALSE;");
}

TEST(Pmi2ServerTest, RanksOnTwoNodesExchangeCardsThroughPutFenceGet) {
  Ranks r;
  // Four ranks, two on each node.
  PmiServer server(4, "7.0", {2, 2}, r.Sender(), PmiServer::Wire::kPmi2);
  for (uint32_t i = 0; i < 4; ++i) Init2(server, r, i, 4);
  server.FromTask(2, pmi2::Frame("cmd=job-getid;"));
  EXPECT_EQ(r.Message(2), "cmd=job-getid-response;rc=0;jobid=7.0;");
  server.FromTask(3, pmi2::Frame("cmd=info-getjobattr;key=PMI_process_mapping;"));
  EXPECT_EQ(r.Message(3), "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,2,2));");
  server.FromTask(3, pmi2::Frame("cmd=info-getjobattr;key=universeSize;"));
  EXPECT_EQ(r.Message(3), "cmd=info-getjobattr-response;rc=0;found=TRUE;value=4;");
  server.FromTask(3, pmi2::Frame("cmd=info-getjobattr;key=PMI_hwloc_xmlfile;"));
  EXPECT_EQ(r.Message(3), "cmd=info-getjobattr-response;rc=0;found=FALSE;");
  // Each puts its card; a message may come in pieces, or several in one read.
  for (uint32_t i = 0; i < 4; ++i) {
    const std::string put = pmi2::Frame("cmd=kvs-put;key=card" + std::to_string(i) +
                                        ";value=ucx://n" + std::to_string(i) + ";");
    server.FromTask(i, put.substr(0, 3));
    EXPECT_TRUE(r.Nothing(i));
    server.FromTask(i, put.substr(3));
    EXPECT_EQ(r.Message(i), "cmd=kvs-put-response;rc=0;");
  }
  // Nobody leaves the fence until all four are in; a threaded client's thrid comes back.
  for (uint32_t i = 0; i < 3; ++i) {
    server.FromTask(i, pmi2::Frame("cmd=kvs-fence;thrid=0x7f0" + std::to_string(i) + ";"));
    EXPECT_TRUE(r.Nothing(i));
  }
  server.FromTask(3, pmi2::Frame("cmd=kvs-fence;"));
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.Message(i), "cmd=kvs-fence-response;rc=0;thrid=0x7f0" + std::to_string(i) + ";");
  }
  EXPECT_EQ(r.Message(3), "cmd=kvs-fence-response;rc=0;");
  // Rank 3 (node 1) reads rank 0's card (node 0), and one nobody put.
  server.FromTask(3, pmi2::Frame("cmd=kvs-get;jobid=7.0;srcid=0;key=card0;") +
                         pmi2::Frame("cmd=kvs-get;jobid=7.0;srcid=-1;key=nothing;"));
  EXPECT_EQ(r.Message(3), "cmd=kvs-get-response;rc=0;found=TRUE;value=ucx://n0;");
  EXPECT_EQ(r.Message(3), "cmd=kvs-get-response;rc=0;found=FALSE;");
  // Node attributes are the node's: rank 1 waits for one its node-mate (rank 0) puts; rank 2,
  // on the other node, does not see it.
  server.FromTask(1, pmi2::Frame("cmd=info-getnodeattr;key=shm;wait=TRUE;thrid=t1;"));
  EXPECT_TRUE(r.Nothing(1));
  server.FromTask(0, pmi2::Frame("cmd=info-putnodeattr;key=shm;value=/dev/shm/x;"));
  EXPECT_EQ(r.Message(0), "cmd=info-putnodeattr-response;rc=0;");
  EXPECT_EQ(r.Message(1),
            "cmd=info-getnodeattr-response;rc=0;found=TRUE;value=/dev/shm/x;thrid=t1;");
  server.FromTask(2, pmi2::Frame("cmd=info-getnodeattr;key=shm;wait=FALSE;"));
  EXPECT_EQ(r.Message(2), "cmd=info-getnodeattr-response;rc=0;found=FALSE;");
  // What muster does not offer is refused in words.
  server.FromTask(2,
                  pmi2::Frame("cmd=spawn;ncmds=1;preputcount=0;subcmd=a.out;maxprocs=2;argc=0;"));
  EXPECT_EQ(r.Message(2), "cmd=spawn-response;rc=-1;errmsg=spawn is not supported by muster;");
  server.FromTask(2, pmi2::Frame("cmd=name-publish;name=svc;port=p;"));
  EXPECT_EQ(r.Message(2),
            "cmd=name-publish-response;rc=-1;errmsg=name-publish is not supported by muster;");
  server.FromTask(2, pmi2::Frame("cmd=frobnicate;"));
  EXPECT_EQ(r.Message(2), "cmd=frobnicate-response;rc=-1;errmsg=unknown PMI-2 command frobnicate;");
  for (uint32_t i = 0; i < 4; ++i) {
    server.FromTask(i, pmi2::Frame("cmd=finalize;"));
    EXPECT_EQ(r.Message(i), "cmd=finalize-response;rc=0;");
  }
  EXPECT_TRUE(r.Dropped().empty());
  EXPECT_FALSE(server.aborted());
}

// -m cyclic: ranks 0 and 2 share node 0, ranks 1 and 3 node 1; node attributes follow the
// ranks' nodes, not blocks of consecutive ranks.
TEST(Pmi2ServerTest, NodeAttributesFollowACyclicLayout) {
  Ranks r;
  PmiServer server("7.0", {0, 1, 0, 1}, r.Sender(), PmiServer::Wire::kPmi2);
  for (uint32_t i = 0; i < 4; ++i) Init2(server, r, i, 4);
  server.FromTask(1, pmi2::Frame("cmd=info-getjobattr;key=PMI_process_mapping;"));
  EXPECT_EQ(r.Message(1),
            "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,2,1),(0,2,1));");
  server.FromTask(2, pmi2::Frame("cmd=info-getnodeattr;key=leader;wait=TRUE;"));
  EXPECT_TRUE(r.Nothing(2));
  server.FromTask(0, pmi2::Frame("cmd=info-putnodeattr;key=leader;value=0;"));
  EXPECT_EQ(r.Message(0), "cmd=info-putnodeattr-response;rc=0;");
  EXPECT_EQ(r.Message(2), "cmd=info-getnodeattr-response;rc=0;found=TRUE;value=0;");
  server.FromTask(1, pmi2::Frame("cmd=info-getnodeattr;key=leader;wait=FALSE;"));
  EXPECT_EQ(r.Message(1), "cmd=info-getnodeattr-response;rc=0;found=FALSE;")
      << "rank 1 is on the other node";
}

TEST(Pmi2ServerTest, PmiOneAndTwoRanksShareOneSpaceAndFence) {
  // As Slurm's mpi/pmi2: a library that speaks PMI-1 (Debian's MPICH) is served too.
  Ranks r;
  PmiServer server(2, "9.1", {1, 1}, r.Sender(), PmiServer::Wire::kPmi2);
  Init2(server, r, 0, 2);
  server.FromTask(1, "cmd=init pmi_version=1 pmi_subversion=1\n");
  EXPECT_EQ(r.Line(1), "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
  server.FromTask(1, "cmd=get_my_kvsname\n");
  EXPECT_EQ(r.Line(1), "cmd=my_kvsname kvsname=9.1");
  server.FromTask(0, pmi2::Frame("cmd=kvs-put;key=a;value=from-two;"));
  EXPECT_EQ(r.Message(0), "cmd=kvs-put-response;rc=0;");
  server.FromTask(1, "cmd=put kvsname=9.1 key=b value=from;one\n");
  EXPECT_EQ(r.Line(1), "cmd=put_result rc=0 msg=success");
  server.FromTask(1, "cmd=barrier_in\n");
  EXPECT_EQ(r.Line(1), "");
  server.FromTask(0, pmi2::Frame("cmd=kvs-fence;"));
  EXPECT_EQ(r.Message(0), "cmd=kvs-fence-response;rc=0;");
  EXPECT_EQ(r.Line(1), "cmd=barrier_out");
  server.FromTask(1, "cmd=get kvsname=9.1 key=a\n");
  EXPECT_EQ(r.Line(1), "cmd=get_result rc=0 msg=success value=from-two");
  // A PMI-1 value with a ';' cannot travel in PMI-2: refused, not cut short.
  server.FromTask(0, pmi2::Frame("cmd=kvs-get;key=b;"));
  EXPECT_EQ(r.Message(0),
            "cmd=kvs-get-response;rc=-1;errmsg=the value holds a ';', which PMI-2 cannot carry;");
}

TEST(Pmi2ServerTest, PmiOneStepsRefusePmiTwo) {
  Ranks r;
  PmiServer server(2, "kvs", {2}, r.Sender());  // --mpi=pmi1
  server.FromTask(0, "cmd=init pmi_version=2 pmi_subversion=0\n");
  EXPECT_EQ(r.Line(0), "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1");
  EXPECT_EQ(r.Dropped(), std::set<uint32_t>{0}) << "it fails at once, not waiting on an answer";
}

TEST(Pmi2ServerTest, ARankCannotClaimAnotherRank) {
  Ranks r;
  PmiServer server(2, "1.0", {2}, r.Sender(), PmiServer::Wire::kPmi2);
  server.FromTask(1, "cmd=init pmi_version=2 pmi_subversion=0\n");
  r.Line(1);
  server.FromTask(1, pmi2::Frame("cmd=fullinit;pmijobid=1.0;pmirank=0;threaded=FALSE;"));
  EXPECT_EQ(r.Message(1),
            "cmd=fullinit-response;rc=3;errmsg=pmirank 0 is not this task's rank 1 (PMI_RANK);");
}

TEST(Pmi2ServerTest, ARankIsBoundedToTheSizesPmiPromises) {
  Ranks r;
  PmiServer server(3, "1.0", {3}, r.Sender(), PmiServer::Wire::kPmi2);
  for (uint32_t i = 0; i < 3; ++i) Init2(server, r, i, 3);
  const std::string big_key(PmiServer::kMaxKey + 1, 'k');
  server.FromTask(0, pmi2::Frame("cmd=kvs-put;key=" + big_key + ";value=v;"));
  EXPECT_EQ(r.Message(0), "cmd=kvs-put-response;rc=5;errmsg=key longer than 256 bytes;");
  server.FromTask(
      0,
      pmi2::Frame("cmd=kvs-put;key=k;value=" + std::string(PmiServer::kMaxValue + 1, 'v') + ";"));
  EXPECT_EQ(r.Message(0), "cmd=kvs-put-response;rc=7;errmsg=value longer than 1024 bytes;");
  server.FromTask(0, pmi2::Frame("cmd=kvs-put;key=k;value=a\nb;"));
  EXPECT_EQ(r.Message(0),
            "cmd=kvs-put-response;rc=6;errmsg=empty key, or a newline in the key or value;");
  server.FromTask(0, pmi2::Frame("cmd=kvs-get;key=" + big_key + ";"));
  EXPECT_EQ(r.Message(0), "cmd=kvs-get-response;rc=5;errmsg=key longer than 256 bytes;")
      << "an answer never echoes more than a key's worth";
  // An unknown command's name comes back cut short and printable.
  server.FromTask(0, pmi2::Frame("cmd=" + std::string(1000, 'c') + "\x01;"));
  EXPECT_EQ(r.Message(0), "cmd=" + std::string(64, 'c') +
                              "-response;rc=-1;errmsg=unknown PMI-2 command " +
                              std::string(64, 'c') + ";");
  // A rank may put so many keys, and no more (overwriting one it has is fine).
  for (uint32_t i = 0; i < PmiServer::kMaxKeysPerRank; ++i) {
    server.FromTask(1, pmi2::Frame("cmd=kvs-put;key=k" + std::to_string(i) + ";value=v;"));
    ASSERT_EQ(r.Message(1), "cmd=kvs-put-response;rc=0;") << i;
  }
  server.FromTask(1, pmi2::Frame("cmd=kvs-put;key=one-more;value=v;"));
  EXPECT_EQ(r.Message(1), "cmd=kvs-put-response;rc=2;errmsg=rank put more than 4096 keys;");
  server.FromTask(1, pmi2::Frame("cmd=info-putnodeattr;key=one-more;value=v;"));
  EXPECT_EQ(r.Message(1),
            "cmd=info-putnodeattr-response;rc=2;errmsg=rank put more than 4096 keys;");
  server.FromTask(1, pmi2::Frame("cmd=kvs-put;key=k7;value=again;"));
  EXPECT_EQ(r.Message(1), "cmd=kvs-put-response;rc=0;");
  // The others are served on.
  server.FromTask(2, pmi2::Frame("cmd=kvs-get;key=k7;"));
  EXPECT_EQ(r.Message(2), "cmd=kvs-get-response;rc=0;found=TRUE;value=again;");
  EXPECT_TRUE(r.Dropped().empty());
  EXPECT_FALSE(server.aborted());
}

TEST(Pmi2ServerTest, BrokenFramingDropsTheRankAndEndsTheStepRatherThanAHang) {
  const std::vector<std::string> broken = {
      "abcdefcmd=finalize;",               // no length
      "999999",                            // longer than a message may be
      pmi2::Frame("key=a;cmd=finalize;"),  // no cmd first
      std::to_string(PmiServer::kMaxLine + 7) + std::string(PmiServer::kMaxLine + 20, 'x'),
  };
  for (const std::string& bytes : broken) {
    Ranks r;
    PmiServer server(2, "1.0", {1, 1}, r.Sender(), PmiServer::Wire::kPmi2);
    Init2(server, r, 0, 2);
    Init2(server, r, 1, 2);
    server.FromTask(0, pmi2::Frame("cmd=kvs-fence;"));
    EXPECT_FALSE(server.aborted());
    server.FromTask(1, bytes);
    EXPECT_EQ(r.Dropped(), std::set<uint32_t>{1}) << bytes.substr(0, 40);
    EXPECT_TRUE(r.Nothing(1));
    // Rank 0 waits in a fence rank 1 can never join: the step ends, as MPI_Abort ends it.
    EXPECT_TRUE(server.aborted()) << bytes.substr(0, 40);
    EXPECT_NE(server.abort_message().find("rank 1 "), std::string::npos) << server.abort_message();
    server.FromTask(1, pmi2::Frame("cmd=kvs-fence;"));
    EXPECT_TRUE(r.Nothing(1)) << "a dropped rank is not served again";
  }
  // Bytes without a whole message (no init line), past the limit: dropped too, before any fence.
  Ranks r;
  PmiServer server(2, "1.0", {2}, r.Sender(), PmiServer::Wire::kPmi2);
  server.FromTask(0, "cmd=init");
  server.FromTask(0, std::string(PmiServer::kMaxLine, 'x'));
  EXPECT_EQ(r.Dropped(), std::set<uint32_t>{0});
  EXPECT_FALSE(server.aborted()) << "nobody waits yet";
  // Rank 1 fences later: rank 0 never will.
  Init2(server, r, 1, 2);
  server.FromTask(1, pmi2::Frame("cmd=kvs-fence;"));
  EXPECT_TRUE(server.aborted());
}

TEST(Pmi2ServerTest, ARankThatEndsOrAbortsEndsTheStep) {
  {
    Ranks r;
    PmiServer server(3, "1.0", {3}, r.Sender(), PmiServer::Wire::kPmi2);
    for (uint32_t i = 0; i < 3; ++i) Init2(server, r, i, 3);
    server.FromTask(0, pmi2::Frame("cmd=kvs-fence;"));
    server.FromTask(1, pmi2::Frame("cmd=kvs-fence;"));
    EXPECT_FALSE(server.aborted());
    server.TaskEnded(2);
    EXPECT_TRUE(server.aborted());
    EXPECT_EQ(server.abort_message(), "rank 2 ended outside the PMI fence the others wait in");
  }
  {
    // A rank that ended inside the fence (it joined) does not hold the others up.
    Ranks r;
    PmiServer server(2, "1.0", {2}, r.Sender(), PmiServer::Wire::kPmi2);
    Init2(server, r, 0, 2);
    Init2(server, r, 1, 2);
    server.FromTask(1, pmi2::Frame("cmd=kvs-fence;"));
    server.TaskEnded(1);
    EXPECT_FALSE(server.aborted());
    server.FromTask(0, pmi2::Frame("cmd=kvs-fence;"));
    EXPECT_EQ(r.Message(0), "cmd=kvs-fence-response;rc=0;");
    EXPECT_FALSE(server.aborted());
    // Without a fence, a rank ending is the step's business, not PMI's.
    server.FromTask(0, pmi2::Frame("cmd=finalize;"));
    server.TaskEnded(0);
    EXPECT_FALSE(server.aborted());
  }
  {
    // Waiting for a node attribute no rank left on the node can put.
    Ranks r;
    PmiServer server(3, "1.0", {2, 1}, r.Sender(), PmiServer::Wire::kPmi2);
    for (uint32_t i = 0; i < 3; ++i) Init2(server, r, i, 3);
    server.FromTask(1, pmi2::Frame("cmd=info-getnodeattr;key=shm;wait=TRUE;"));
    server.FromTask(2, pmi2::Frame("cmd=info-getnodeattr;key=shm;wait=TRUE;"));
    EXPECT_TRUE(server.aborted()) << "rank 2 is alone on its node";
  }
  {
    Ranks r;
    PmiServer server(2, "1.0", {2}, r.Sender(), PmiServer::Wire::kPmi2);
    Init2(server, r, 0, 2);
    server.FromTask(1, "cmd=init pmi_version=2 pmi_subversion=0\n");
    server.FromTask(0, pmi2::Frame("cmd=abort;isworld=TRUE;msg=bad\ninput;"));
    EXPECT_TRUE(server.aborted());
    EXPECT_EQ(server.abort_message(), "rank 0 called MPI_Abort: bad_input");
  }
}

}  // namespace
}  // namespace muster::client
