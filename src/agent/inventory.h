// What a node has: CPUs and memory from the OS, GPUs from NVML (loaded with dlopen, no build
// dependency) or from a fixture file describing fake GPUs for machines without them.
#pragma once

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
//   [gpus]  count, model, type, memory_mb, numa_nodes, interconnect = "nvswitch"|"nvlink"|"pcie",
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

// GPUs through NVML. UNAVAILABLE when libnvidia-ml.so.1 cannot be loaded or initialised (no
// driver): the caller then runs without GPUs or with a fixture.
Result<std::vector<v1::GpuDevice>> ProbeNvml();

// "NVIDIA H100 80GB HBM3" -> "h100", "Tesla V100-SXM2-16GB" -> "v100".
std::string GpuTypeFromModel(const std::string& model);

}  // namespace muster::agent
