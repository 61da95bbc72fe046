#include "muster/common/ibnetdiscover.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "muster/common/hostlist.h"
#include "muster/common/strings.h"

namespace muster {
namespace {

// The text between the first pair of double quotes at or after `from`.
std::string Quoted(const std::string& line, size_t from = 0, size_t* end = nullptr) {
  size_t a = line.find('"', from);
  if (a == std::string::npos) return "";
  size_t b = line.find('"', a + 1);
  if (b == std::string::npos) return "";
  if (end) *end = b + 1;
  return line.substr(a + 1, b - a - 1);
}

// "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" -> "A09-P1-IBLEAF-04-04"
std::string SwitchName(std::string desc) {
  size_t semi = desc.find(';');
  if (semi != std::string::npos) desc = desc.substr(semi + 1);
  size_t colon = desc.find(':');
  if (colon != std::string::npos) desc = desc.substr(0, colon);
  return desc;
}

// "a08-p1-dgx-04-c01 mlx5_0" or "... HCA-6" -> the host; anything else (a bare adapter model, a
// SHARP aggregation node) -> "".
std::string HostOfHca(const std::string& desc) {
  std::vector<std::string> w = Split(desc, ' ', true);
  if (w.size() != 2) return "";
  if (StartsWith(w[1], "mlx") || StartsWith(w[1], "HCA") || StartsWith(w[1], "ibp")) return w[0];
  return "";
}

}  // namespace

Result<IbFabric> ParseIbnetdiscover(const std::string& text) {
  IbFabric f;
  std::string current;  // the switch whose port lines follow
  bool in_ca = false;
  std::string ca_guid;
  int line_no = 0;
  bool saw_node = false;
  for (const std::string& raw : Split(text, '\n')) {
    ++line_no;
    std::string line(Trim(raw));
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgument("ibnetdiscover line " + std::to_string(line_no) + ": " + why);
    };
    if (StartsWith(line, "Switch")) {
      size_t end = 0;
      std::string id = Quoted(line, 0, &end);
      if (!StartsWith(id, "S-")) return bad("a Switch line without its \"S-GUID\"");
      IbFabric::Switch& s = f.switches[id.substr(2)];
      s.guid = id.substr(2);
      s.name = SwitchName(Quoted(line, line.find('#', end)));
      if (s.name.empty()) s.name = "S-" + s.guid;
      current = s.guid;
      in_ca = false;
      saw_node = true;
    } else if (StartsWith(line, "Ca")) {
      size_t end = 0;
      std::string id = Quoted(line, 0, &end);
      if (!StartsWith(id, "H-")) return bad("a Ca line without its \"H-GUID\"");
      ca_guid = id.substr(2);
      std::string desc = Quoted(line, line.find('#', end));
      std::string host = HostOfHca(desc);
      if (desc.find("Aggregation Node") != std::string::npos) {
        ++f.aggregation_nodes;
        f.aggregation[ca_guid] = true;
      } else if (host.empty()) {
        ++f.unnamed_hcas;
      }
      f.hca_host[ca_guid] = host;
      current.clear();
      in_ca = true;
      saw_node = true;
    } else if (line[0] == '[') {
      if (in_ca) {
        ++f.hca_ports;
        continue;  // the same link is listed on the switch's side
      }
      if (current.empty()) return bad("a port line outside a Switch or Ca block");
      size_t end = 0;
      std::string peer = Quoted(line, 0, &end);
      if (peer.size() < 3) return bad("a port line without its peer \"S-...\" or \"H-...\"");
      IbFabric::Switch& s = f.switches[current];
      if (StartsWith(peer, "S-")) {
        s.peers.push_back(peer.substr(2));
      } else if (StartsWith(peer, "H-")) {
        s.hcas.push_back(peer.substr(2));
      }
    } else if (line.find('=') != std::string::npos) {
      continue;  // vendid=, devid=, sysimgguid=, switchguid=, caguid=
    } else {
      return bad("not ibnetdiscover output: '" + line.substr(0, 60) + "'");
    }
  }
  if (!saw_node) return InvalidArgument("no Switch or Ca in the ibnetdiscover output");
  for (auto& [guid, s] : f.switches) {
    for (const auto& h : s.hcas) {
      if (f.hca_host.count(h) && !f.aggregation.count(h)) s.leaf = true;
    }
  }
  return f;
}

size_t IbFabric::leaves() const {
  size_t n = 0;
  for (const auto& [g, s] : switches) n += s.leaf;
  return n;
}

std::vector<IbFabric::Group> IbFabric::Groups() const {
  std::map<std::string, std::set<std::string>> host_leaves;
  for (const auto& [guid, s] : switches) {
    if (!s.leaf) continue;
    for (const auto& h : s.hcas) {
      auto it = hca_host.find(h);
      if (it != hca_host.end() && !it->second.empty()) host_leaves[it->second].insert(s.name);
    }
  }
  std::map<std::set<std::string>, std::vector<std::string>> by_set;
  for (const auto& [host, leaves] : host_leaves) by_set[leaves].push_back(host);
  std::vector<Group> groups;
  for (const auto& [leaves, hosts] : by_set) {
    Group g;
    g.leaves.assign(leaves.begin(), leaves.end());
    g.hosts = hosts;
    groups.push_back(std::move(g));
  }
  std::sort(groups.begin(), groups.end(),
            [](const Group& a, const Group& b) { return a.hosts.front() < b.hosts.front(); });
  for (size_t i = 0; i < groups.size(); ++i) groups[i].name = "leafset" + std::to_string(i + 1);
  return groups;
}

std::string IbTopologyConfig(const IbFabric& f, const std::string& top) {
  std::ostringstream o;
  std::vector<IbFabric::Group> groups = f.Groups();
  size_t hosts = 0;
  for (const auto& g : groups) hosts += g.hosts.size();
  o << "# From ibnetdiscover: " << f.switches.size() << " switches (" << f.leaves()
    << " leaves with hosts, " << f.spines() << " above them), " << hosts << " hosts in "
    << groups.size() << " leaf sets.\n";
  if (f.unnamed_hcas > 0) {
    o << "# " << f.unnamed_hcas
      << " HCA(s) had no host name in their node description and were left out; set them with "
         "`ibstat`/`smpquery nodedesc` or place those hosts by hand.\n";
  }
  o << "# Hosts with the same leaf switches share a placement domain; a gang placed inside one\n"
       "# crosses no spine. Add cpus, memory_mb, gpus and gpu_type (musterd --probe prints\n"
       "# them) to each entry.\n";
  for (const auto& g : groups) {
    o << "\n# " << g.name << ": " << g.hosts.size() << " hosts on " << g.leaves.size()
      << " leaf switch(es): " << Join(g.leaves, ", ") << "\n";
    o << "[[nodes]]\nnames = \"" << CompressHostlist(g.hosts) << "\"\ntopology = \"" << top << "/"
      << g.name << "\"\n";
  }
  return o.str();
}

}  // namespace muster
