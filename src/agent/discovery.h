// What this node has: the OS (host name, CPUs, memory), its GPUs (NVML, or a fixture file in
// tests and local clusters) and their health, the CPU and PCI layout (hwloc) and the InfiniBand
// HCAs (sysfs). Run once, at start, and by `musterd --probe`.
#pragma once

#include <string>

#include "gpu_health.h"
#include "inventory.h"
#include "muster/agent/agent_options.h"
#include "muster/common/status.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

struct Discovered {
  v1::NodeInventory inventory;
  GpuHealthSource health;  // where the GPUs' health comes from from now on
};

// `options` has its node name and spool dir resolved. A GPU fixture or topology XML that cannot
// be read is an error (the admin asked for it); a machine without NVML or hwloc is not.
Result<Discovered> Discover(const AgentOptions& options, const OsInventory& os);

}  // namespace muster::agent
