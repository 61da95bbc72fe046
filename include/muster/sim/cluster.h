// The cluster a replay runs on when the user gives its shape rather than a muster.toml: N nodes
// of the same kind, in leaves of L nodes (and, where asked, NVLink domains of D nodes), one
// partition holding them all.
#pragma once

#include <cstdint>
#include <string>

#include "muster/common/config.h"
#include "muster/common/status.h"

namespace muster::sim {

struct ClusterShape {
  uint32_t nodes = 0;
  uint32_t cpus_per_node = 1;
  uint32_t gpus_per_node = 0;
  std::string gpu_type = "gpu";
  uint64_t memory_mb = 1024;
  uint32_t leaf_size = 0;      // nodes under one leaf switch; 0: no topology
  uint32_t nvlink_domain = 0;  // nodes in one NVLink domain; 0: none
};

inline constexpr uint32_t kMaxShapeNodes = 1'000'000;

// The config's TOML text (what `muster-sim --print-config` shows, a start for a site's own).
std::string ShapeToToml(const ClusterShape& shape);
// Parsed, as the controller would load it. INVALID_ARGUMENT for an empty cluster.
Result<Config> ShapeToConfig(const ClusterShape& shape);

}  // namespace muster::sim
