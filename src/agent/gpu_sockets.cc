#include "gpu_sockets.h"

#include <map>
#include <string>

#include "muster/common/cpu_topology.h"
#include "muster/common/strings.h"

namespace muster::agent {
namespace {

// NVML's "00000000:1B:00.0" and hwloc's "0000:1b:00.0" alike as the short lower-case form.
std::string ShortBusId(const std::string& id) {
  std::string s = ToLower(id);
  return s.size() > 12 ? s.substr(s.size() - 12) : s;
}

}  // namespace

void AssignGpuSockets(const HostTopology& topo,
                      google::protobuf::RepeatedPtrField<v1::GpuDevice>* gpus) {
  std::map<std::string, int32_t> by_bus;
  for (const HostTopology::Gpu& g : topo.gpus) by_bus[ShortBusId(g.pci_bus_id)] = g.package;
  std::map<uint32_t, int32_t> numa_package;  // NUMA OS index -> package
  std::map<uint32_t, int32_t> pu_package;    // PU OS index -> package
  for (const HostTopology::Numa& n : topo.numa) {
    numa_package[n.os_index] = n.package;
    for (uint32_t pu : n.pus) pu_package[pu] = n.package;
  }
  for (v1::GpuDevice& g : *gpus) {
    if (g.has_socket()) continue;
    int32_t package = -1;
    if (auto it = by_bus.find(ShortBusId(g.pci_bus_id())); it != by_bus.end()) {
      package = it->second;
    }
    if (package < 0 && g.numa_node() >= 0) {
      auto it = numa_package.find(static_cast<uint32_t>(g.numa_node()));
      if (it != numa_package.end()) package = it->second;
    }
    if (package < 0 && !g.cpu_affinity().empty()) {
      auto cpus = ParseCpuList(g.cpu_affinity());
      for (size_t i = 0; cpus.ok() && i < cpus->size(); ++i) {
        auto it = pu_package.find((*cpus)[i]);
        const int32_t here = it == pu_package.end() ? -1 : it->second;
        if (here < 0 || (i > 0 && here != package)) {
          package = -1;
          break;
        }
        package = here;
      }
    }
    if (package >= 0) g.set_socket(static_cast<uint32_t>(package));
  }
}

}  // namespace muster::agent
