#include "muster/sim/cluster.h"

#include <algorithm>

namespace muster::sim {

std::string ShapeToToml(const ClusterShape& s) {
  std::string t = "cluster_name = \"sim\"\n";
  const uint32_t width = std::to_string(std::max<uint32_t>(s.nodes, 1)).size();
  auto name = [&](uint64_t i) {
    std::string n = std::to_string(i);
    return std::string(width - n.size(), '0') + n;
  };
  // One [[nodes]] entry per run of nodes that share their leaf and domain.
  const uint32_t leaf = s.leaf_size ? s.leaf_size : s.nodes;
  const uint32_t domain = s.nvlink_domain ? s.nvlink_domain : s.nodes;
  // 64-bit: the last node's number plus one must not wrap.
  uint64_t first = 1;
  while (first <= s.nodes) {
    const uint64_t i0 = first - 1;
    const uint64_t leaf_end = (i0 / leaf + 1) * leaf;
    const uint64_t domain_end = (i0 / domain + 1) * domain;
    const uint64_t last = std::min<uint64_t>({s.nodes, leaf_end, domain_end});
    t += "[[nodes]]\nnames = \"n[" + name(first) + "-" + name(last) + "]\"\n";
    t += "cpus = " + std::to_string(s.cpus_per_node) + "\n";
    t += "memory_mb = " + std::to_string(s.memory_mb) + "\n";
    if (s.gpus_per_node > 0) {
      t += "gpus = " + std::to_string(s.gpus_per_node) + "\n";
      t += "gpu_type = \"" + s.gpu_type + "\"\n";
    }
    if (s.leaf_size) {
      t += "topology = \"spine" + std::to_string(i0 / (leaf * 16) + 1) + "/leaf" +
           std::to_string(i0 / leaf + 1) + "\"\n";
    }
    if (s.nvlink_domain) t += "nvlink_domain = \"nvl" + std::to_string(i0 / domain + 1) + "\"\n";
    first = last + 1;
  }
  t += "[[partition]]\nname = \"sim\"\nnodes = \"n[" + name(1) + "-" + name(s.nodes) +
       "]\"\ndefault = true\n";
  return t;
}

Result<Config> ShapeToConfig(const ClusterShape& s) {
  if (s.nodes == 0 || s.cpus_per_node == 0) {
    return InvalidArgument("the cluster needs at least one node with at least one CPU");
  }
  if (s.nodes > kMaxShapeNodes) {
    return InvalidArgument("at most " + std::to_string(kMaxShapeNodes) + " nodes");
  }
  return ParseConfig(ShapeToToml(s), "muster-sim cluster");
}

}  // namespace muster::sim
