// --propagate on the node: the submitting shell's resource limits (JobSpec.propagated_limits for
// the batch script, SLURM_RLIMIT_* in a step's environment for its tasks) made safe to set. The
// agent runs as root, so a user's value must never raise a limit above the node's own hard limit
// for it: each soft and hard value is clamped to it, and a limit that cannot be set (an unknown
// name, a node limit that cannot be read) is left as the node has it and logged, as Slurm logs
// "Can't propagate RLIMIT_x". The child sets them after dropping privileges (keeper/child.h).
//
// Pure functions, but NodeHardLimits (getrlimit).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "muster/agent/launcher.h"
#include "muster/v1/common.pb.h"

namespace muster::agent {

// RLIMIT_* of one of Slurm's names (AS, CORE, CPU, DATA, FSIZE, MEMLOCK, NOFILE, NPROC, RSS,
// STACK); nullopt for another.
std::optional<int> LimitResource(const std::string& name);

// The node's hard limit of a resource (nullopt: unknown), and an optional cap for RSS from the
// job's memory limit (Slurm sets RSS to the step's memory; AS and DATA are left to the cgroup,
// as a GPU program's address space is far larger than the memory it uses).
using NodeHardLimit = std::function<std::optional<uint64_t>(int resource)>;

struct ClampedLimits {
  std::vector<SpawnSpec::Limit> set;  // what the task gets
  // What was lowered or left out, and why: one line each, for the agent's log ("Can't propagate
  // RLIMIT_NOFILE of 'soft=... hard=...': ...").
  std::vector<std::string> notes;
};
ClampedLimits ClampLimits(const std::vector<v1::ResourceLimit>& wanted,
                          const NodeHardLimit& node_hard,
                          std::optional<uint64_t> rss_cap_bytes = std::nullopt);

// The job's memory on a node in bytes (--mem and its kin, normalised by the controller), the cap
// of RLIMIT_RSS; nullopt when it asked for none.
std::optional<uint64_t> JobMemoryBytes(const v1::JobSpec& spec);

// What this process's hard limits are (getrlimit): the node's, which the agent and muster-stepd
// inherit from their service manager.
std::optional<uint64_t> OwnHardLimit(int resource);

// SLURM_RLIMIT_<NAME>=SOFT,HARD entries ("unlimited" for infinity) taken out of `env`, as srun
// hands a step its limits; malformed ones are dropped (and noted).
std::vector<v1::ResourceLimit> TakeRlimitEnv(std::vector<std::string>* env,
                                             std::vector<std::string>* notes);

}  // namespace muster::agent
