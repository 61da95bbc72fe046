#include "nvidia_smi.h"

#include <cctype>
#include <map>

#include "inventory.h"
#include "muster/common/strings.h"

namespace muster::agent {
namespace {

std::string TrimS(std::string_view s) { return std::string(Trim(s)); }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

// "12gb" in a MIG profile name -> MiB.
uint64_t MigProfileMemoryMb(const std::string& profile) {
  size_t dot = profile.find('.');
  if (dot == std::string::npos) return 0;
  std::string rest = ToLower(profile.substr(dot + 1));
  size_t gb = rest.find("gb");
  if (gb == std::string::npos) return 0;
  auto n = ParseUint(rest.substr(0, gb));
  return n ? *n * 1024 : 0;
}

uint64_t LeadingNumber(const std::string& s) {
  uint64_t n = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

Result<std::vector<SmiListedGpu>> ParseNvidiaSmiList(const std::string& text) {
  std::vector<SmiListedGpu> gpus;
  int line_no = 0;
  for (const std::string& raw : Lines(text)) {
    ++line_no;
    std::string line = TrimS(raw);
    if (line.empty()) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgument("nvidia-smi -L line " + std::to_string(line_no) + ": " + why + ": '" +
                             line + "'");
    };
    size_t uuid_at = line.rfind("(UUID: ");
    if (uuid_at == std::string::npos || line.back() != ')') return bad("no (UUID: ...)");
    std::string uuid = line.substr(uuid_at + 7, line.size() - uuid_at - 8);
    if (StartsWith(line, "GPU ")) {
      size_t colon = line.find(':');
      auto index = ParseUint(line.substr(4, colon == std::string::npos ? 0 : colon - 4));
      if (!index || colon > uuid_at) return bad("expected 'GPU N: NAME (UUID: ...)'");
      SmiListedGpu g;
      g.index = static_cast<uint32_t>(*index);
      g.model = TrimS(line.substr(colon + 1, uuid_at - colon - 1));
      g.uuid = uuid;
      if (g.index != gpus.size()) return bad("GPU indices must count up from 0");
      gpus.push_back(std::move(g));
    } else if (StartsWith(line, "MIG ")) {
      if (gpus.empty()) return bad("a MIG device before any GPU");
      // "MIG 1g.12gb     Device  0: (UUID: MIG-...)"
      std::vector<std::string> words = Split(line.substr(0, uuid_at), ' ', true);
      if (words.size() < 4 || words[2] != "Device") return bad("expected 'MIG PROFILE Device N:'");
      std::string num = words[3];
      if (!num.empty() && num.back() == ':') num.pop_back();
      auto index = ParseUint(num);
      if (!index) return bad("bad MIG device number");
      v1::MigDevice m;
      m.set_index(static_cast<uint32_t>(*index));
      m.set_uuid(uuid);
      m.set_profile(words[1]);
      m.set_memory_mb(MigProfileMemoryMb(words[1]));
      gpus.back().migs.push_back(std::move(m));
    } else {
      return bad("expected a GPU or MIG line");
    }
  }
  return gpus;
}

Result<SmiTopology> ParseNvidiaSmiTopo(const std::string& text) {
  std::vector<std::string> lines = Lines(text);
  size_t i = 0;
  while (i < lines.size() && TrimS(lines[i]).empty()) ++i;
  if (i == lines.size() || lines[i].empty() || lines[i][0] != '\t') {
    return InvalidArgument("nvidia-smi topo: the first line must be the tab-separated header");
  }
  std::vector<std::string> header = Split(lines[i], '\t', false);
  std::map<std::string, size_t> column;
  std::vector<std::string> gpu_cols, nic_cols;
  for (size_t c = 1; c < header.size(); ++c) {
    std::string name = TrimS(header[c]);
    column[name] = c;
    if (StartsWith(name, "GPU") && ParseUint(name.substr(3))) {
      gpu_cols.push_back(name);
    } else if (!name.empty() && name != "CPU Affinity" && name != "NUMA Affinity" &&
               name != "GPU NUMA ID") {
      nic_cols.push_back(name);
    }
  }
  if (gpu_cols.empty()) return InvalidArgument("nvidia-smi topo: no GPU columns in the header");
  const size_t ngpu = gpu_cols.size();
  SmiTopology t;
  t.gpu_cells.resize(ngpu);
  t.cpu_affinity.resize(ngpu);
  t.numa_affinity.assign(ngpu, -1);
  t.nics = nic_cols;
  t.nic_cells.resize(nic_cols.size());
  std::vector<bool> seen(ngpu, false);
  for (++i; i < lines.size() && !TrimS(lines[i]).empty(); ++i) {
    std::vector<std::string> f = Split(lines[i], '\t', false);
    std::string row = TrimS(f[0]);
    auto cell = [&](const std::string& col) -> std::string {
      auto it = column.find(col);
      return it != column.end() && it->second < f.size() ? TrimS(f[it->second]) : "";
    };
    auto bad = [&](const std::string& why) {
      return InvalidArgument("nvidia-smi topo line " + std::to_string(i + 1) + " (" + row +
                             "): " + why);
    };
    std::vector<std::string> cells;
    for (const auto& g : gpu_cols) {
      std::string c = cell(g);
      if (c.empty()) return bad("no cell for " + g);
      cells.push_back(c);
    }
    size_t g = 0;
    while (g < ngpu && gpu_cols[g] != row) ++g;
    if (g < ngpu) {
      t.gpu_cells[g] = std::move(cells);
      t.cpu_affinity[g] = cell("CPU Affinity");
      std::string numa = cell("NUMA Affinity");
      if (auto n = ParseUint(numa)) t.numa_affinity[g] = static_cast<int>(*n);
      seen[g] = true;
      continue;
    }
    size_t n = 0;
    while (n < nic_cols.size() && nic_cols[n] != row) ++n;
    if (n == nic_cols.size()) return bad("a row with no matching column");
    t.nic_cells[n] = std::move(cells);
  }
  for (size_t g = 0; g < ngpu; ++g) {
    if (!seen[g]) return InvalidArgument("nvidia-smi topo: no row for " + gpu_cols[g]);
  }
  // "NIC Legend:" maps NIC0.. to device names (newer drivers); older ones name them directly.
  for (; i < lines.size(); ++i) {
    if (TrimS(lines[i]) != "NIC Legend:") continue;
    for (++i; i < lines.size(); ++i) {
      std::string l = TrimS(lines[i]);
      size_t colon = l.find(':');
      if (l.empty() || colon == std::string::npos) continue;
      std::string key = l.substr(0, colon), name = TrimS(l.substr(colon + 1));
      for (auto& nic : t.nics) {
        if (nic == key) nic = name;
      }
    }
  }
  return t;
}

Result<std::vector<SmiQueriedGpu>> ParseNvidiaSmiQuery(const std::string& text) {
  std::vector<SmiQueriedGpu> gpus;
  std::vector<std::string> path;  // section names by indent level (4 blanks each)
  int line_no = 0;
  for (const std::string& raw : Lines(text)) {
    ++line_no;
    std::string line = raw;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.empty()) continue;
    size_t indent = line.find_first_not_of(' ');
    size_t level = indent / 4;
    std::string body = line.substr(indent);
    if (level == 0) {
      path.clear();
      if (StartsWith(body, "GPU ") && body.find(" : ") == std::string::npos) {
        SmiQueriedGpu g;
        g.pci_bus_id = TrimS(body.substr(4));
        gpus.push_back(std::move(g));
      }
      continue;
    }
    if (gpus.empty()) continue;  // the log header (driver version, ...)
    path.resize(std::min(path.size(), level - 1));
    size_t sep = body.find(" : ");
    if (sep == std::string::npos) {
      if (body.back() == ':') body.pop_back();
      path.push_back(TrimS(body));
      continue;
    }
    std::string key = TrimS(body.substr(0, sep)), value = TrimS(body.substr(sep + 3));
    std::string section = path.empty() ? "" : path[0];
    std::string full;
    for (const auto& p : path) full += p + "/";
    full += key;
    SmiQueriedGpu& g = gpus.back();
    const bool yes = value == "Yes";
    if (full == "Product Name") {
      g.model = value;
    } else if (full == "GPU UUID") {
      g.uuid = value;
    } else if (full == "Minor Number") {
      if (auto n = ParseUint(value)) g.minor_number = static_cast<int>(*n);
    } else if (full == "MIG Mode/Current") {
      g.mig_enabled = value == "Enabled";
    } else if (full == "FB Memory Usage/Total") {
      g.memory_mb = LeadingNumber(value);
    } else if (StartsWith(full, "ECC Errors/Volatile/") &&
               (key.find("Uncorrectable") != std::string::npos ||
                (full.find("/Double Bit/") != std::string::npos && key == "Total"))) {
      g.volatile_uncorrectable_ecc += LeadingNumber(value);
    } else if (section == "Retired Pages" && key.find("Pending") != std::string::npos) {
      g.retired_pages_pending = g.retired_pages_pending || yes;
    } else if (full == "Remapped Rows/Pending") {
      g.remapped_rows_pending = yes;
    } else if (full == "Remapped Rows/Remapping Failure Occurred") {
      g.remapping_failed = yes;
    } else if (full == "GPU Reset Status/Reset Required") {
      g.reset_required = yes;
    } else if (full == "Fabric/State") {
      g.fabric_state = value == "N/A" ? "" : value;
    } else if (full == "Fabric/ClusterUUID" || full == "Fabric/Cluster UUID") {
      g.fabric_cluster_uuid = value == "N/A" ? "" : value;
    } else if (full == "Fabric/CliqueId" || full == "Fabric/Clique ID") {
      if (auto n = ParseUint(value)) g.fabric_clique_id = static_cast<uint32_t>(*n);
    }
  }
  if (gpus.empty() && TrimS(text).size() > 0) {
    return InvalidArgument("nvidia-smi -q: no 'GPU <bus id>' section found");
  }
  return gpus;
}

std::string HealthFromQuery(const SmiQueriedGpu& q) {
  if (q.volatile_uncorrectable_ecc > 0) {
    return std::to_string(q.volatile_uncorrectable_ecc) + " uncorrectable ECC error(s)";
  }
  if (q.remapping_failed) return "row remapping failed";
  if (q.remapped_rows_pending) return "row remapping pending (the GPU needs a reset)";
  if (q.retired_pages_pending) return "page retirement pending (the GPU needs a reset)";
  if (q.reset_required) return "the GPU needs a reset";
  return "";
}

Result<std::vector<v1::GpuDevice>> GpusFromNvidiaSmi(const std::string& list_text,
                                                     const std::string& topo_text,
                                                     const std::string& query_text) {
  std::vector<SmiListedGpu> listed;
  std::vector<SmiQueriedGpu> queried;
  SmiTopology topo;
  bool have_topo = !TrimS(topo_text).empty();
  if (!TrimS(list_text).empty()) {
    MUSTER_ASSIGN_OR_RETURN(listed, ParseNvidiaSmiList(list_text));
  }
  if (!TrimS(query_text).empty()) {
    MUSTER_ASSIGN_OR_RETURN(queried, ParseNvidiaSmiQuery(query_text));
  }
  if (have_topo) {
    MUSTER_ASSIGN_OR_RETURN(topo, ParseNvidiaSmiTopo(topo_text));
  }
  size_t count = !listed.empty()    ? listed.size()
                 : !queried.empty() ? queried.size()
                                    : topo.gpu_cells.size();
  auto disagree = [&](const char* what, size_t n) {
    return InvalidArgument(std::string("the captures disagree: ") + what + " shows " +
                           std::to_string(n) + " GPUs, the others " + std::to_string(count));
  };
  if (!queried.empty() && queried.size() != count) return disagree("nvidia-smi -q", queried.size());
  if (have_topo && topo.gpu_cells.size() != count) {
    return disagree("nvidia-smi topo -m", topo.gpu_cells.size());
  }
  std::vector<v1::GpuDevice> gpus(count);
  for (size_t i = 0; i < count; ++i) {
    v1::GpuDevice& d = gpus[i];
    d.set_index(static_cast<uint32_t>(i));
    d.set_numa_node(-1);
    d.set_minor_number(-1);
    if (i < queried.size()) {
      const SmiQueriedGpu& q = queried[i];
      d.set_model(q.model);
      d.set_uuid(q.uuid);
      d.set_pci_bus_id(q.pci_bus_id);
      d.set_memory_mb(q.memory_mb);
      d.set_minor_number(q.minor_number);
      d.set_mig_enabled(q.mig_enabled);
      d.set_fabric_state(q.fabric_state);
      d.set_fabric_cluster_uuid(q.fabric_cluster_uuid);
      d.set_fabric_clique_id(q.fabric_clique_id);
      d.set_health(HealthFromQuery(q));
    }
    if (i < listed.size()) {
      const SmiListedGpu& l = listed[i];
      if (!d.uuid().empty() && d.uuid() != l.uuid) {
        return InvalidArgument("the captures disagree on GPU " + std::to_string(i) + "'s UUID");
      }
      d.set_model(l.model);
      d.set_uuid(l.uuid);
      for (const auto& m : l.migs) *d.add_mig_devices() = m;
      if (!l.migs.empty()) d.set_mig_enabled(true);
    }
    if (have_topo) {
      d.set_numa_node(topo.numa_affinity[i]);
      d.set_cpu_affinity(topo.cpu_affinity[i]);
    }
    d.set_type(GpuTypeFromModel(d.model()));
  }
  if (have_topo) MUSTER_RETURN_IF_ERROR(ApplyTopoMatrix(topo.gpu_cells, &gpus));
  return gpus;
}

std::string CriticalXidDescription(uint32_t xid) {
  switch (xid) {
    case 48:
      return "double-bit ECC error";
    case 61:
      return "internal micro-controller breakpoint";
    case 62:
      return "internal micro-controller halt";
    case 63:
      return "ECC page retirement or row remapping recorded";
    case 64:
      return "ECC page retirement or row remapping failed";
    case 74:
      return "NVLink error";
    case 79:
      return "fallen off the bus";
    case 92:
      return "high single-bit ECC error rate";
    case 94:
      return "contained ECC error";
    case 95:
      return "uncontained ECC error";
    case 119:
      return "GSP RPC timeout";
    case 120:
      return "GSP error";
    case 140:
      return "unrecovered ECC error";
    default:
      return "";
  }
}

}  // namespace muster::agent
