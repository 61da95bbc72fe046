// The node's CPU and PCI layout through hwloc: packages, cores, hardware threads, NUMA nodes, and
// where each GPU and InfiniBand/RoCE HCA sits. On a real node it reads the live machine; in
// fixture mode it loads a captured hwloc XML export (v1 or v2), so tests run anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::agent {

struct HostTopology {
  uint32_t packages = 0;
  uint32_t cores = 0;
  uint32_t pus = 0;  // hardware threads
  // NUMA nodes by OS index, with the PUs (OS indices) each holds. Memory-only nodes (GPU memory
  // on POWER9, CXL) hold no PUs.
  struct Numa {
    uint32_t os_index = 0;
    std::vector<uint32_t> pus;
    int32_t package = -1;  // logical index of the package holding its PUs; -1: none (or several)
  };
  std::vector<Numa> numa;
  // NVIDIA GPUs, one per PCI function whatever OS devices (cuda, nvml, opencl, card, renderD) a
  // driver added, in PCI bus order.
  struct Gpu {
    std::string pci_bus_id;   // "0000:34:00.0"
    uint32_t pci_device = 0;  // device id (10de:xxxx)
    int32_t numa = -1;        // OS index of the closest NUMA node; -1: unknown
    // Logical index of the package (socket) whose CPUs are closest; -1: unknown (it hangs off
    // the whole machine, or the export has no packages).
    int32_t package = -1;
    std::vector<std::string> os_devices;  // "cuda0", "nvml0", ...
  };
  std::vector<Gpu> gpus;
  // OpenFabrics devices (InfiniBand or RoCE HCAs).
  struct Hca {
    std::string name;  // "mlx5_0"
    std::string pci_bus_id;
    int32_t numa = -1;
    std::string node_guid;  // from hwloc's info attributes, when the export has them
  };
  std::vector<Hca> hcas;
};

// Reads the live machine (empty path) or a hwloc XML file. INVALID_ARGUMENT naming the file when
// it cannot be loaded.
Result<HostTopology> ProbeHostTopology(const std::string& xml_path = "");

}  // namespace muster::agent
