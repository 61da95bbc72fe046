// The machine's CPUs as the kernel numbers them, with the socket, core and NUMA node each sits in,
// read from sysfs: what srun --cpu-bind lays tasks out over (muster/common/cpu_bind.h). A step
// supervisor reads it itself, so it needs neither hwloc nor the agent.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "muster/common/status.h"

namespace muster {

struct CpuTopology {
  struct Cpu {
    uint32_t id = 0;      // the kernel's CPU number (one hardware thread)
    uint32_t socket = 0;  // physical_package_id
    // Its core: the lowest CPU id among the core's threads (core_cpus_list, else
    // thread_siblings_list; core_id only where neither exists, which repeats across dies).
    uint32_t core = 0;
    uint32_t ldom = 0;  // its NUMA node; its socket where the kernel knows none
  };
  std::vector<Cpu> cpus;  // ascending id, online CPUs only

  // nullptr when the machine has no such CPU online.
  const Cpu* Find(uint32_t id) const;
};

// The kernel's list format ("0-3,8,10-11", as in cpuset.cpus and Cpus_allowed_list) to ascending
// ids without repeats, and back. INVALID_ARGUMENT for anything else, and for ids from 65536 on.
Result<std::vector<uint32_t>> ParseCpuList(std::string_view text);
std::string FormatCpuList(const std::vector<uint32_t>& ids);

// The online CPUs under `sysfs` (normally "/sys"; tests give a tree of their own):
// devices/system/cpu/online, each CPU's topology/physical_package_id and its core's threads
// (topology/core_cpus_list, thread_siblings_list or core_id; a CPU without them is its own core
// on socket 0), and devices/system/node/node*/cpulist for the NUMA
// nodes. NOT_FOUND naming the file when the list of online CPUs cannot be read.
Result<CpuTopology> ReadCpuTopology(const std::string& sysfs = "/sys");

}  // namespace muster
