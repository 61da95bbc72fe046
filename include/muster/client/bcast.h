// srun --bcast[=DEST]: the step's program (argv[0]) is copied from srun's host to each node of the
// step before its tasks start, and run from there. srun finds the program as execvp would,
// refuses what it could not send whole (not a regular file, unreadable, over kMaxBcastBytes),
// names each node's copy, and streams the file to the nodes in frames of type 5 behind the
// launch requests; each node writes it as the job's user (the agent's step supervisor).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::client {

// `name` as execvp runs it: a name holding a '/' as it is; otherwise the first executable regular
// file of that name in `path`'s directories (colon-separated; an empty entry is the current
// directory). NOT_FOUND, naming it, when there is none.
Result<std::string> FindProgram(const std::string& name, const std::string& path);

// The program, open for reading (close-on-exec), and its size. FAILED_PRECONDITION, naming the
// file, for one that cannot be read, is not a regular file, or is larger than kMaxBcastBytes.
struct BcastSource {
  int fd = -1;
  uint64_t size = 0;
};
Result<BcastSource> OpenBcastSource(const std::string& path);

// --bcast's DEST (empty when none was given) made absolute: relative to `work_dir` (the step's
// working directory, absolute), `work_dir` itself with a trailing '/' when empty. A result
// ending in '/' is a directory. INVALID_ARGUMENT for a ".." component (the nodes refuse it) or
// a path longer than kMaxPathBytes.
Result<std::string> BcastDestination(const std::string& dest, const std::string& work_dir);

// Node `node`'s copy: `dest` (from BcastDestination) itself, or, when it is a directory, the file
// slurm_bcast_JOB.STEP_NODE in it, as Slurm names it.
std::string BcastPathOnNode(const std::string& dest, uint64_t job_id, uint32_t step_id,
                            const std::string& node);

// Sends the program's `size` bytes (read once, from its start) to every connection in `fds`, in
// frames of type 5 of kBcastChunk bytes at most. A connection that cannot be written, or has
// something to say (its node gave up: the error waits there to be read), gets no more of it:
// its entry in `fds` becomes -1 (the caller still holds the connection, to read why). Between
// chunks `interrupted()` is asked: true stops the sending with ABORTED. DATA_LOSS when the file
// cannot be read or ends early (it changed meanwhile).
Status SendBcast(const BcastSource& source, std::vector<int>* fds,
                 const std::function<bool()>& interrupted);

}  // namespace muster::client
