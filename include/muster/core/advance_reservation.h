// Where a new advance reservation goes: the nodes it names, checked against the running jobs that
// would still hold them when it begins, or a count of whole nodes or of GPUs of a type chosen
// where nothing else (jobs, other reservations) is in the way. Pure: time is an argument.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/core/types.h"

namespace muster::core {

struct ReservationAsk {
  std::string name;  // a reservation being changed: its own entries in view.advance do not count
  TimeMs start_ms = 0;
  TimeMs end_ms = kNever;
  // Exactly one of: named nodes (whole), a count of whole nodes, a count of GPUs.
  std::vector<NodeIndex> nodes;
  uint32_t node_count = 0;
  uint32_t gpus = 0;
  std::string gpu_type;               // for gpus: empty, any type
  std::vector<NodeIndex> candidates;  // where counts are chosen (a partition's nodes)
  bool ignore_jobs = false;           // running jobs that would overlap it do not count
};

struct ReservationPlan {
  std::vector<NodeIndex> nodes;  // ascending
  std::vector<uint32_t> gpus;    // per node, for a GPU count; empty: whole nodes
};

// Errors: FAILED_PRECONDITION naming the busy node and the job in the way ("node n3 is busy with
// job 12 until its time limit, in 2:00:00; set ignore_jobs to reserve it anyway"), or saying
// how much of the count could be found.
Result<ReservationPlan> PlanReservation(const ClusterView& view, const ReservationAsk& ask,
                                        TimeMs now);

}  // namespace muster::core
