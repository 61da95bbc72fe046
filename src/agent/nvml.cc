#include "nvml.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <fstream>

#include "inventory.h"
#include "muster/common/strings.h"
#include "nvidia_smi.h"

namespace muster::agent {
namespace {

// The few NVML types used, with the layouts of nvml.h (stable across drivers since R450).
using nvmlDevice_t = void*;
using nvmlEventSet_t = void*;
constexpr int kSuccess = 0;
constexpr int kErrorNotSupported = 3;
constexpr int kErrorTimeout = 10;
constexpr int kErrorGpuIsLost = 15;
constexpr unsigned kNvlinkMaxLinks = 18;
constexpr unsigned long long kEventXidCritical = 0x8;
constexpr unsigned kMigEnabled = 1;
constexpr unsigned kUncorrected = 1;  // nvmlMemoryErrorType_t
constexpr unsigned kVolatile = 0;     // nvmlEccCounterType_t

struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlPciInfo {  // nvmlPciInfo_t (v3)
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct NvmlFabricInfo {  // nvmlGpuFabricInfo_t
  unsigned char cluster_uuid[16];
  int status;
  unsigned int clique_id;
  unsigned char state;  // 0 not supported, 1 not started, 2 in progress, 3 completed
};
struct NvmlEventData {  // nvmlEventData_t
  nvmlDevice_t device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

template <typename F>
bool Sym(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(::dlsym(lib, name));
  return *out != nullptr;
}

int NumaOfPci(const std::string& bus_id) {
  // sysfs wants the short lower-case form: 0000:1b:00.0
  std::string id = ToLower(bus_id);
  if (id.size() > 12) id = id.substr(id.size() - 12);
  std::ifstream f("/sys/bus/pci/devices/" + id + "/numa_node");
  int n = -1;
  if (f >> n) return n;
  return -1;
}

std::string Hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
    if (i == 3 || i == 5 || i == 7 || i == 9) s += '-';
  }
  return s;
}

}  // namespace

// Entry points by their versioned names. Optional ones stay null on older drivers.
struct Nvml::Api {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned*) = nullptr;
  int (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  int (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  int (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  int (*memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  int (*pci)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  int (*minor)(nvmlDevice_t, unsigned*) = nullptr;
  int (*link_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  int (*link_remote)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
  int (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  int (*mig_max)(nvmlDevice_t, unsigned*) = nullptr;
  int (*mig_handle)(nvmlDevice_t, unsigned, nvmlDevice_t*) = nullptr;
  int (*fabric)(nvmlDevice_t, NvmlFabricInfo*) = nullptr;
  int (*ecc_total)(nvmlDevice_t, unsigned, unsigned, unsigned long long*) = nullptr;
  int (*retired_pending)(nvmlDevice_t, int*) = nullptr;
  int (*remapped_rows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  int (*event_set_create)(nvmlEventSet_t*) = nullptr;
  int (*event_set_free)(nvmlEventSet_t) = nullptr;
  int (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  int (*event_wait)(nvmlEventSet_t, NvmlEventData*, unsigned) = nullptr;
};

Result<std::unique_ptr<Nvml>> Nvml::Open() {
  auto api = std::make_unique<Api>();
  Api& a = *api;
  a.lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!a.lib) return Unavailable(std::string("NVML not available: ") + ::dlerror());
  bool ok = Sym(a.lib, "nvmlInit_v2", &a.init) && Sym(a.lib, "nvmlShutdown", &a.shutdown) &&
            Sym(a.lib, "nvmlDeviceGetCount_v2", &a.count) &&
            Sym(a.lib, "nvmlDeviceGetHandleByIndex_v2", &a.handle) &&
            Sym(a.lib, "nvmlDeviceGetName", &a.name) && Sym(a.lib, "nvmlDeviceGetUUID", &a.uuid) &&
            Sym(a.lib, "nvmlDeviceGetMemoryInfo", &a.memory) &&
            Sym(a.lib, "nvmlDeviceGetPciInfo_v3", &a.pci);
  if (!ok) {
    ::dlclose(a.lib);
    return Unavailable("NVML library lacks required symbols (driver too old?)");
  }
  Sym(a.lib, "nvmlDeviceGetMinorNumber", &a.minor);
  Sym(a.lib, "nvmlDeviceGetNvLinkState", &a.link_state);
  Sym(a.lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &a.link_remote);
  Sym(a.lib, "nvmlDeviceGetMigMode", &a.mig_mode);
  Sym(a.lib, "nvmlDeviceGetMaxMigDeviceCount", &a.mig_max);
  Sym(a.lib, "nvmlDeviceGetMigDeviceHandleByIndex", &a.mig_handle);
  Sym(a.lib, "nvmlDeviceGetGpuFabricInfo", &a.fabric);
  Sym(a.lib, "nvmlDeviceGetTotalEccErrors", &a.ecc_total);
  Sym(a.lib, "nvmlDeviceGetRetiredPagesPendingStatus", &a.retired_pending);
  Sym(a.lib, "nvmlDeviceGetRemappedRows", &a.remapped_rows);
  Sym(a.lib, "nvmlEventSetCreate", &a.event_set_create);
  Sym(a.lib, "nvmlEventSetFree", &a.event_set_free);
  Sym(a.lib, "nvmlDeviceRegisterEvents", &a.register_events);
  Sym(a.lib, "nvmlEventSetWait_v2", &a.event_wait);
  if (a.init() != kSuccess) {
    ::dlclose(a.lib);
    return Unavailable("nvmlInit failed (no NVIDIA driver loaded?)");
  }
  std::unique_ptr<Nvml> n(new Nvml(std::move(api)));
  unsigned count = 0;
  if (a.count(&count) == kSuccess) {
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t h = nullptr;
      if (a.handle(i, &h) != kSuccess) h = nullptr;  // reported as lost by Health()
      n->handles_.push_back(h);
    }
  }
  // Critical XIDs arrive as events; GPUs that cannot deliver them are still polled for ECC.
  if (a.event_set_create && a.register_events && a.event_wait &&
      a.event_set_create(&n->events_) == kSuccess) {
    for (size_t i = 0; i < n->handles_.size(); ++i) {
      if (!n->handles_[i]) continue;
      int rc = a.register_events(n->handles_[i], kEventXidCritical, n->events_);
      if (rc != kSuccess && rc != kErrorNotSupported) {
        spdlog::warn("gpu{}: cannot watch XID events (NVML error {})", i, rc);
      }
    }
  }
  return n;
}

Nvml::Nvml(std::unique_ptr<Api> api) : api_(std::move(api)) {}

Nvml::~Nvml() {
  if (events_ && api_->event_set_free) api_->event_set_free(events_);
  api_->shutdown();
  // The library stays loaded: unloading NVML while the driver holds state is not worth the risk.
}

std::vector<v1::GpuDevice> Nvml::Devices() {
  Api& a = *api_;
  std::vector<v1::GpuDevice> gpus;
  for (size_t i = 0; i < handles_.size(); ++i) {
    nvmlDevice_t h = handles_[i];
    v1::GpuDevice d;
    d.set_index(static_cast<uint32_t>(i));
    d.set_numa_node(-1);
    d.set_minor_number(-1);
    if (!h) {
      d.set_health("fallen off the bus (NVML cannot open it)");
      gpus.push_back(std::move(d));
      continue;
    }
    char buf[256] = {0};
    if (a.name(h, buf, sizeof buf) == kSuccess) d.set_model(buf);
    std::memset(buf, 0, sizeof buf);
    if (a.uuid(h, buf, sizeof buf) == kSuccess) d.set_uuid(buf);
    NvmlMemory mem{};
    if (a.memory(h, &mem) == kSuccess) d.set_memory_mb(mem.total / (1024 * 1024));
    NvmlPciInfo pci{};
    if (a.pci(h, &pci) == kSuccess) d.set_pci_bus_id(pci.bus_id);
    d.set_numa_node(NumaOfPci(d.pci_bus_id()));
    unsigned minor = 0;
    if (a.minor && a.minor(h, &minor) == kSuccess) d.set_minor_number(static_cast<int32_t>(minor));
    d.set_type(GpuTypeFromModel(d.model()));
    unsigned current = 0, pending = 0;
    if (a.mig_mode && a.mig_mode(h, &current, &pending) == kSuccess && current == kMigEnabled) {
      d.set_mig_enabled(true);
      unsigned max = 0;
      if (a.mig_max && a.mig_handle && a.mig_max(h, &max) == kSuccess) {
        for (unsigned m = 0; m < max; ++m) {
          nvmlDevice_t mh = nullptr;
          if (a.mig_handle(h, m, &mh) != kSuccess) continue;  // slot not populated
          v1::MigDevice* md = d.add_mig_devices();
          md->set_index(static_cast<uint32_t>(d.mig_devices_size() - 1));
          std::memset(buf, 0, sizeof buf);
          if (a.uuid(mh, buf, sizeof buf) == kSuccess) md->set_uuid(buf);
          std::memset(buf, 0, sizeof buf);
          // "NVIDIA H100 80GB HBM3 MIG 1g.10gb": the profile is the last word.
          if (a.name(mh, buf, sizeof buf) == kSuccess) {
            std::string name = buf;
            md->set_profile(name.substr(name.rfind(' ') + 1));
          }
          NvmlMemory mm{};
          if (a.memory(mh, &mm) == kSuccess) md->set_memory_mb(mm.total / (1024 * 1024));
        }
      }
    }
    NvmlFabricInfo fi{};
    if (a.fabric && a.fabric(h, &fi) == kSuccess && fi.state != 0) {
      static const char* kStates[] = {"Not Supported", "Not Started", "In Progress", "Completed"};
      d.set_fabric_state(fi.state < 4 ? kStates[fi.state] : "Unknown");
      bool any = false;
      for (unsigned char c : fi.cluster_uuid) any = any || c != 0;
      if (any) d.set_fabric_cluster_uuid(Hex(fi.cluster_uuid, sizeof fi.cluster_uuid));
      d.set_fabric_clique_id(fi.clique_id);
    }
    gpus.push_back(std::move(d));
  }
  // NVLink: count active links to each peer GPU; links to a non-GPU end are NVSwitch ports.
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::vector<uint32_t> direct(gpus.size(), 0);
    uint32_t switch_links = 0;
    for (unsigned link = 0; a.link_state && a.link_remote && handles_[i] && link < kNvlinkMaxLinks;
         ++link) {
      int active = 0;
      if (a.link_state(handles_[i], link, &active) != kSuccess || !active) continue;
      NvmlPciInfo remote{};
      if (a.link_remote(handles_[i], link, &remote) != kSuccess) continue;
      bool to_gpu = false;
      for (size_t j = 0; j < gpus.size(); ++j) {
        if (!gpus[j].pci_bus_id().empty() &&
            ToLower(gpus[j].pci_bus_id()) == ToLower(remote.bus_id)) {
          ++direct[j];
          to_gpu = true;
        }
      }
      if (!to_gpu) ++switch_links;
    }
    for (size_t j = 0; j < gpus.size(); ++j) {
      if (j == i) continue;
      v1::GpuLink* l = gpus[i].add_links();
      l->set_peer_index(static_cast<uint32_t>(j));
      if (direct[j]) {
        l->set_type(v1::GPU_LINK_NVLINK);
        l->set_count(direct[j]);
      } else if (switch_links) {
        l->set_type(v1::GPU_LINK_NVSWITCH);
        l->set_count(switch_links);
      } else {
        l->set_type(gpus[i].numa_node() == gpus[j].numa_node() ? v1::GPU_LINK_PCIE_HOST
                                                               : v1::GPU_LINK_SYSTEM);
        l->set_count(1);
      }
    }
  }
  for (const auto& [index, why] : Health()) {
    if (index < gpus.size()) gpus[index].set_health(why);
  }
  return gpus;
}

std::map<uint32_t, std::string> Nvml::Health() {
  Api& a = *api_;
  // Drain the event queue without blocking.
  for (int guard = 0; events_ && guard < 1024; ++guard) {
    NvmlEventData ev{};
    int rc = a.event_wait(events_, &ev, 0);
    if (rc == kErrorTimeout) break;
    if (rc != kSuccess) {
      if (rc == kErrorGpuIsLost && ev.device) {
        for (size_t i = 0; i < handles_.size(); ++i) {
          if (handles_[i] == ev.device) xid_[static_cast<uint32_t>(i)] = "fallen off the bus";
        }
      }
      break;
    }
    if (!(ev.event_type & kEventXidCritical)) continue;
    for (size_t i = 0; i < handles_.size(); ++i) {
      if (handles_[i] != ev.device) continue;
      uint32_t xid = static_cast<uint32_t>(ev.event_data);
      std::string what = CriticalXidDescription(xid);
      if (what.empty()) {
        spdlog::info("gpu{}: XID {} (an application error; the GPU stays in service)", i, xid);
      } else if (!xid_.count(static_cast<uint32_t>(i))) {
        xid_[static_cast<uint32_t>(i)] = "XID " + std::to_string(xid) + " (" + what + ")";
      }
    }
  }
  std::map<uint32_t, std::string> out = xid_;
  for (size_t i = 0; i < handles_.size(); ++i) {
    const uint32_t idx = static_cast<uint32_t>(i);
    if (out.count(idx)) continue;
    nvmlDevice_t h = handles_[i];
    if (!h) {
      out[idx] = "fallen off the bus (NVML cannot open it)";
      continue;
    }
    NvmlMemory mem{};
    if (a.memory(h, &mem) == kErrorGpuIsLost) {
      out[idx] = "fallen off the bus";
      continue;
    }
    SmiQueriedGpu q;  // the same rules as for a captured nvidia-smi -q
    unsigned long long ecc = 0;
    if (a.ecc_total && a.ecc_total(h, kUncorrected, kVolatile, &ecc) == kSuccess) {
      q.volatile_uncorrectable_ecc = ecc;
    }
    int pending = 0;
    if (a.retired_pending && a.retired_pending(h, &pending) == kSuccess) {
      q.retired_pages_pending = pending != 0;
    }
    unsigned corr = 0, unc = 0, is_pending = 0, failed = 0;
    if (a.remapped_rows && a.remapped_rows(h, &corr, &unc, &is_pending, &failed) == kSuccess) {
      q.remapped_rows_pending = is_pending != 0;
      q.remapping_failed = failed != 0;
    }
    std::string why = HealthFromQuery(q);
    if (!why.empty()) out[idx] = why;
  }
  return out;
}

}  // namespace muster::agent
