// The agent's spool directory: one job<ID> directory per job on this node (its state file, which
// lets a restarted agent re-adopt what still runs; the batch script; the keeper's exit record), and
// the controller epoch this node has obeyed (so that a stale controller stays fenced off across
// agent restarts).
//
// Thread-compatible (the agent's io thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "muster/common/own_files.h"
#include "muster/common/status.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

// Writes `data` to `path` (created with `mode`, truncated), close-on-exec so that no process
// started meanwhile holds it open, and never through a symbolic link. False with errno set on
// failure.
bool WriteFileCloexec(const std::string& path, const std::string& data, mode_t mode);

// Every file the agent relies on (a job's state, its keeper's exit record, the controller epoch)
// lives where only the agent's user can write: the spool directory and its job<ID> directories
// are the agent's, mode 0711, so a job's user can reach its batch script (its own file, mode
// 0700) by name and nothing more.
class JobSpool {
 public:
  // `jobs_dir`: where the job<ID> directories live (empty: in `dir`, with the epoch).
  explicit JobSpool(std::string dir, std::string jobs_dir = "")
      : dir_(std::move(dir)), jobs_dir_(jobs_dir.empty() ? dir_ : std::move(jobs_dir)) {}

  const std::string& dir() const { return dir_; }
  const std::string& jobs_dir() const { return jobs_dir_; }
  std::string JobDir(uint64_t job_id) const;
  // Creates the job's directory (or takes back one a previous run left) as described above.
  Status MakeJobDir(uint64_t job_id) const;

  // The job's state, replaced atomically (written aside, then renamed).
  Status SaveState(const std::string& job_dir, const v1::AgentJobState& state) const;

  // What a previous agent left: a job directory with a state file to re-adopt. A directory without
  // one (its launch never finished) is removed; one whose state does not parse, names another
  // job, or that someone other than the agent could have changed is moved aside to
  // job<ID>.corrupt and reported as lost.
  struct Left {
    uint64_t job_id = 0;
    std::string dir;
    std::optional<v1::AgentJobState> state;  // nullopt: lost (corrupt)
  };
  std::vector<Left> Scan() const;

  // The highest controller epoch obeyed here (0 when none was saved).
  uint64_t LoadEpoch() const;
  // False when it could not be saved (logged by the caller).
  bool SaveEpoch(uint64_t epoch) const;

 private:
  std::string dir_;
  std::string jobs_dir_;
};

}  // namespace muster::agent
