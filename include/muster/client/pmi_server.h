// A PMI-1 server for the tasks of one step, run by srun (the "simple" PMI wire protocol that
// MPICH and MPI libraries built on it speak): ranks find each other through its key-value space
// and barriers, so `srun ./mpi_program` works without mpiexec.
//
// It opens no port. Each task speaks PMI on PMI_FD, one end of a socket pair its node's step
// supervisor made for it; the supervisor relays the bytes over srun's authenticated connection
// to that node, naming the task. So a rank is whoever holds its socket: nobody else on any host
// can reach the server, guess their way in, or spend its connections (a port, found in
// /proc/net/tcp, once could be).
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
  // Sends `bytes` (whole lines) to the task of rank `rank`, through its node's connection.
  // Empty: the rank is no longer served (its node closes its PMI socket, so it fails at once).
  using Send = std::function<void(uint32_t rank, const std::string& bytes)>;
  // A PMI line is a command with a key and a value of at most vallen_max: a rank that sends
  // this much without a newline is not speaking PMI, and is no longer served.
  static constexpr size_t kMaxLine = 64 * 1024;
  static constexpr size_t kMaxKey = 256, kMaxValue = 1024;  // what get_maxes answers
  // The key-value space of one step (every rank's puts together).
  static constexpr size_t kMaxSpaceBytes = 64u << 20;

  // `size` ranks in a key-value space named `kvs`; `tasks_per_node` (in node order) describes
  // the layout for PMI_process_mapping, which MPI libraries use to find their node neighbours.
  PmiServer(uint32_t size, std::string kvs, const std::vector<uint32_t>& tasks_per_node, Send send);

  // Bytes task `rank` wrote to its PMI_FD, as its node relayed them: whole lines are served.
  // A rank outside the step is ignored.
  void FromTask(uint32_t rank, const std::string& bytes);
  // A task asked to abort (MPI_Abort): the step should end.
  bool aborted() const { return aborted_; }
  const std::string& abort_message() const { return abort_message_; }

  // The wire format of PMI_process_mapping: (vector,(first_node,nodes,tasks_per_node),...).
  static std::string ProcessMapping(const std::vector<uint32_t>& tasks_per_node);

 private:
  struct Rank {
    std::string in;  // bytes since its last newline
    bool in_barrier = false;
    bool dropped = false;  // sent a line past kMaxLine
  };
  void Command(uint32_t rank, const std::string& line);
  void Reply(uint32_t rank, const std::string& line) { send_(rank, line + "\n"); }
  void Drop(uint32_t rank);

  uint32_t size_;
  std::string kvs_;
  Send send_;
  std::vector<Rank> ranks_;
  std::map<std::string, std::string> kv_;
  size_t kv_bytes_ = 0;
  uint32_t in_barrier_ = 0;
  bool aborted_ = false;
  std::string abort_message_;
};

}  // namespace muster::client
