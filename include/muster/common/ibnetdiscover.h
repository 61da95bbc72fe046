// The InfiniBand fabric as `ibnetdiscover` prints it, turned into the `topology` of each node:
// which leaf switches a host's HCAs reach, and which hosts share them. In a rail-optimized fabric
// every HCA of a host goes to a different leaf, so a host's "leaf" is the group of leaves its
// rails use; hosts with the same group are one placement domain. Pure; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster {

struct IbFabric {
  struct Switch {
    std::string guid, name;          // name: the node description without "MF0;" and ":model"
    std::vector<std::string> peers;  // switch GUIDs it links to
    std::vector<std::string> hcas;   // HCA GUIDs it links to
    bool leaf = false;               // links to at least one host HCA (named or not)
  };
  std::map<std::string, Switch> switches;       // by GUID
  std::map<std::string, std::string> hca_host;  // HCA GUID -> host name ("" when unnamed)
  std::map<std::string, bool> aggregation;      // SHARP aggregation nodes (not hosts)
  size_t hca_ports = 0;
  size_t unnamed_hcas = 0;  // "MT4129 ConnectX7 Mellanox Technologies": no host to attach
  size_t aggregation_nodes = 0;

  // Hosts grouped by the set of leaf switches they reach: group name -> (leaves, hosts).
  struct Group {
    std::string name;  // "leafset1", "leafset2", ... in order of the first host name
    std::vector<std::string> leaves, hosts;
  };
  std::vector<Group> Groups() const;
  size_t leaves() const;
  size_t spines() const { return switches.size() - leaves(); }
};

// INVALID_ARGUMENT naming the line for text that is not ibnetdiscover output.
Result<IbFabric> ParseIbnetdiscover(const std::string& text);

// The [[nodes]] entries (names and topology) for every group, with a summary in comments.
std::string IbTopologyConfig(const IbFabric& fabric, const std::string& top = "ib");

}  // namespace muster
