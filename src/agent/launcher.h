// Starting job processes: fork/exec as the job's user, in its own session (process group), with
// its working directory, environment and output files, optionally in a cgroup and under a keeper
// that records the exit status. Thread-compatible.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::agent {

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
  // cgroup v2: the open directory (O_DIRECTORY) of the cgroup the process starts in, -1: ours.
  // The process is created there (clone3 CLONE_INTO_CGROUP, Linux 5.7): moving it in after the
  // fork would cost a synchronize_rcu, 10-20 ms a job (measured).
  int cgroup_fd = -1;
  // Batch scripts: a keeper process starts the task, waits for it and writes its wait status to
  // this file (atomically), so the status survives a restart of the agent. Empty: no keeper.
  std::string exit_file;
};

struct Spawned {
  pid_t pid = -1;       // the task, or its keeper when SpawnSpec.exit_file is set
  int pidfd = -1;       // readable when `pid` exits; the caller owns it
  pid_t task_pid = -1;  // the task itself (its process group and session leader)
};

// Starts the process. Errors carry the failing stage: "cannot open output file /x: Permission
// denied", "cannot change to directory /y: No such file or directory", "execve(foo): ...".
// On error no process is left running.
Result<Spawned> Spawn(const SpawnSpec& spec);

// The wait status a keeper recorded in `exit_file`; NOT_FOUND while (or if) none was written.
Result<int> ReadExitFile(const std::string& exit_file);

// The start time of a process in clock ticks since boot (/proc/PID/stat field 22), so that a pid
// saved before a restart is known to still name the same process. 0 when it does not exist.
uint64_t ProcessStartTime(pid_t pid);

// The supplementary groups of a user (for Spawn). Empty when the user is unknown.
std::vector<gid_t> GroupsOf(const std::string& user, gid_t gid);

// "exit code" and "signal" from a waitpid status.
void DecodeWaitStatus(int status, int* exit_code, int* signal);

}  // namespace muster::agent
