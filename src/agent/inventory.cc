#include "inventory.h"

#include <dlfcn.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "muster/common/strings.h"
#include "nvidia_smi.h"

namespace muster::agent {

namespace fs = std::filesystem;

OsInventory ProbeOs() {
  OsInventory o;
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) == 0) o.hostname = host;
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  o.cpus = n > 0 ? static_cast<uint32_t>(n) : 1;
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    o.memory_mb = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / (1024 * 1024);
  }
  return o;
}

std::string GpuTypeFromModel(const std::string& model) {
  std::vector<std::string> words = Split(model, ' ', true);
  size_t i = 0;
  while (i < words.size() && (words[i] == "NVIDIA" || words[i] == "Tesla" ||
                              words[i] == "GeForce" || words[i] == "Quadro")) {
    ++i;
  }
  if (i >= words.size()) return "gpu";
  std::string w = words[i];
  if ((w == "RTX" || w == "GTX") && i + 1 < words.size()) w += words[i + 1];
  w = w.substr(0, w.find('-'));
  std::string out;
  for (char c : w) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(c));
  }
  return out.empty() ? "gpu" : out;
}

Status ApplyTopoMatrix(const std::vector<std::vector<std::string>>& cells,
                       std::vector<v1::GpuDevice>* gpus) {
  size_t n = gpus->size();
  if (cells.size() != n) {
    return InvalidArgument("topology matrix has " + std::to_string(cells.size()) + " rows for " +
                           std::to_string(n) + " GPUs");
  }
  for (size_t i = 0; i < n; ++i) {
    if (cells[i].size() != n) {
      return InvalidArgument("topology row " + std::to_string(i) + " has " +
                             std::to_string(cells[i].size()) + " cells; expected " +
                             std::to_string(n));
    }
    auto* g = &(*gpus)[i];
    g->clear_links();
    for (size_t j = 0; j < n; ++j) {
      const std::string& c = cells[i][j];
      if (i == j) {
        if (c != "X")
          return InvalidArgument("topology cell (" + std::to_string(i) + "," + std::to_string(j) +
                                 ") must be X");
        continue;
      }
      v1::GpuLink link;
      link.set_peer_index(static_cast<uint32_t>(j));
      link.set_count(1);
      if (StartsWith(c, "NV")) {
        auto k = ParseUint(c.substr(2));
        if (!k) return InvalidArgument("bad NVLink cell '" + c + "'");
        link.set_type(v1::GPU_LINK_NVLINK);
        link.set_count(static_cast<uint32_t>(*k));
      } else if (c == "PIX" || c == "PXB") {
        link.set_type(v1::GPU_LINK_PCIE_SWITCH);
      } else if (c == "PHB" || c == "NODE") {
        link.set_type(v1::GPU_LINK_PCIE_HOST);
      } else if (c == "SYS") {
        link.set_type(v1::GPU_LINK_SYSTEM);
      } else {
        return InvalidArgument("unknown topology cell '" + c +
                               "' (use X, NV<n>, PIX, PXB, PHB, NODE, SYS)");
      }
      *g->add_links() = link;
    }
  }
  return Status::Ok();
}

Result<GpuFixture> ParseGpuFixture(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(source + ":" + std::to_string(e.source().begin.line) + ": " +
                           std::string(e.description()));
  }
  auto err = [&](const toml::node* n, const std::string& key, const std::string& why) {
    int line = n ? static_cast<int>(n->source().begin.line) : 0;
    return InvalidArgument(source + ":" + std::to_string(line) + ": " + key + ": " + why);
  };
  GpuFixture f;
  for (auto&& [k, v] : root) {
    std::string key(k.str());
    if (key != "node" && key != "gpus" && key != "nvidia_smi") {
      return err(&v, key, "unknown key (expected [node], [gpus] or [nvidia_smi])");
    }
  }
  if (const toml::table* node = root["node"].as_table()) {
    for (auto&& [k, v] : *node) {
      std::string key(k.str());
      if ((key != "cpus" && key != "memory_mb") || !v.is_integer() || *v.value<int64_t>() <= 0) {
        return err(&v, "node." + key, "expected cpus or memory_mb as a positive number");
      }
      if (key == "cpus") f.cpus = static_cast<uint32_t>(*v.value<int64_t>());
      if (key == "memory_mb") f.memory_mb = static_cast<uint64_t>(*v.value<int64_t>());
    }
  }
  if (const toml::table* smi = root["nvidia_smi"].as_table()) {
    if (root["gpus"]) return err(smi, "nvidia_smi", "use either [gpus] or [nvidia_smi], not both");
    // Captured outputs, named relative to the fixture file.
    std::string dir = fs::path(source).parent_path().string();
    std::map<std::string, std::string> texts;
    for (auto&& [k, v] : *smi) {
      std::string key(k.str());
      if ((key != "list" && key != "topo" && key != "query") || !v.is_string()) {
        return err(&v, "nvidia_smi." + key,
                   "expected list, topo or query, each the path of a captured output");
      }
      fs::path file(*v.value<std::string>());
      if (file.is_relative() && !dir.empty()) file = fs::path(dir) / file;
      std::ifstream in(file);
      if (!in) return err(&v, "nvidia_smi." + key, "cannot read " + file.string());
      std::stringstream ss;
      ss << in.rdbuf();
      texts[key] = ss.str();
    }
    auto gpus = GpusFromNvidiaSmi(texts["list"], texts["topo"], texts["query"]);
    if (!gpus.ok()) return err(smi, "nvidia_smi", gpus.status().message());
    f.gpus = std::move(*gpus);
    return f;
  }
  const toml::table* g = root["gpus"].as_table();
  if (!g) return f;
  int64_t count = 0, memory_mb = 0, numa_nodes = 1;
  std::string model = "NVIDIA H100 80GB HBM3", type, interconnect = "nvswitch";
  std::vector<std::vector<std::string>> topo;
  for (auto&& [k, v] : *g) {
    std::string key(k.str());
    if (key == "count" || key == "memory_mb" || key == "numa_nodes") {
      int64_t max = key == "memory_mb" ? (int64_t{1} << 30) : 4096;
      if (!v.is_integer() || *v.value<int64_t>() < 0 || *v.value<int64_t>() > max) {
        return err(&v, "gpus." + key, "expected a whole number");
      }
      (key == "count" ? count : key == "memory_mb" ? memory_mb : numa_nodes) = *v.value<int64_t>();
    } else if (key == "model" || key == "type" || key == "interconnect") {
      if (!v.is_string()) return err(&v, "gpus." + key, "expected a string");
      (key == "model" ? model : key == "type" ? type : interconnect) = *v.value<std::string>();
    } else if (key == "topo") {
      const toml::array* rows = v.as_array();
      if (!rows) return err(&v, "gpus.topo", "expected a list of rows like \"X NV18 NV18\"");
      for (const auto& r : *rows) {
        if (!r.is_string()) return err(&r, "gpus.topo", "expected strings");
        topo.push_back(Split(*r.value<std::string>(), ' ', true));
      }
    } else {
      return err(&v, "gpus." + key, "unknown key");
    }
  }
  if (numa_nodes < 1) numa_nodes = 1;
  if (type.empty()) type = GpuTypeFromModel(model);
  for (int64_t i = 0; i < count; ++i) {
    v1::GpuDevice d;
    d.set_index(static_cast<uint32_t>(i));
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-fixture-%04lld", static_cast<long long>(i));
    d.set_uuid(uuid);
    d.set_model(model);
    d.set_type(type);
    d.set_memory_mb(static_cast<uint64_t>(memory_mb));
    d.set_numa_node(static_cast<int32_t>(i * numa_nodes / count));
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02llX:00.0", static_cast<long long>(0x10 + i));
    d.set_pci_bus_id(bus);
    f.gpus.push_back(std::move(d));
  }
  if (!topo.empty()) {
    Status s = ApplyTopoMatrix(topo, &f.gpus);
    if (!s.ok()) return err(g->get("topo"), "gpus.topo", s.message());
    return f;
  }
  // Generated layouts: NVSwitch all-to-all, NVLink pairs (0-1, 2-3, ...), or plain PCIe.
  for (auto& d : f.gpus) {
    for (const auto& peer : f.gpus) {
      if (peer.index() == d.index()) continue;
      v1::GpuLink* l = d.add_links();
      l->set_peer_index(peer.index());
      l->set_count(1);
      if (interconnect == "nvswitch") {
        l->set_type(v1::GPU_LINK_NVSWITCH);
        l->set_count(18);
      } else if (interconnect == "nvlink" && peer.index() / 2 == d.index() / 2) {
        l->set_type(v1::GPU_LINK_NVLINK);
        l->set_count(4);
      } else if (interconnect == "nvlink" || interconnect == "pcie") {
        l->set_type(peer.numa_node() == d.numa_node() ? v1::GPU_LINK_PCIE_HOST
                                                      : v1::GPU_LINK_SYSTEM);
      } else {
        return err(g->get("interconnect"), "gpus.interconnect",
                   "unknown value '" + interconnect + "' (use nvswitch, nvlink or pcie)");
      }
    }
  }
  return f;
}

Result<GpuFixture> LoadGpuFixture(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read GPU fixture " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseGpuFixture(ss.str(), path);
}

// ---------------------------------------------------------------------------------------------
// NVML, loaded at run time. Only the few entry points we need, by their versioned names.
namespace {

using nvmlDevice_t = void*;
constexpr int kNvmlSuccess = 0;
constexpr unsigned kNvlinkMaxLinks = 18;

struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlPciInfo {  // nvmlPciInfo_t (v3 layout)
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

struct Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned*) = nullptr;
  int (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  int (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  int (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  int (*memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  int (*pci)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  int (*link_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  int (*link_remote)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
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

}  // namespace

Result<std::vector<v1::GpuDevice>> ProbeNvml() {
  Nvml n;
  n.lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n.lib) return Unavailable(std::string("NVML not available: ") + ::dlerror());
  bool ok = Sym(n.lib, "nvmlInit_v2", &n.init) && Sym(n.lib, "nvmlShutdown", &n.shutdown) &&
            Sym(n.lib, "nvmlDeviceGetCount_v2", &n.count) &&
            Sym(n.lib, "nvmlDeviceGetHandleByIndex_v2", &n.handle) &&
            Sym(n.lib, "nvmlDeviceGetName", &n.name) && Sym(n.lib, "nvmlDeviceGetUUID", &n.uuid) &&
            Sym(n.lib, "nvmlDeviceGetMemoryInfo", &n.memory) &&
            Sym(n.lib, "nvmlDeviceGetPciInfo_v3", &n.pci);
  Sym(n.lib, "nvmlDeviceGetNvLinkState", &n.link_state);
  Sym(n.lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &n.link_remote);
  if (!ok) {
    ::dlclose(n.lib);
    return Unavailable("NVML library lacks required symbols (driver too old?)");
  }
  if (n.init() != kNvmlSuccess) {
    ::dlclose(n.lib);
    return Unavailable("nvmlInit failed (no NVIDIA driver loaded?)");
  }
  unsigned count = 0;
  std::vector<v1::GpuDevice> gpus;
  std::vector<nvmlDevice_t> handles;
  if (n.count(&count) == kNvmlSuccess) {
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t h = nullptr;
      if (n.handle(i, &h) != kNvmlSuccess) continue;
      v1::GpuDevice d;
      d.set_index(i);
      char buf[256] = {0};
      if (n.name(h, buf, sizeof buf) == kNvmlSuccess) d.set_model(buf);
      std::memset(buf, 0, sizeof buf);
      if (n.uuid(h, buf, sizeof buf) == kNvmlSuccess) d.set_uuid(buf);
      NvmlMemory mem{};
      if (n.memory(h, &mem) == kNvmlSuccess) d.set_memory_mb(mem.total / (1024 * 1024));
      NvmlPciInfo pci{};
      if (n.pci(h, &pci) == kNvmlSuccess) d.set_pci_bus_id(pci.bus_id);
      d.set_numa_node(NumaOfPci(d.pci_bus_id()));
      d.set_type(GpuTypeFromModel(d.model()));
      gpus.push_back(std::move(d));
      handles.push_back(h);
    }
  }
  // NVLink: count active links to each peer GPU; links to a non-GPU end are NVSwitch ports.
  if (n.link_state && n.link_remote) {
    for (size_t i = 0; i < gpus.size(); ++i) {
      std::vector<uint32_t> direct(gpus.size(), 0);
      uint32_t switch_links = 0;
      for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
        int active = 0;
        if (n.link_state(handles[i], link, &active) != kNvmlSuccess || !active) continue;
        NvmlPciInfo remote{};
        if (n.link_remote(handles[i], link, &remote) != kNvmlSuccess) continue;
        bool to_gpu = false;
        for (size_t j = 0; j < gpus.size(); ++j) {
          if (ToLower(gpus[j].pci_bus_id()) == ToLower(remote.bus_id)) {
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
  }
  n.shutdown();
  // The library stays loaded: unloading NVML while the driver holds state is not worth the risk.
  return gpus;
}

}  // namespace muster::agent
