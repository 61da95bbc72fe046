// Choosing whom to preempt. Pure, like the rest of the core: the running jobs a preemptor may
// push aside come in, the victims and where the preemptor would then start go out.
#pragma once

#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/core/types.h"

namespace muster::core {

// A running job the preemptor's QoS (or partition tier) may preempt.
struct PreemptCandidate {
  JobId job = 0;
  Placement placement;       // what it holds, unit by unit
  int64_t priority = 0;      // lower is taken first
  TimeMs work_since_ms = 0;  // its run's start (or last checkpoint): later means less work lost
};

struct PreemptionPlan {
  std::vector<JobId> victims;    // whole jobs, cheapest first
  std::string partition;         // where the preemptor then starts
  std::vector<NodeIndex> nodes;  // on these nodes, ascending
};

// The cheapest set of whole candidate jobs whose end lets `request` start now, topology limits
// included (a gang that must sit under one leaf or NVLink domain gets nodes there). Candidates are
// preferred by lower priority, then least work lost (latest work_since_ms), then the higher job
// id; a node is freed by the fewest, most preferred jobs on it, and the gang takes the nodes that
// cost least. FAILED_PRECONDITION when no set of candidates lets it start (nothing is to be
// preempted then), INVALID_ARGUMENT for a request it does not plan for (--nodelist).
Result<PreemptionPlan> PlanPreemption(const JobRequest& request, const ClusterView& view,
                                      const std::vector<PreemptCandidate>& candidates);

}  // namespace muster::core
