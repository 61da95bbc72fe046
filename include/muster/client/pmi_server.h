// A PMI-1 server for the tasks of one step, run by srun (the "simple" PMI wire protocol that
// MPICH and MPI libraries built on it speak): ranks find each other through its key-value space
// and barriers, so `srun ./mpi_program` works without mpiexec. Tasks reach it through PMI_PORT
// (host:port) and say who they are with PMI_ID; the agent sets PMI_RANK, PMI_ID and PMI_SIZE.
//
// The port is reachable by anyone on the network, so a connection is served only once it has
// proved it is one of the step's tasks: its first line must be `initack` with a PMI_ID that only
// the tasks were given (id_base + rank, with id_base a per-step secret; PMI_ID is an int on the
// wire, so 31 bits), and each rank may connect once. Anything else is dropped, and after
// kMaxStrangers such connections the server stops accepting new ones.
//
// Thread-compatible: driven from the caller's poll loop (Fds(), then Handle() for ready fds).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::client {

class PmiServer {
 public:
  // `size` ranks in a key-value space named `kvs`; `tasks_per_node` (in node order) describes
  // the layout for PMI_process_mapping, which MPI libraries use to find their node neighbours.
  static constexpr int kMaxStrangers = 16;
  // A fresh secret for PmiServer's id_base (31 bits, from the kernel's random source).
  static uint32_t RandomIdBase();
  // The PMI_ID of `rank` in a step whose base is `id_base`.
  static uint32_t IdOf(uint32_t id_base, uint32_t rank) { return (id_base + rank) & 0x7fffffff; }

  PmiServer(uint32_t size, std::string kvs, const std::vector<uint32_t>& tasks_per_node,
            uint32_t id_base = 0);
  ~PmiServer();
  PmiServer(const PmiServer&) = delete;
  PmiServer& operator=(const PmiServer&) = delete;

  // Listens on `host` (an address the tasks can reach), any port. Returns "host:port".
  Result<std::string> Listen(const std::string& host);

  // Every fd to poll for input: the listener and the tasks' connections.
  std::vector<int> Fds() const;
  // Serves whatever is ready on `fd`. A task asking to abort sets aborted().
  void Handle(int fd);
  bool aborted() const { return aborted_; }
  const std::string& abort_message() const { return abort_message_; }

  // The wire format of PMI_process_mapping: (vector,(first_node,nodes,tasks_per_node),...).
  static std::string ProcessMapping(const std::vector<uint32_t>& tasks_per_node);

 private:
  struct Conn {
    std::string in;
    int rank = -1;  // -1: not yet proved to be a task of the step
    bool in_barrier = false;
  };
  void Command(int fd, Conn& c, const std::string& line);
  void Reply(int fd, const std::string& line);
  void Close(int fd);

  void Stranger(int fd);

  uint32_t size_;
  std::string kvs_;
  uint32_t id_base_;
  std::vector<bool> claimed_;  // ranks that have connected
  int strangers_ = 0;
  int listener_ = -1;
  std::map<int, Conn> conns_;
  std::map<std::string, std::string> kv_;
  uint32_t in_barrier_ = 0;
  bool aborted_ = false;
  std::string abort_message_;
};

}  // namespace muster::client
