// Why one job's gang does not start: every node of each candidate partition judged against one
// slot of the job, told as counts by cause (a 10,000-node partition is a few lines), plus the
// gang-level verdicts. Pure, as the rest of the core.
#pragma once

#include <string>
#include <vector>

#include "muster/core/types.h"

namespace muster::core {

enum class NodeVerdict {
  kFitsNow,
  kBusy,
  kUnavailable,
  kExcluded,
  kLacksFeatures,
  kTooSmall,
  kReserved,  // an advance reservation the job is not in keeps it while the job would run
};
const char* NodeVerdictName(NodeVerdict v);  // "fits_now", "busy", "reserved", ...

struct NodeGroup {
  NodeVerdict verdict = NodeVerdict::kFitsNow;
  std::string cause;               // "too few free GPUs (needs 8)"; "" for kFitsNow
  std::vector<std::string> nodes;  // all of them, in the partition's order
};

struct PartitionExplanation {
  std::string partition;
  uint32_t nodes = 0;             // in the partition
  uint32_t needed = 0;            // the smallest gang the job accepts
  uint32_t fit_now = 0;           // nodes that could take one slot now
  std::vector<NodeGroup> groups;  // kFitsNow first, then the largest groups
  std::string gang_now;           // "" when the whole gang fits now; else why not
  std::string never;              // "" when it can run here some day; else what to change
};

// One entry per partition of request.partitions that exists in the view.
std::vector<PartitionExplanation> ExplainPlacement(const JobRequest& request,
                                                   const ClusterView& view, TimeMs now);

}  // namespace muster::core
