// Starting job processes: fork/exec as the job's user, in its own session (process group), with
// its working directory, environment and output files. Thread-compatible.
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
};

struct Spawned {
  pid_t pid = -1;
  int pidfd = -1;  // readable when the process exits; the caller owns it
};

// Starts the process. Errors carry the failing stage: "cannot open output file /x: Permission
// denied", "cannot change to directory /y: No such file or directory", "execve(foo): ...".
// On error no process is left running.
Result<Spawned> Spawn(const SpawnSpec& spec);

// The supplementary groups of a user (for Spawn). Empty when the user is unknown.
std::vector<gid_t> GroupsOf(const std::string& user, gid_t gid);

// "exit code" and "signal" from a waitpid status.
void DecodeWaitStatus(int status, int* exit_code, int* signal);

}  // namespace muster::agent
