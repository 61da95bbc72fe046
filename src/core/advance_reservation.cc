#include "muster/core/advance_reservation.h"

#include <algorithm>

#include "muster/common/duration.h"

namespace muster::core {
namespace {

bool Overlaps(TimeMs a_start, TimeMs a_end, TimeMs b_start, TimeMs b_end) {
  return a_start < b_end && b_start < a_end;
}

// What of each node the reservation could have during its window: GPUs not held by running
// jobs (that are still running at its start) or by other reservations then, and whether the
// whole node is clear of both.
struct Room {
  std::vector<uint32_t> gpus;
  std::vector<char> clear;
  std::vector<JobId> busy_with;  // a running job in the way (0: none)
  std::vector<TimeMs> busy_until;
};

Room RoomDuring(const ClusterView& view, const ReservationAsk& ask, TimeMs now) {
  Room room;
  const size_t n = view.nodes.size();
  room.gpus.resize(n);
  room.clear.assign(n, 1);
  room.busy_with.assign(n, 0);
  room.busy_until.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    room.gpus[i] = view.nodes[i].schedulable ? view.nodes[i].gpus : 0;
  }
  if (!ask.ignore_jobs) {
    for (const RunningUse& u : view.running) {
      if (u.node >= n) continue;
      const TimeMs until = std::max(u.end_ms, now);
      if (until <= ask.start_ms) continue;  // it ends before the reservation begins
      room.gpus[u.node] -= std::min(room.gpus[u.node], u.gpus);
      room.clear[u.node] = 0;
      if (room.busy_with[u.node] == 0 || until > room.busy_until[u.node]) {
        room.busy_with[u.node] = u.job;
        room.busy_until[u.node] = until;
      }
    }
  }
  for (const AdvanceReservation& a : view.advance) {
    if (a.name == ask.name || !Overlaps(a.start_ms, a.end_ms, ask.start_ms, ask.end_ms)) continue;
    for (size_t k = 0; k < a.nodes.size(); ++k) {
      const NodeIndex node = a.nodes[k];
      if (node >= n) continue;
      room.clear[node] = 0;
      const uint32_t held = a.gpus.empty() ? view.nodes[node].gpus : a.gpus[k];
      room.gpus[node] -= std::min(room.gpus[node], held);
    }
  }
  return room;
}

std::string Until(TimeMs t, TimeMs now) {
  if (t == kNever) return "it has no time limit";
  return "its time limit ends in " + FormatDuration(std::max<TimeMs>(t - now, 0));
}

}  // namespace

Result<ReservationPlan> PlanReservation(const ClusterView& view, const ReservationAsk& ask,
                                        TimeMs now) {
  if (ask.end_ms <= ask.start_ms) return InvalidArgument("a reservation must end after it begins");
  const Room room = RoomDuring(view, ask, now);
  ReservationPlan plan;
  if (!ask.nodes.empty()) {
    plan.nodes = ask.nodes;
    std::sort(plan.nodes.begin(), plan.nodes.end());
    plan.nodes.erase(std::unique(plan.nodes.begin(), plan.nodes.end()), plan.nodes.end());
    for (NodeIndex node : plan.nodes) {
      if (node >= view.nodes.size()) return NotFound("no such node");
      if (room.busy_with[node] != 0) {
        return FailedPrecondition("node " + view.nodes[node].name + " is busy with job " +
                                  std::to_string(room.busy_with[node]) + " (" +
                                  Until(room.busy_until[node], now) +
                                  "); set ignore_jobs to reserve it anyway");
      }
    }
    return plan;
  }
  std::vector<NodeIndex> candidates = ask.candidates;
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  if (ask.node_count > 0) {
    for (NodeIndex node : candidates) {
      if (plan.nodes.size() == ask.node_count) break;
      if (node < view.nodes.size() && view.nodes[node].schedulable && room.clear[node]) {
        plan.nodes.push_back(node);
      }
    }
    if (plan.nodes.size() < ask.node_count) {
      return FailedPrecondition("only " + std::to_string(plan.nodes.size()) + " of the " +
                                std::to_string(ask.node_count) +
                                " nodes asked for are up and free of jobs and other "
                                "reservations for that time");
    }
    return plan;
  }
  if (ask.gpus == 0) return InvalidArgument("a reservation needs nodes, a node count or GPUs");
  // GPUs: the nodes with the most room first (fewest nodes), then by index.
  std::vector<NodeIndex> order;
  for (NodeIndex node : candidates) {
    if (node >= view.nodes.size() || room.gpus[node] == 0) continue;
    if (!ask.gpu_type.empty() && view.nodes[node].gpu_type != ask.gpu_type) continue;
    order.push_back(node);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](NodeIndex a, NodeIndex b) { return room.gpus[a] > room.gpus[b]; });
  uint32_t left = ask.gpus;
  std::vector<std::pair<NodeIndex, uint32_t>> taken;
  for (NodeIndex node : order) {
    if (left == 0) break;
    const uint32_t take = std::min(left, room.gpus[node]);
    taken.emplace_back(node, take);
    left -= take;
  }
  if (left > 0) {
    return FailedPrecondition(
        "only " + std::to_string(ask.gpus - left) + " of the " + std::to_string(ask.gpus) + " " +
        (ask.gpu_type.empty() ? std::string("GPUs") : ask.gpu_type + " GPUs") +
        " asked for are on up nodes and free of jobs and other reservations for that time");
  }
  std::sort(taken.begin(), taken.end());
  for (const auto& [node, count] : taken) {
    plan.nodes.push_back(node);
    plan.gpus.push_back(count);
  }
  return plan;
}

}  // namespace muster::core
