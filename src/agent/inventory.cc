#include "inventory.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "muster/common/strings.h"
#include "muster/common/toml.h"
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
  MUSTER_ASSIGN_OR_RETURN(toml::table root, ParseToml(text, source));
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
  int64_t count = 0, memory_mb = 0, numa_nodes = 1, sockets = 0;
  std::string model = "NVIDIA H100 80GB HBM3", type, interconnect = "nvswitch";
  std::vector<std::vector<std::string>> topo;
  for (auto&& [k, v] : *g) {
    std::string key(k.str());
    if (key == "count" || key == "memory_mb" || key == "numa_nodes" || key == "sockets") {
      int64_t max = key == "memory_mb" ? (int64_t{1} << 30) : 4096;
      if (!v.is_integer() || *v.value<int64_t>() < 0 || *v.value<int64_t>() > max) {
        return err(&v, "gpus." + key, "expected a whole number");
      }
      (key == "count"       ? count
       : key == "memory_mb" ? memory_mb
       : key == "sockets"   ? sockets
                            : numa_nodes) = *v.value<int64_t>();
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
    // Spread over `sockets` as over the NUMA nodes; without it, a socket per NUMA node.
    d.set_socket(sockets > 0 ? static_cast<uint32_t>(i * sockets / count)
                             : static_cast<uint32_t>(d.numa_node()));
    d.set_minor_number(static_cast<int32_t>(i));
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

Result<std::map<uint32_t, std::string>> ParseGpuFaults(const std::string& text) {
  std::map<uint32_t, std::string> faults;
  int line_no = 0;
  for (const std::string& raw : Split(text, '\n')) {
    ++line_no;
    std::string line(Trim(raw.substr(0, raw.find('#'))));
    if (line.empty()) continue;
    std::vector<std::string> w = Split(line, ' ', true);
    auto bad = [&](const std::string& why) {
      return InvalidArgument("GPU fault line " + std::to_string(line_no) + " '" + line +
                             "': " + why +
                             " (expected 'INDEX xid N', 'INDEX ecc N', 'INDEX lost' or "
                             "'INDEX remap-pending')");
    };
    auto index = w.empty() ? std::nullopt : ParseUint(w[0]);
    if (!index || w.size() < 2) return bad("no GPU index");
    const uint32_t gpu = static_cast<uint32_t>(*index);
    std::string why;
    if (w[1] == "xid" && w.size() == 3) {
      auto xid = ParseUint(w[2]);
      if (!xid) return bad("bad XID number");
      std::string what = CriticalXidDescription(static_cast<uint32_t>(*xid));
      if (what.empty()) continue;  // an application XID: logged by NVML mode, never a fault
      why = "XID " + w[2] + " (" + what + ")";
    } else if (w[1] == "ecc" && w.size() == 3) {
      auto n = ParseUint(w[2]);
      if (!n || *n == 0) return bad("bad error count");
      why = w[2] + " uncorrectable ECC error(s)";
    } else if (w[1] == "lost" && w.size() == 2) {
      why = "fallen off the bus";
    } else if (w[1] == "remap-pending" && w.size() == 2) {
      why = "row remapping pending (the GPU needs a reset)";
    } else {
      return bad("unknown fault");
    }
    if (!faults.count(gpu)) faults[gpu] = why;  // the first fault of a GPU is its reason
  }
  return faults;
}

std::string DescribeInventory(const v1::NodeInventory& inv) {
  std::ostringstream o;
  o << "node " << inv.name() << ": cpus=" << inv.cpus() << " memory_mb=" << inv.memory_mb()
    << " gpus=" << inv.gpus_size() << " gpu_source=" << inv.gpu_source()
    << " packages=" << inv.packages() << " cores=" << inv.cores() << " threads=" << inv.threads()
    << " topology_source=\"" << inv.topology_source() << "\"\n";
  for (const auto& n : inv.numa_nodes()) {
    o << "numa" << n.os_index() << ": cpus=" << n.cpus_size() << "\n";
  }
  std::map<std::string, uint32_t> types;
  std::map<std::string, uint32_t> slices;
  for (const auto& g : inv.gpus()) {
    o << "gpu" << g.index() << ": uuid=" << g.uuid() << " model=\"" << g.model()
      << "\" type=" << g.type() << " memory_mb=" << g.memory_mb() << " pci=" << g.pci_bus_id()
      << " numa=" << g.numa_node()
      << " socket=" << (g.has_socket() ? std::to_string(g.socket()) : std::string("?"))
      << " minor=" << g.minor_number() << " mig=" << (g.mig_enabled() ? "on" : "off");
    if (!g.fabric_state().empty()) {
      o << " fabric=\"" << g.fabric_state() << "\" clique=" << g.fabric_clique_id();
      if (!g.fabric_cluster_uuid().empty()) o << " cluster_uuid=" << g.fabric_cluster_uuid();
    }
    o << " health=\"" << (g.health().empty() ? "ok" : g.health()) << "\"\n";
    if (g.links_size() > 0) {
      o << "gpu" << g.index() << " links:";
      for (const auto& l : g.links()) {
        o << " gpu" << l.peer_index() << "=";
        switch (l.type()) {
          case v1::GPU_LINK_NVLINK:
            o << "NV" << l.count();
            break;
          case v1::GPU_LINK_NVSWITCH:
            o << "NVSwitch" << l.count();
            break;
          case v1::GPU_LINK_PCIE_SWITCH:
            o << "PCIeSwitch";
            break;
          case v1::GPU_LINK_PCIE_HOST:
            o << "PCIeHost";
            break;
          case v1::GPU_LINK_SYSTEM:
            o << "SYS";
            break;
          default:
            o << "?";
        }
      }
      o << "\n";
    }
    for (const auto& m : g.mig_devices()) {
      o << "gpu" << g.index() << " mig" << m.index() << ": uuid=" << m.uuid()
        << " profile=" << m.profile() << " memory_mb=" << m.memory_mb() << "\n";
      ++slices[m.profile()];
    }
    if (!g.mig_enabled()) ++types[g.type()];
  }
  for (const auto& h : inv.hcas()) {
    o << "hca " << h.name() << ": pci=" << h.pci_bus_id() << " numa=" << h.numa_node()
      << " guid=" << h.node_guid();
    for (const auto& p : h.ports()) {
      o << " port" << p.port() << "=" << p.state() << "/" << p.rate_gbps() << "Gbps/"
        << p.link_layer();
    }
    o << "\n";
  }
  o << "\n# The configuration entry for this node (put it in muster.toml):\n[[nodes]]\nnames = \""
    << inv.name() << "\"\ncpus = " << inv.cpus() << "\nmemory_mb = " << inv.memory_mb() << "\n";
  if (!types.empty()) {
    auto most = std::max_element(types.begin(), types.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    o << "gpus = " << most->second << "\ngpu_type = \"" << most->first << "\"\n";
    if (types.size() > 1) o << "# (this node has GPUs of several types; one type per node)\n";
  }
  if (!slices.empty()) {
    o << "mig = [";
    bool first = true;
    for (const auto& [profile, n] : slices) {
      o << (first ? "" : ", ") << "\"" << profile << ":" << n << "\"";
      first = false;
    }
    o << "]\n";
  }
  return o.str();
}

}  // namespace muster::agent
