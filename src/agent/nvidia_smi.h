// Parsers for captured `nvidia-smi` outputs: fixture mode describes a GPU node from what the admin
// captured on a real one (`-L`, `topo -m`, `-q`), so discovery, link matrices, MIG and health can
// be exercised without the hardware. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/v1/common.pb.h"

namespace muster::agent {

// `nvidia-smi -L`: "GPU 0: NAME (UUID: GPU-...)" lines, each followed by its MIG devices
// ("  MIG 1g.12gb     Device  0: (UUID: MIG-...)").
struct SmiListedGpu {
  uint32_t index = 0;
  std::string model;
  std::string uuid;
  std::vector<v1::MigDevice> migs;
};
Result<std::vector<SmiListedGpu>> ParseNvidiaSmiList(const std::string& text);

// `nvidia-smi topo -m` (or `-mp`): the GPU-to-GPU cells, each GPU's CPU and NUMA affinity, and
// the NICs with their GPU cells. Fields are tab-separated and may be empty (a GPU with no CPU
// affinity), so the parser never splits on runs of blanks.
struct SmiTopology {
  std::vector<std::vector<std::string>> gpu_cells;  // [i][j]: "X", "NV18", "PIX", ...
  std::vector<std::string> cpu_affinity;            // per GPU; may be empty
  std::vector<int> numa_affinity;                   // per GPU; -1 when absent or N/A
  std::vector<std::string> nics;                    // names, the NIC legend applied
  std::vector<std::vector<std::string>> nic_cells;  // [nic][gpu]
};
Result<SmiTopology> ParseNvidiaSmiTopo(const std::string& text);

// `nvidia-smi -q`: the fields Muster uses, per GPU, in the order printed.
struct SmiQueriedGpu {
  std::string pci_bus_id;  // from the "GPU 00000000:19:00.0" header
  std::string model;
  std::string uuid;
  int minor_number = -1;
  bool mig_enabled = false;
  uint64_t memory_mb = 0;                   // FB Memory Usage / Total
  uint64_t volatile_uncorrectable_ecc = 0;  // SRAM + DRAM (or the older Double Bit lines)
  bool retired_pages_pending = false;
  bool remapped_rows_pending = false;
  bool remapping_failed = false;
  bool reset_required = false;
  std::string fabric_state;  // "Completed", ...; empty when the section is absent or N/A
  std::string fabric_cluster_uuid;
  uint32_t fabric_clique_id = 0;
};
Result<std::vector<SmiQueriedGpu>> ParseNvidiaSmiQuery(const std::string& text);

// Why a queried GPU must not be used, or "" when it is fine ("2 uncorrectable ECC errors",
// "row remapping pending (the GPU needs a reset)", ...).
std::string HealthFromQuery(const SmiQueriedGpu& q);

// The GPUs of a node from any combination of the three captures (each may be empty). The GPU
// count comes from -L, else -q, else topo; captures that disagree on it are an error.
Result<std::vector<v1::GpuDevice>> GpusFromNvidiaSmi(const std::string& list_text,
                                                     const std::string& topo_text,
                                                     const std::string& query_text);

// Critical XIDs, the ones that say the GPU (not the program) is broken, with a short description;
// "" for XIDs that blame the application (13, 31, 43, ...) and must not drain a node.
std::string CriticalXidDescription(uint32_t xid);

}  // namespace muster::agent
