// The CPUs a job's processes run on here when it sets some aside for the system (-S/--core-spec,
// --thread-spec): the batch script, each step's tasks, the job's cgroup. Which ones are set aside
// is the machine's to say (common/cpu_spec.h), so the agent and each step supervisor work it out
// from this machine's topology, the same way every time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/common/cpu_topology.h"
#include "muster/common/status.h"
#include "muster/v1/common.pb.h"

namespace muster::agent {

// Whether the job sets CPUs aside on its nodes.
bool SetsCpusAside(const v1::JobSpec& spec);

// Of `held` (CPU ids the job, or a step of it, holds on this node), those this machine has and
// that `spec` does not set aside, ascending. FAILED_PRECONDITION, saying why, when none is left
// or the machine cannot set that many aside (fewer cores or threads than asked for): the job
// must not run on CPUs it gave up, nor guess which they are.
Result<std::vector<uint32_t>> CpusLeftToJob(const v1::JobSpec& spec,
                                            const std::vector<uint32_t>& held,
                                            const CpuTopology& machine);

// The same with this machine's topology read from sysfs (FAILED_PRECONDITION when it cannot be).
Result<std::vector<uint32_t>> CpusLeftToJobHere(const v1::JobSpec& spec,
                                                const std::vector<uint32_t>& held);

// Whether `cpus` is not empty and each of them is one of `online` (ascending): the ids a cpuset
// may name. The kernel's numbering may have holes (CPUs offline, or never there), so the count
// of CPUs says nothing of which ids exist.
bool AllOnline(const std::vector<uint32_t>& cpus, const std::vector<uint32_t>& online);

// This machine's online CPUs, ascending: `sysfs`/devices/system/cpu/online (tests give a tree of
// their own). NOT_FOUND when it cannot be read, INVALID_ARGUMENT when it is not a CPU list.
Result<std::vector<uint32_t>> OnlineCpus(const std::string& sysfs = "/sys");

}  // namespace muster::agent
