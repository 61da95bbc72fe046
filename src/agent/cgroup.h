// Job cgroups (v2): every process of a job on this node is in its cgroup, so cancel, time limit
// and drain reach the processes that daemonized too, and the job's CPUs and memory are enforced
// where the cpuset and memory controllers are delegated to the agent. Without a writable cgroup
// v2 hierarchy the agent still works, with process groups and the keeper as its only tracking,
// and says so. Thread-compatible.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::agent {

class JobCgroups {
 public:
  // `root`: "" finds the cgroup v2 mount and this process's place in it; "none" disables
  // cgroups; any other value is the directory under which the node's job cgroups go.
  static JobCgroups Detect(const std::string& root, const std::string& node);

  bool enabled() const { return !base_.empty(); }
  // For the admin and `muster nodes --json`: where, and what is enforced or why not.
  const std::string& description() const { return description_; }
  const std::string& base() const { return base_; }
  bool limits_cpus() const { return cpuset_; }
  bool limits_memory() const { return memory_; }
  bool limits_devices() const { return devices_; }

  struct Limits {
    std::vector<uint32_t> cpus;  // OS CPU numbers; empty: not limited
    std::vector<int> mems;       // NUMA nodes; empty: not limited
    uint64_t memory_mb = 0;      // 0: not limited
  };
  // Creates (or reuses) the job's cgroup and applies the limits the controllers allow.
  Result<std::string> Create(uint64_t job_id, const Limits& limits) const;
  // The job cgroups that exist now, by job id (after a restart: what is still running).
  std::vector<std::pair<uint64_t, std::string>> List() const;

  // Operations on one cgroup directory; all tolerate a cgroup that is already gone.
  static std::vector<pid_t> Pids(const std::string& dir);
  static bool Empty(const std::string& dir);
  static void Signal(const std::string& dir, int sig);
  static void Kill(const std::string& dir);      // cgroup.kill, or SIGKILL to each process
  static Status Remove(const std::string& dir);  // with its step cgroups
  // Of the NVIDIA GPU device files (/dev/nvidiaN, character major 195) only these minors are open
  // to the cgroup's processes; nvidiactl, nvidia-uvm, MIG capabilities and every other device stay
  // as the parent cgroups allow. A BPF device program (cgroup v2's device controller).
  static Status LimitGpus(const std::string& dir, const std::vector<uint32_t>& minors);

 private:
  std::string base_;
  std::string description_;
  bool cpuset_ = false;
  bool memory_ = false;
  bool devices_ = false;
};

}  // namespace muster::agent
