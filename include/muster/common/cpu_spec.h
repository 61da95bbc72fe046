// -S/--core-spec and --thread-spec: which of a node's CPUs a job sets aside for the system. The
// job holds the node whole; its processes run on the rest. Chosen on the node, from the machine's
// own numbering (common/cpu_topology.h), the way Slurm's core specialization chooses: the
// highest-numbered core of the highest-numbered socket first, then the highest-numbered core of
// each lower socket in turn, then the next-highest core of each socket, and so on.
#pragma once

#include <cstdint>
#include <vector>

#include "muster/common/cpu_topology.h"
#include "muster/common/status.h"

namespace muster {

// The CPUs set aside on a machine, ascending. --core-spec=N (core_spec): every thread of the
// first N cores in the order above. --thread-spec=N (thread_spec): the first N threads, core by
// core in that order and each core's from its highest-numbered thread down, so that a core is
// emptied before the next is touched (--thread-spec=2 on two threads per core is --core-spec=1).
// Neither (both 0): none. INVALID_ARGUMENT when both are given, and when nothing would be left
// to the job (N at least the machine's cores, or threads), saying how many it has.
Result<std::vector<uint32_t>> SpecializedCpus(const CpuTopology& topo, uint32_t core_spec,
                                              uint32_t thread_spec);

// `cpus` less those in `aside`, ascending, without repeats.
std::vector<uint32_t> CpusOtherThan(const std::vector<uint32_t>& cpus,
                                    const std::vector<uint32_t>& aside);

}  // namespace muster
