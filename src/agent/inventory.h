// What a node has: CPUs and memory from the OS, and the fixture files that describe fake GPUs
// (and their faults) for machines without them. NVML lives in nvml.h.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/v1/common.pb.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

struct OsInventory {
  std::string hostname;
  uint32_t cpus = 0;
  uint64_t memory_mb = 0;
};
OsInventory ProbeOs();

// A fixture: fake GPUs (and optionally fake CPU/memory totals). File format in docs/config.md:
//   [node]  cpus = 16, memory_mb = 64000           (optional)
//   [gpus]  count, model, type, memory_mb, numa_nodes, sockets (default: one per NUMA node),
//           interconnect = "nvswitch"|"nvlink"|"pcie",
//           or topo = ["X NV18 ...", ...] rows as `nvidia-smi topo -m` prints them.
struct GpuFixture {
  uint32_t cpus = 0;       // 0: use the OS value
  uint64_t memory_mb = 0;  // 0: use the OS value
  std::vector<v1::GpuDevice> gpus;
};
// INVALID_ARGUMENT naming file, line and key for a malformed fixture.
Result<GpuFixture> ParseGpuFixture(const std::string& text, const std::string& source);
Result<GpuFixture> LoadGpuFixture(const std::string& path);

// Builds the link matrix of `count` GPUs from `nvidia-smi topo -m` style cells
// ("X", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS"). INVALID_ARGUMENT for unknown cells.
Status ApplyTopoMatrix(const std::vector<std::vector<std::string>>& cells,
                       std::vector<v1::GpuDevice>* gpus);

// Fixture mode's injected GPU faults, one per line: "3 xid 79", "1 ecc 2", "0 lost",
// "2 remap-pending" ('#' starts a comment). Returns index -> health reason, worded as NVML mode
// words it; application XIDs (13, 31, ...) are not faults and are skipped.
Result<std::map<uint32_t, std::string>> ParseGpuFaults(const std::string& text);

// A node's inventory as text (`musterd --probe`): one line per item, key=value fields, then the
// [[nodes]] configuration entry that matches it.
std::string DescribeInventory(const v1::NodeInventory& inv);

// "NVIDIA H100 80GB HBM3" -> "h100", "Tesla V100-SXM2-16GB" -> "v100".
std::string GpuTypeFromModel(const std::string& model);

}  // namespace muster::agent
