// How the agent starts and watches processes: the seam between the agent's logic and the
// operating system. ProcessLauncher (NewProcessLauncher) is the real one: fork/exec as the job's
// user, cgroups, a keeper for batch scripts, /proc for what runs. Tests give the agent a fake that
// "runs" processes without starting any.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::agent {

// What to start: the process, its identity, its I/O and its place.
struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the task's PATH when it has no '/'
  std::vector<std::string> env;   // KEY=VALUE, the whole environment
  std::string cwd;
  bool change_user = false;  // setgroups/setgid/setuid (the agent runs as root)
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  // Output: either paths the child opens after dropping privileges, or fds it inherits.
  std::string stdout_path;
  std::string stderr_path;  // empty: same as stdout
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Output files are opened with O_APPEND (several tasks of a step may share one), truncated
  // first only when truncate_output (the default, as for batch scripts).
  bool append_output = false;
  bool truncate_output = true;
  // Input: a pipe's read end, a file the child opens after dropping privileges, or neither
  // (/dev/null).
  int stdin_fd = -1;
  std::string stdin_path;
  // A pseudo-terminal's slave: the task's controlling terminal and its stdin, stdout and stderr
  // (srun --pty). Overrides the other I/O settings.
  std::string tty_path;
  // The task's PMI socket (srun's PMI relayed by the step supervisor): inherited as fd
  // keeper::kPmiFd. Not with exit_file.
  int pmi_fd = -1;
  // The CPUs (the kernel's numbers) the process is bound to before its exec (sched_setaffinity:
  // srun --cpu-bind, a job's CPUs left by --core-spec); empty: it keeps ours.
  std::vector<uint32_t> cpus;
  // Resource limits the process sets on itself after dropping privileges, just before its exec
  // (--propagate), clamped to the node's hard limits by the caller (resource_limits.h).
  struct Limit {
    int resource = 0;
    uint64_t soft = 0;  // RLIM_INFINITY as UINT64_MAX
    uint64_t hard = 0;
  };
  std::vector<Limit> limits;
  // cgroup v2: the open directory (O_DIRECTORY) of the cgroup the process starts in, -1: ours.
  // The process is created there (clone3 CLONE_INTO_CGROUP, Linux 5.7): moving it in after the
  // fork would cost a synchronize_rcu, 10-20 ms a job (measured).
  int cgroup_fd = -1;
  // Batch scripts: a keeper process starts the task, waits for it and writes its wait status to
  // this file (atomically), so the status survives a restart of the agent. Empty: no keeper.
  std::string exit_file;
  // The keeper as this program (muster-keeper), started with vfork + exec; empty: a copy of the
  // agent (a fork, whose copy of the agent's page tables costs more than the rest of a short job).
  std::string keeper_program;
};

struct Spawned {
  pid_t pid = -1;       // the task, or its keeper when SpawnSpec.exit_file is set
  int pidfd = -1;       // readable when `pid` exits; the caller owns it
  pid_t task_pid = -1;  // the task itself (its process group and session leader)
};

// Thread-safe.
class Launcher {
 public:
  virtual ~Launcher() = default;

  // Starts the process. Errors carry the failing stage: "cannot open output file /x: Permission
  // denied", "cannot change to directory /y: No such file or directory", "execve(foo): ...". On
  // error no process is left running.
  virtual Result<Spawned> Spawn(const SpawnSpec& spec) = 0;
  // kill(2): a negative pid signals the process group.
  virtual void Kill(pid_t pid, int sig) = 0;
  // Whether the process group has a member that is not a zombie.
  virtual bool GroupAlive(pid_t pgid) = 0;
  // Every process below `root` in the process tree.
  virtual std::vector<pid_t> Descendants(pid_t root) = 0;
  // A process's start time (clock ticks since boot), so that a pid saved before an agent restart
  // is known to still name the same process; 0 when it does not exist.
  virtual uint64_t StartTime(pid_t pid) = 0;
  // A pidfd (readable when the process exits) for a process started by someone else; -1 when it
  // is gone.
  virtual int OpenPidfd(pid_t pid) = 0;
  // Collects `pid`'s wait status once its pidfd is readable: waits for our own child; for an
  // adopted one (usually init's child), only reaps it if it happens to be ours. -1 when none.
  virtual int Reap(pid_t pid, bool our_child) = 0;
  // The supplementary groups of a user (empty when the user is unknown).
  virtual std::vector<gid_t> GroupsOf(const std::string& user, gid_t gid) = 0;
};

// The real launcher: fork/exec, /proc, pidfds.
std::unique_ptr<Launcher> NewProcessLauncher();

}  // namespace muster::agent
