// srun --bcast on a node: the program's bytes, as srun sends them, written to their destination
// by a child process that has become the job's user. Root never acts on the destination: it is a
// path the user chose, in directories the user can change, so only the user's permissions,
// quotas and limits may apply to it. The child refuses a destination that is a symbolic link
// (O_NOFOLLOW) or not a regular file, leaves the file mode 0700, and removes what it wrote when
// the copy fails part way.
//
// Thread-compatible.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::agent {

// Whether the node takes a launch's bcast_path and bcast_size: an absolute path with no ".."
// component and no NUL, at most kMaxPathBytes, and at most kMaxBcastBytes. INVALID_ARGUMENT
// saying which.
Status CheckBcastRequest(const std::string& path, uint64_t size);

struct BcastWriterSpec {
  std::string path;
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

// Starts the child (a copy of this process that makes raw system calls only). Both fds are
// close-on-exec and the caller's. An error when it cannot be started.
Result<BcastWriter> StartBcastWriter(const BcastWriterSpec& spec);

// What the copy came to: `report` is what the child wrote to result_fd (nothing when it died
// without a word), `wait_status` its waitpid status. OK when the file was written whole; else an
// error naming the destination and why, for the user.
Status BcastOutcome(const std::string& report, int wait_status, const BcastWriterSpec& spec);

}  // namespace muster::agent
