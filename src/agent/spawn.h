// How processes really start: fork/exec as the job's user, in its own session (process group),
// with its working directory, environment and output files, optionally in a cgroup and under a
// keeper that records the exit status (what ProcessLauncher runs; see muster/agent/launcher.h).
// Thread-compatible.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "muster/agent/launcher.h"
#include "muster/common/status.h"

namespace muster::agent {

// Starts the process. Errors carry the failing stage: "cannot open output file /x: Permission
// denied", "cannot change to directory /y: No such file or directory", "execve(foo): ...".
// On error no process is left running.
Result<Spawned> Spawn(const SpawnSpec& spec);

// The wait status a keeper recorded in `exit_file`; NOT_FOUND while (or if) none was written.
Result<int> ReadExitFile(const std::string& exit_file);

// The supplementary groups of a user (for Spawn). Empty when the user is unknown.
std::vector<gid_t> GroupsOf(const std::string& user, gid_t gid);

// "exit code" and "signal" from a waitpid status.
void DecodeWaitStatus(int status, int* exit_code, int* signal);

}  // namespace muster::agent
