// srun --cpu-bind: which of the CPUs a step holds on a node each of its tasks there runs on.
// Parsed by the CLI (a bad value is refused before anything runs); laid out and applied by the
// node's step supervisor, which binds each task (sched_setaffinity before its exec) to a subset
// of the step's CPUs there, never to a CPU the step does not hold.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "muster/common/cpu_topology.h"
#include "muster/common/status.h"

namespace muster {

struct CpuBind {
  enum class Kind {
    kUnset,     // no type given (quiet or verbose alone): not bound, as none
    kNone,      // not bound: every task runs on all of the step's CPUs
    kThreads,   // cpus-per-task hardware threads each
    kCores,     // whole cores, enough for cpus-per-task threads
    kSockets,   // the step's CPUs on the sockets its share falls on
    kLdoms,     // the step's CPUs on the NUMA nodes its share falls on
    kRank,      // task i (local) gets the step's i-th CPUs in id order
    kRankLdom,  // task i gets the step's CPUs on its i-th NUMA node
    kMapCpu,    // map_cpu:ID,...: task i gets CPU list[i % size]
    kMaskCpu,   // mask_cpu:HEX,...: task i gets the CPUs of mask list[i % size]
    kMapLdom,   // map_ldom:ID,...: task i gets the step's CPUs on NUMA node list[i % size]
    kMaskLdom,  // mask_ldom:HEX,...: ... on the NUMA nodes of mask list[i % size]
  };
  Kind kind = Kind::kUnset;
  bool verbose = false;
  // map_*: one id each; mask_*: the ids each mask sets. Repetitions (*R) expanded.
  std::vector<std::vector<uint32_t>> list;
  std::string list_text;  // the list as given (SLURM_CPU_BIND_LIST for map_cpu and mask_cpu)
};

// "[{quiet|verbose},]TYPE" with TYPE none, threads, cores, sockets, ldoms, rank, rank_ldom,
// map_cpu:LIST, mask_cpu:LIST, map_ldom:LIST or mask_ldom:LIST (Slurm's short forms q, v, no,
// thread, core, socket, ldom too). map_cpu and map_ldom items are decimal (or 0x hex), mask items
// hexadecimal with or without 0x; each item may be followed by *R (repeated R times). A list holds
// at most 4096 entries and 2^20 ids in all, repetitions counted. INVALID_ARGUMENT, naming what is
// wrong, for anything else.
Result<CpuBind> ParseCpuBind(std::string_view value);

// How a node's CPUs are dealt to its tasks before a binding widens them (srun -m's second level):
// cyclic (Slurm's default) starts each task on the next socket, block fills one socket first,
// fcyclic takes each CPU from the next socket.
enum class CpuDistribution { kCyclic, kBlock, kFcyclic };
// "", "*", "cyclic", "block" or "fcyclic".
Result<CpuDistribution> ParseCpuDistribution(std::string_view value);

// The CPUs each of a step's `ntasks` tasks on a node is bound to (by local id, ascending ids), out
// of `held`, the CPUs the step holds there, laid out over `topo`. Empty (no entry at all) when the
// binding binds nothing (none, or no type). Each task's share is `cpus_per_task` threads (at least
// one), dealt by `dist` and widened to the binding's unit; tasks beyond what the CPUs hold start
// again from the first. map/mask ids are the kernel's CPU numbers (NUMA node numbers for *_ldom):
// one the step does not hold here, or that this machine lacks, is FAILED_PRECONDITION naming it.
// FAILED_PRECONDITION too when none of `held` is on this machine.
Result<std::vector<std::vector<uint32_t>>> LayOutTaskCpus(const CpuBind& bind, CpuDistribution dist,
                                                          const CpuTopology& topo,
                                                          const std::vector<uint32_t>& held,
                                                          uint32_t ntasks, uint32_t cpus_per_task);

// A CPU set as a hexadecimal mask, bit N for CPU N, without 0x: "3" for CPUs 0 and 1. `width`
// pads it with zeros to at least that many digits; `upper` writes A-F.
std::string CpuMaskHex(const std::vector<uint32_t>& ids, size_t width = 0, bool upper = false);

// What a task of the step finds in its environment: SLURM_CPU_BIND, SLURM_CPU_BIND_TYPE,
// SLURM_CPU_BIND_LIST and SLURM_CPU_BIND_VERBOSE, as Slurm sets them. An automatic binding is
// written as the mask_cpu: it came to (every task's mask on this node, in local order).
std::vector<std::pair<std::string, std::string>> CpuBindEnv(
    const CpuBind& bind, const std::vector<std::vector<uint32_t>>& task_cpus);

// The line --cpu-bind=verbose prints on a task's stderr before it runs:
// "cpu-bind=MASK - node1, task  3  1 [4242]: mask 0x4 set". `cpus`: the task's (the step's
// for none).
std::string CpuBindReport(const CpuBind& bind, const std::string& node, uint32_t task,
                          uint32_t local, pid_t pid, const std::vector<uint32_t>& cpus);

}  // namespace muster
