// InfiniBand and RoCE HCAs from sysfs (/sys/class/infiniband): per device its node GUID, PCI
// address and NUMA node, per port its state, rate and link layer. Only ports whose link layer is
// InfiniBand belong to an IB fabric; RoCE ports say Ethernet.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace muster::agent {

struct IbPort {
  uint32_t port = 0;
  std::string state;       // "ACTIVE", "DOWN", "INIT", ...
  double rate_gbps = 0;    // 0: unknown
  std::string link_layer;  // "InfiniBand" or "Ethernet"
};

struct IbDevice {
  std::string name;  // mlx5_0
  std::string node_guid;
  std::string pci_bus_id;  // from the device link; empty when not a PCI device
  int32_t numa = -1;
  std::vector<IbPort> ports;
};

// Devices under `class_dir`, sorted by name. A missing directory means no HCAs (an empty list);
// an unreadable or malformed attribute is left at its default rather than failing the probe.
std::vector<IbDevice> ProbeInfiniband(const std::string& class_dir = "/sys/class/infiniband");

}  // namespace muster::agent
