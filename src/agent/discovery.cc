#include "discovery.h"

#include <spdlog/spdlog.h>

#include <map>

#include "gpu_sockets.h"
#include "host_topology.h"
#include "infiniband.h"
#include "muster/common/version.h"
#include "nvml.h"

namespace muster::agent {
namespace {

// The CPU and PCI layout from hwloc. A captured XML that cannot be read is an error (the admin
// asked for it); the live machine failing only costs the detail, and the node still works.
Status AddHostTopology(const std::string& node, const std::string& xml,
                       v1::NodeInventory& inventory) {
  auto topo = ProbeHostTopology(xml);
  if (!topo.ok()) {
    if (!xml.empty()) return topo.status();
    spdlog::warn("node={} no hwloc topology: {}", node, topo.status().message());
    inventory.set_topology_source("none: " + topo.status().message());
    topo = HostTopology{};  // the HCAs from sysfs are still worth reporting
  } else {
    inventory.set_topology_source(xml.empty() ? "hwloc" : "hwloc-xml:" + xml);
  }
  inventory.set_packages(topo->packages);
  inventory.set_cores(topo->cores);
  inventory.set_threads(topo->pus);
  for (const auto& n : topo->numa) {
    v1::NumaNode* out = inventory.add_numa_nodes();
    out->set_os_index(n.os_index);
    for (uint32_t c : n.pus) out->add_cpus(c);
  }
  for (const auto& h : topo->hcas) {
    v1::Hca* out = inventory.add_hcas();
    out->set_name(h.name);
    out->set_pci_bus_id(h.pci_bus_id);
    out->set_numa_node(h.numa);
    out->set_node_guid(h.node_guid);
  }
  // Port state, rate and link layer from sysfs; HCAs hwloc did not see are added.
  if (xml.empty()) {
    for (const IbDevice& d : ProbeInfiniband()) {
      v1::Hca* hca = nullptr;
      for (auto& h : *inventory.mutable_hcas()) {
        if (h.name() == d.name) hca = &h;
      }
      if (!hca) {
        hca = inventory.add_hcas();
        hca->set_name(d.name);
        hca->set_pci_bus_id(d.pci_bus_id);
        hca->set_numa_node(d.numa);
        hca->set_node_guid(d.node_guid);
      }
      for (const IbPort& p : d.ports) {
        v1::IbPort* out = hca->add_ports();
        out->set_port(p.port);
        out->set_state(p.state);
        out->set_rate_gbps(p.rate_gbps);
        out->set_link_layer(p.link_layer);
      }
    }
  }
  // The GPUs' sockets, where the topology is of the machine the GPUs were found on: the live
  // one's for NVML's, a captured one given with a fixture for the fixture's (whose own
  // [gpus] sockets stay).
  if (inventory.gpu_source() != "fixture" || !xml.empty()) {
    AssignGpuSockets(*topo, inventory.mutable_gpus());
  }
  for (const auto& g : topo->gpus) {
    v1::PciGpu* out = inventory.add_pci_gpus();
    out->set_pci_bus_id(g.pci_bus_id);
    out->set_numa_node(g.numa);
    for (const auto& d : g.os_devices) out->add_os_devices(d);
  }
  return Status::Ok();
}

}  // namespace

Result<Discovered> Discover(const AgentOptions& o, const OsInventory& os) {
  Discovered d;
  v1::NodeInventory& inventory = d.inventory;
  inventory.set_name(o.node_name);
  inventory.set_hostname(os.hostname);
  inventory.set_cpus(os.cpus);
  inventory.set_memory_mb(os.memory_mb);
  inventory.set_agent_version(kVersion);
  if (!o.gpu_fixture.empty()) {
    MUSTER_ASSIGN_OR_RETURN(GpuFixture f, LoadGpuFixture(o.gpu_fixture));
    if (f.cpus) inventory.set_cpus(f.cpus);
    if (f.memory_mb) inventory.set_memory_mb(f.memory_mb);
    std::map<uint32_t, std::string> captured;
    for (auto& g : f.gpus) {
      captured[g.index()] = g.health();
      *inventory.add_gpus() = std::move(g);
    }
    inventory.set_gpu_source("fixture");
    d.health = GpuHealthSource::FromFixture(
        std::move(captured), o.gpu_faults.empty() ? o.spool_dir + "/gpu-faults" : o.gpu_faults);
  } else {
    auto nvml = Nvml::Open();
    if (nvml.ok()) {
      for (auto& g : (*nvml)->Devices()) *inventory.add_gpus() = std::move(g);
      d.health = GpuHealthSource::FromNvml(std::move(*nvml));
      inventory.set_gpu_source("nvml");
    } else {
      spdlog::info("node={} no GPUs: {}", o.node_name, nvml.status().message());
      inventory.set_gpu_source("none");
    }
  }
  for (const auto& [index, why] : d.health.Now()) {
    if (index < static_cast<uint32_t>(inventory.gpus_size())) {
      inventory.mutable_gpus(static_cast<int>(index))->set_health(why);
    }
  }
  for (const auto& g : inventory.gpus()) {
    if (!g.health().empty()) spdlog::warn("node={} gpu{}: {}", o.node_name, g.index(), g.health());
  }

  MUSTER_RETURN_IF_ERROR(AddHostTopology(o.node_name, o.topology_xml, inventory));
  return d;
}

}  // namespace muster::agent
