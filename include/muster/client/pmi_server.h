// A PMI server for the tasks of one step, run by srun: ranks find each other through its
// key-value space and fences, so `srun ./mpi_program` works without mpiexec. It speaks the two
// wire protocols MPICH-derived libraries use: PMI-1 ("simple" PMI, newline-ended lines, what
// MPICH's own client speaks) and, with --mpi=pmi2, PMI-2 (messages behind a 6-character length,
// fields split by ';', what MVAPICH and MPICH built --with-pmi=pmi2 speak). Each rank's first
// line (cmd=init pmi_version=N) says which it speaks, as in Slurm's mpi/pmi2, which serves both;
// both kinds share one key-value space and one fence.
//
// It opens no port. Each task speaks PMI on PMI_FD, one end of a socket pair its node's step
// supervisor made for it; the supervisor relays the bytes over srun's authenticated connection
// to that node, naming the task. So a rank is whoever holds its socket: nobody else on any host
// can reach the server, guess their way in, or spend its connections (a port, found in
// /proc/net/tcp, once could be).
//
// A task is untrusted: every message, key, value and rank's share of the key-value space is
// bounded; a rank that breaks the framing is no longer served (its socket closes). A rank gone
// (ended, or no longer served) can never join a fence, so a fence waited in while one is gone
// aborts the step, as MPI_Abort does, rather than leaving the others waiting forever.
//
// Thread-compatible: fed by the caller's poll loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace muster::client {

class PmiServer {
 public:
  // Sends `bytes` (whole messages) to the task of rank `rank`, through its node's connection.
  // Empty: the rank is no longer served (its node closes its PMI socket, so it fails at once).
  using Send = std::function<void(uint32_t rank, const std::string& bytes)>;
  // What the tasks may speak: PMI-1 only (--mpi=pmi1), or PMI-2 as well (--mpi=pmi2).
  enum class Wire { kPmi1, kPmi2 };
  // A PMI message is a command with a key and a value of at most vallen_max: a rank that sends
  // this much without a newline (or announces a longer PMI-2 message) is not speaking PMI, and
  // is no longer served.
  static constexpr size_t kMaxLine = 64 * 1024;
  static constexpr size_t kMaxKey = 256, kMaxValue = 1024;  // what get_maxes answers
  // New keys one rank may put (key-value pairs and node attributes together): MPI libraries
  // put a handful each.
  static constexpr uint32_t kMaxKeysPerRank = 4096;
  // The key-value space of one step (every rank's puts and node attributes together).
  static constexpr size_t kMaxSpaceBytes = 64u << 20;

  // Ranks 0..node_of_rank.size()-1 in a key-value space named `kvs` (PMI-2's job id), rank r on
  // node node_of_rank[r] (nodes numbered in step order): the layout PMI_process_mapping
  // describes, which MPI libraries use to find their node neighbours, and which ranks share PMI-2
  // node attributes.
  PmiServer(std::string kvs, std::vector<uint32_t> node_of_rank, Send send,
            Wire wire = Wire::kPmi1);
  // `size` ranks in blocks: tasks_per_node[k] consecutive ranks on node k (ranks past them, if
  // any, on its last node).
  PmiServer(uint32_t size, std::string kvs, const std::vector<uint32_t>& tasks_per_node, Send send,
            Wire wire = Wire::kPmi1);

  // Bytes task `rank` wrote to its PMI_FD, as its node relayed them: whole messages are served.
  // A rank outside the step is ignored.
  void FromTask(uint32_t rank, const std::string& bytes);
  // Task `rank` has ended (or its node was lost): it will never join a fence again.
  void TaskEnded(uint32_t rank);
  // A task asked to abort (MPI_Abort), or the ranks can no longer all meet in a fence: the step
  // should end.
  bool aborted() const { return aborted_; }
  const std::string& abort_message() const { return abort_message_; }

  // The wire format of PMI_process_mapping: (vector,(first_node,nodes,depth),...), each tuple
  // `depth` consecutive ranks on each of `nodes` nodes from `first_node` on, the tuples in rank
  // order: (vector,(0,2,1),(0,2,1)) is 4 ranks cyclic over 2 nodes, as Slurm writes it.
  static std::string ProcessMapping(const std::vector<uint32_t>& tasks_per_node);  // blocks
  static std::string MappingOfRanks(const std::vector<uint32_t>& node_of_rank);
  // Rank -> node for `size` ranks in blocks of tasks_per_node (the rest on the last node).
  static std::vector<uint32_t> RanksInBlocks(uint32_t size,
                                             const std::vector<uint32_t>& tasks_per_node);

 private:
  enum class Speaks : uint8_t { kUnknown, kPmi1, kPmi2 };
  struct Rank {
    std::string in;  // bytes since its last whole message
    Speaks speaks = Speaks::kUnknown;
    bool in_fence = false;
    bool dropped = false;     // broke the framing: no longer served
    bool gone = false;        // ended or dropped: will never join a fence
    bool waits_attr = false;  // PMI-2 info-getnodeattr with wait=TRUE, not yet answered
    std::string wait_key;     // the node attribute it waits for
    std::string wait_thrid;   // PMI-2 thread ids of its pending wait and fence, echoed back
    std::string fence_thrid;
    uint32_t keys = 0;  // new keys it put
  };
  enum class PutResult { kOk, kKeyTooLong, kValueTooLong, kBadBytes, kTooManyKeys, kFull };

  // One whole message at ranks_[rank].in[from..] is served; returns its length (0: incomplete,
  // or the rank was dropped).
  size_t ServeOne(uint32_t rank, size_t from);
  void ServePmi1(uint32_t rank, const std::string& line);
  void ServePmi2(uint32_t rank, const std::string& body);  // pmi2_server.cc
  void Reply(uint32_t rank, const std::string& line) { send_(rank, line + "\n"); }
  void Reply2(uint32_t rank, const std::string& thrid, std::string body);
  // The shared core: the key-value space (or a node's attributes), fences, gone ranks.
  PutResult Put(uint32_t rank, std::map<std::string, std::string>& space, const std::string& key,
                const std::string& value);
  void EnterFence(uint32_t rank, std::string thrid);
  void Drop(uint32_t rank, const std::string& why);
  void Gone(uint32_t rank, const std::string& why);
  void Abort(const std::string& why);
  // Aborts the step when a fence, or a wait for a node attribute on `node` (the node whose ranks
  // just changed), can no longer end. Constant time: kept by the counts below.
  void CheckStuck(uint32_t node);
  // A rank starts or stops waiting for a node attribute.
  void SetWaiting(uint32_t rank, bool waits);

  uint32_t size_;
  std::string kvs_;
  Send send_;
  Wire wire_;
  std::vector<Rank> ranks_;
  std::vector<uint32_t> node_of_;  // rank -> node index
  std::map<std::string, std::string> kv_;
  std::vector<std::map<std::string, std::string>> node_attrs_;  // per node (PMI-2)
  std::string process_mapping_;
  size_t kv_bytes_ = 0;
  // Per node: ranks neither gone nor waiting for an attribute, and ranks waiting; all waiting.
  std::vector<uint32_t> live_on_node_, waiting_on_node_;
  uint32_t attr_waiters_ = 0;
  uint32_t gone_outside_fence_ = 0;  // gone ranks that are not in the fence under way
  uint32_t in_fence_ = 0;
  std::string first_gone_;  // why the first rank gone went ("" while none)
  bool aborted_ = false;
  std::string abort_message_;
};

}  // namespace muster::client
