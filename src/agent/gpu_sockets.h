// Which socket (CPU package) each GPU hangs off, for --gpus-per-socket: from the node's hwloc
// topology, joined to the GPUs NVML (or a fixture) reported.
#pragma once

#include <google/protobuf/repeated_field.h>

#include "host_topology.h"
#include "muster/v1/common.pb.h"

namespace muster::agent {

// Sets GpuDevice.socket on each GPU that has none yet: the package of the hwloc GPU with its PCI
// bus id, else the package of its NUMA node, else the one package that holds every CPU of its
// CPU affinity. Left unset where none of them says (it hangs off the whole machine).
void AssignGpuSockets(const HostTopology& topo,
                      google::protobuf::RepeatedPtrField<v1::GpuDevice>* gpus);

}  // namespace muster::agent
