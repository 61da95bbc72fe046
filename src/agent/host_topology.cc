#include "host_topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace muster::agent {
namespace {

constexpr uint16_t kNvidiaVendor = 0x10de;

std::string BusId(const hwloc_obj_t pci) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain,
                pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
  return buf;
}

// The OS index of the first NUMA node local to an I/O object, or -1.
int32_t NumaOf(hwloc_topology_t topo, hwloc_obj_t io) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, io);
  if (!anc || !anc->nodeset || hwloc_bitmap_iszero(anc->nodeset)) return -1;
  return hwloc_bitmap_first(anc->nodeset);
}

// The logical index of the one package whose CPUs include all of `cpus`, or -1 (no CPUs, no
// packages, or CPUs of several).
int32_t PackageOf(hwloc_topology_t topo, hwloc_const_cpuset_t cpus) {
  if (!cpus || hwloc_bitmap_iszero(cpus)) return -1;
  for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, p));) {
    if (p->cpuset && hwloc_bitmap_isincluded(cpus, p->cpuset)) {
      return static_cast<int32_t>(p->logical_index);
    }
  }
  return -1;
}

// The package an I/O object is attached under: the one holding the CPUs of its nearest normal
// (non-I/O) ancestor.
int32_t PackageOfIo(hwloc_topology_t topo, hwloc_obj_t io) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, io);
  return anc ? PackageOf(topo, anc->cpuset) : -1;
}

// The PCI device an OS device belongs to (its parent, possibly through a bridge-less chain).
hwloc_obj_t PciOf(hwloc_obj_t osdev) {
  for (hwloc_obj_t o = osdev->parent; o; o = o->parent) {
    if (o->type == HWLOC_OBJ_PCI_DEVICE) return o;
  }
  return nullptr;
}

uint32_t Count(hwloc_topology_t topo, hwloc_obj_type_t type) {
  int n = hwloc_get_nbobjs_by_type(topo, type);
  return n > 0 ? static_cast<uint32_t>(n) : 0;
}

}  // namespace

Result<HostTopology> ProbeHostTopology(const std::string& xml_path) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return Internal("hwloc: cannot initialise a topology");
  std::unique_ptr<hwloc_topology, decltype(&hwloc_topology_destroy)> topo(raw,
                                                                          hwloc_topology_destroy);
  // Keep every PCI device and OS device: GPUs and HCAs are what the scheduler needs to place.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (!xml_path.empty() && hwloc_topology_set_xml(raw, xml_path.c_str()) != 0) {
    return InvalidArgument(xml_path + ": not a hwloc XML export hwloc can read");
  }
  if (hwloc_topology_load(raw) != 0) {
    return InvalidArgument((xml_path.empty() ? std::string("this machine") : xml_path) +
                           ": hwloc could not load the topology");
  }
  HostTopology t;
  t.packages = Count(raw, HWLOC_OBJ_PACKAGE);
  t.cores = Count(raw, HWLOC_OBJ_CORE);
  t.pus = Count(raw, HWLOC_OBJ_PU);
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, n));) {
    HostTopology::Numa numa;
    numa.os_index = n->os_index;
    if (n->cpuset) {
      for (int pu = hwloc_bitmap_first(n->cpuset); pu >= 0; pu = hwloc_bitmap_next(n->cpuset, pu)) {
        numa.pus.push_back(static_cast<uint32_t>(pu));
      }
    }
    numa.package = PackageOf(raw, n->cpuset);
    t.numa.push_back(std::move(numa));
  }
  std::sort(t.numa.begin(), t.numa.end(),
            [](const auto& a, const auto& b) { return a.os_index < b.os_index; });

  // GPUs: NVIDIA display or 3D controllers (class 0x03xx); NVSwitches are bridges (0x0680).
  for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_pcidev(raw, p));) {
    if (p->attr->pcidev.vendor_id != kNvidiaVendor || (p->attr->pcidev.class_id >> 8) != 0x03) {
      continue;
    }
    HostTopology::Gpu g;
    g.pci_bus_id = BusId(p);
    g.pci_device = p->attr->pcidev.device_id;
    g.numa = NumaOf(raw, p);
    g.package = PackageOfIo(raw, p);
    for (hwloc_obj_t c = p->io_first_child; c; c = c->next_sibling) {
      if (c->type == HWLOC_OBJ_OS_DEVICE && c->name) g.os_devices.push_back(c->name);
    }
    t.gpus.push_back(std::move(g));
  }
  std::sort(t.gpus.begin(), t.gpus.end(),
            [](const auto& a, const auto& b) { return a.pci_bus_id < b.pci_bus_id; });

  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(raw, o));) {
    if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || !o->name) continue;
    HostTopology::Hca h;
    h.name = o->name;
    if (hwloc_obj_t pci = PciOf(o)) h.pci_bus_id = BusId(pci);
    h.numa = NumaOf(raw, o);
    if (const char* guid = hwloc_obj_get_info_by_name(o, "NodeGUID")) h.node_guid = guid;
    t.hcas.push_back(std::move(h));
  }
  std::sort(t.hcas.begin(), t.hcas.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return t;
}

}  // namespace muster::agent
