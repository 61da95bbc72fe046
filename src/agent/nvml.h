// GPUs through NVML, loaded with dlopen (libnvidia-ml.so.1): no build dependency on NVIDIA's
// headers, and a node without a driver simply has no GPUs. Thread-compatible: the agent uses one
// instance from one thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/v1/common.pb.h"

namespace muster::agent {

class Nvml {
 public:
  // UNAVAILABLE when the library cannot be loaded or initialised (no driver), or lacks the
  // entry points every supported driver has.
  static Result<std::unique_ptr<Nvml>> Open();
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Every GPU: index, UUID, model, memory, PCI bus id, NUMA node, minor number, the NVLink matrix
  // (direct links by count, NVSwitch ports as all-to-all), MIG mode and instances, the
  // multi-node NVLink fabric (cluster UUID, clique) and health.
  std::vector<v1::GpuDevice> Devices();

  // The GPUs that are unhealthy now, by index, with why: critical XID events seen since Open
  // (sticky), uncorrectable volatile ECC errors, pending page retirement or row remapping, a
  // failed remapping, or a GPU that fell off the bus.
  std::map<uint32_t, std::string> Health();

  struct Api;

 private:
  explicit Nvml(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
  std::vector<void*> handles_;           // by index
  std::map<uint32_t, std::string> xid_;  // sticky critical XIDs
  void* events_ = nullptr;               // nvmlEventSet_t; null when events are unsupported
};

}  // namespace muster::agent
