// The first thing done with a request: every size in it checked against job_limits.h before any
// other work touches it, so that no request, however large, holds the strand for long or makes
// the controller or an agent allocate what the user chose.
#pragma once

#include <cstddef>

#include "muster/common/status.h"
#include "muster/v1/common.pb.h"

namespace muster::controller {

// INVALID_ARGUMENT naming the part and its limit. `cluster_nodes`: the configured node count
// (a node list cannot usefully name more).
Status CheckJobSpecBounds(const v1::JobSpec& spec, size_t cluster_nodes);

// Job ids in one cancel or update: at most kMaxJobIdsPerRequest (the CLI sends more in parts).
Status CheckIdCount(size_t ids);

}  // namespace muster::controller
