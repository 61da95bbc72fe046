#include "muster/common/cpu_topology.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>

#include "muster/common/strings.h"

namespace muster {
namespace {

constexpr uint32_t kMaxCpuId = 65535;

// A small sysfs file in one read; nullopt when it cannot be opened.
std::optional<std::string> ReadSmall(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (ssize_t n; out.size() < (1u << 16) && (n = ::read(fd, buf, sizeof buf)) > 0;) {
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::optional<uint32_t> ReadNumber(const std::string& path) {
  auto text = ReadSmall(path);
  if (!text) return std::nullopt;
  auto n = ParseUint(Trim(*text));
  if (!n || *n > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(*n);
}

}  // namespace

const CpuTopology::Cpu* CpuTopology::Find(uint32_t id) const {
  auto it = std::lower_bound(cpus.begin(), cpus.end(), id,
                             [](const Cpu& c, uint32_t v) { return c.id < v; });
  return it != cpus.end() && it->id == id ? &*it : nullptr;
}

Result<std::vector<uint32_t>> ParseCpuList(std::string_view text) {
  const std::string whole(Trim(text));
  std::vector<uint32_t> ids;
  for (const std::string& item : Split(whole, ',', true)) {
    const size_t dash = item.find('-');
    auto lo = ParseUint(item.substr(0, dash));
    auto hi = dash == std::string::npos ? lo : ParseUint(item.substr(dash + 1));
    if (!lo || !hi || *lo > *hi || *hi > kMaxCpuId) {
      return InvalidArgument("'" + whole + "' is not a CPU list (such as 0-3,8): bad item '" +
                             item + "'");
    }
    for (uint64_t id = *lo; id <= *hi; ++id) ids.push_back(static_cast<uint32_t>(id));
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::string FormatCpuList(const std::vector<uint32_t>& ids) {
  std::vector<uint32_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(sorted[i]);
    if (j > i) out += "-" + std::to_string(sorted[j]);
    i = j + 1;
  }
  return out;
}

Result<CpuTopology> ReadCpuTopology(const std::string& sysfs) {
  const std::string cpu_dir = sysfs + "/devices/system/cpu/";
  auto online_text = ReadSmall(cpu_dir + "online");
  if (!online_text) return NotFound("cannot read " + cpu_dir + "online: which CPUs are online");
  MUSTER_ASSIGN_OR_RETURN(std::vector<uint32_t> online, ParseCpuList(*online_text));
  // NUMA nodes: each node's cpulist names its CPUs.
  std::map<uint32_t, uint32_t> ldom_of;
  const std::string node_dir = sysfs + "/devices/system/node/";
  if (DIR* d = ::opendir(node_dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (!StartsWith(name, "node")) continue;
      auto n = ParseUint(std::string_view(name).substr(4));
      if (!n || *n > kMaxCpuId) continue;
      auto list = ReadSmall(node_dir + name + "/cpulist");
      if (!list) continue;
      auto ids = ParseCpuList(*list);
      if (!ids.ok()) continue;
      for (uint32_t id : *ids) ldom_of[id] = static_cast<uint32_t>(*n);
    }
    ::closedir(d);
  }
  CpuTopology t;
  for (uint32_t id : online) {
    CpuTopology::Cpu c;
    c.id = id;
    const std::string topo = cpu_dir + "cpu" + std::to_string(id) + "/topology/";
    auto socket = ReadNumber(topo + "physical_package_id");
    c.socket = socket.value_or(0);
    // core_id is unique only within a die on some multi-die CPUs: a core is named by the lowest
    // of its threads (core_cpus_list, thread_siblings_list before Linux 5.7), else by core_id.
    std::optional<uint32_t> core;
    for (const char* siblings : {"core_cpus_list", "thread_siblings_list"}) {
      auto text = ReadSmall(topo + siblings);
      if (!text) continue;
      auto ids = ParseCpuList(*text);
      if (ids.ok() && !ids->empty()) {
        core = ids->front();
        break;
      }
    }
    if (!core) core = ReadNumber(topo + "core_id");
    c.core = core ? *core : id;
    auto ldom = ldom_of.find(id);
    c.ldom = ldom != ldom_of.end() ? ldom->second : c.socket;
    t.cpus.push_back(c);
  }
  return t;
}

}  // namespace muster
