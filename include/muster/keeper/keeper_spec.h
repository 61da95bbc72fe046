// What the agent hands the muster-keeper program: the batch script to start (a TaskSpec) and
// the keeper's own file descriptors. It travels in a memfd whose number is the program's one
// argument: never on the command line (every user can read it) nor in the environment (the
// keeper runs as root, and a job's LD_PRELOAD must never reach it).
#pragma once

#include <string>
#include <string_view>

#include "muster/keeper/task_spec.h"

namespace muster::keeper {

// The task (TaskSpec) and the keeper's own descriptors.
struct KeeperSpec : TaskSpec {
  int report_fd = -1;    // the pipe the KeeperReport goes to
  int exit_dir_fd = -1;  // the exit record's directory, opened by the agent
  std::string exit_name;
};

// NUL-separated fields after a version line; any byte may appear inside a field but NUL, which
// no argument, environment entry or path can hold anyway.
std::string EncodeKeeperSpec(const KeeperSpec& spec);
// False when `bytes` is not a whole spec of this version (a field missing, a count beyond what
// follows, a number that is not one).
bool DecodeKeeperSpec(std::string_view bytes, KeeperSpec* spec);

// muster-keeper's main: `muster-keeper SPEC_FD`. Starts the task and keeps it; returns only on a
// usage error or an unreadable spec (exit status 127, nothing started).
int KeeperProgramMain(int argc, char** argv);

}  // namespace muster::keeper
