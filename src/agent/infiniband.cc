#include "infiniband.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "muster/common/strings.h"

namespace muster::agent {
namespace {

namespace fs = std::filesystem;

std::string ReadLine(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return std::string(Trim(line));
}

}  // namespace

std::vector<IbDevice> ProbeInfiniband(const std::string& class_dir) {
  std::vector<IbDevice> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(class_dir, ec)) {
    IbDevice d;
    d.name = entry.path().filename().string();
    d.node_guid = ReadLine(entry.path() / "node_guid");
    // "device" links to the PCI function: its name is the bus id.
    fs::path dev = fs::canonical(entry.path() / "device", ec);
    if (!ec && dev.filename().string().find(':') != std::string::npos) {
      d.pci_bus_id = dev.filename().string();
    }
    ec.clear();
    std::string numa = ReadLine(entry.path() / "device" / "numa_node");
    if (auto n = ParseInt(numa)) d.numa = static_cast<int32_t>(*n);
    for (const auto& port : fs::directory_iterator(entry.path() / "ports", ec)) {
      auto num = ParseUint(port.path().filename().string());
      if (!num) continue;
      IbPort p;
      p.port = static_cast<uint32_t>(*num);
      // "4: ACTIVE"
      std::string state = ReadLine(port.path() / "state");
      size_t colon = state.find(':');
      p.state = std::string(Trim(colon == std::string::npos ? state : state.substr(colon + 1)));
      // "200 Gb/sec (4X HDR)"
      std::string rate = ReadLine(port.path() / "rate");
      p.rate_gbps = std::strtod(rate.c_str(), nullptr);
      p.link_layer = ReadLine(port.path() / "link_layer");
      d.ports.push_back(std::move(p));
    }
    ec.clear();
    std::sort(d.ports.begin(), d.ports.end(),
              [](const IbPort& a, const IbPort& b) { return a.port < b.port; });
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(),
            [](const IbDevice& a, const IbDevice& b) { return a.name < b.name; });
  return out;
}

}  // namespace muster::agent
