// srun --bcast on a node: the program's bytes, as srun sends them, written to their destination
// by a child process that has become the job's user. Root never acts on the destination: it is a
// path the user chose, in directories the user can change, so only the user's permissions,
// quotas and limits may apply to it. The child writes a new file of its own beside the
// destination (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0700) and renames it over the destination once it
// is whole, so a file that is there (a hard link someone planted to another of the user's files,
// another user's file, a program still running) is never truncated or written into, and a copy
// that stops part way changes nothing there: its temporary file goes. A destination that is a
// symbolic link, a directory or not a regular file is refused. The child is a process group of
// its own, so that the job's end reaches it: SIGTERM (or SIGINT, SIGHUP) makes it remove its
// temporary file and stop; only a SIGKILL before that leaves the file (.muster-bcast-*) behind.
//
// Thread-compatible.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::agent {

// Whether the node takes a launch's bcast_path and bcast_size: an absolute path with no ".."
// component, no NUL and no trailing '/' (srun names the file in a directory itself), at most
// kMaxPathBytes, and at most kMaxBcastBytes. INVALID_ARGUMENT saying which.
Status CheckBcastRequest(const std::string& path, uint64_t size);

// How long a node waits for a program of `size` bytes to arrive whole: 10 minutes, plus a
// second for every 256 KiB (srun sends each chunk to all the step's nodes in turn, so a large
// program to many nodes comes slowly). Past it the step fails there: a client that stalls
// cannot hold a writer, and the step's place on the port, for ever. About 78 minutes at
// kMaxBcastBytes.
std::chrono::seconds BcastDeadline(uint64_t size);

struct BcastWriterSpec {
  std::string path;
  // The temporary file in path's directory the copy is written to first (BcastTempPath).
  std::string temp_path;
  uint64_t size = 0;  // what the copy must come to
  bool change_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  // The step's cgroup.procs, open for writing: the child moves itself there first (where it
  // may), so that what it writes is charged to the job and it ends with the job. -1: ours.
  int cgroup_procs_fd = -1;
};

struct BcastWriter {
  pid_t pid = -1;
  int data_fd = -1;    // ours to write the program into, then close: its end of file
  int result_fd = -1;  // ours to read once the child has ended: its report (BcastOutcome)
};

// A new name for the copy under way, in `path`'s directory: .muster-bcast-<16 random hex digits>.
std::string BcastTempPath(const std::string& path);

// Starts the child (a copy of this process that makes raw system calls only), the leader of a
// process group of its own. Both fds are close-on-exec and the caller's. An error when it cannot
// be started.
Result<BcastWriter> StartBcastWriter(const BcastWriterSpec& spec);

// What the copy came to: `report` is what the child wrote to result_fd (nothing when it died
// without a word), `wait_status` its waitpid status. OK when the file was written whole; else an
// error naming the destination and why, for the user.
Status BcastOutcome(const std::string& report, int wait_status, const BcastWriterSpec& spec);

}  // namespace muster::agent
