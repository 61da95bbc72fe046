// Node-by-node verdicts for `muster explain`. The checks mirror the planner's (cluster_index.cc):
// capacity first (could this node ever take a slot), then availability, then free resources.
#include "muster/core/explain.h"

#include <algorithm>
#include <map>

#include "cluster_index.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::string GresName(const GresRequest& g) { return g.name + (g.type.empty() ? "" : ":" + g.type); }

// The first reason `n` cannot take one slot now, with the cause in words that are the same for
// every node it applies to (so that nodes group by it).
// What advance reservations make of a node for one job.
struct Kept {
  bool outside = false;  // outside the job's own (non-flex) reservation
  std::string by;        // why another reservation keeps it from the job; "" when none does
};

NodeVerdict Judge(const NodeView& n, const JobRequest& r, const Need& need, const Kept& kept,
                  std::string* cause) {
  if (Contains(r.excluded_nodes, n.name)) {
    *cause = "excluded (--exclude)";
    return NodeVerdict::kExcluded;
  }
  if (kept.outside) {
    *cause = "outside reservation " + r.reservation;
    return NodeVerdict::kExcluded;
  }
  if (!HasFeatures(n, r)) {
    *cause = "lacks features " + FeatureText(r);
    return NodeVerdict::kLacksFeatures;
  }
  // A node that is not up yet may report its CPU topology when it registers: it is judged
  // unavailable below rather than too small here.
  if (std::string why = CpuShapeMismatch(n, r, !n.schedulable); !why.empty()) {
    *cause = std::move(why);
    return NodeVerdict::kTooSmall;
  }
  if (need.gpus > 0 && !TypeMatches(n, r)) {
    *cause = n.gpus == 0 ? "has no GPUs" : "has no " + r.gpu_type + " GPUs (" + n.gpu_type + ")";
    return NodeVerdict::kTooSmall;
  }
  if (need.gpus > n.gpus) {
    *cause = "has fewer than " + std::to_string(need.gpus) + " GPUs";
    return NodeVerdict::kTooSmall;
  }
  if (need.cpus > n.cpus) {
    *cause = "has fewer than " + std::to_string(need.cpus) + " CPUs";
    return NodeVerdict::kTooSmall;
  }
  if (need.mem_mb > n.memory_mb) {
    *cause = "has less than " + std::to_string(need.mem_mb) + " MB of memory";
    return NodeVerdict::kTooSmall;
  }
  if (r.min_tmp_disk_mb > n.tmp_disk_mb) {
    *cause = "offers less than " + std::to_string(r.min_tmp_disk_mb) + " MB of temporary disk";
    return NodeVerdict::kTooSmall;
  }
  for (const GresRequest& g : need.gres) {
    if (GresUnits(n, g, false) < g.count) {
      *cause = "has fewer than " + std::to_string(g.count) + " " + GresName(g);
      return NodeVerdict::kTooSmall;
    }
  }
  if (!kept.by.empty()) {
    *cause = kept.by;
    return NodeVerdict::kReserved;
  }
  if (!n.schedulable) {
    *cause = n.unavailable.empty() ? "not available" : n.unavailable;
    return NodeVerdict::kUnavailable;
  }
  if (need.exclusive && !n.Idle()) {
    *cause = "not idle (the job wants whole nodes)";
    return NodeVerdict::kBusy;
  }
  if (n.FreeGpus() < need.gpus) {
    *cause = "too few free GPUs (needs " + std::to_string(need.gpus) + ")";
    return NodeVerdict::kBusy;
  }
  if (!GpuSocketsFree(n, need)) {
    *cause = "too few free GPUs on its sockets (needs " + std::to_string(need.gpus_per_socket) +
             " on each of " + std::to_string(need.gpu_sockets) + ")";
    return NodeVerdict::kBusy;
  }
  if (n.FreeCpus() < need.cpus) {
    *cause = "too few free CPUs (needs " + std::to_string(need.cpus) + ")";
    return NodeVerdict::kBusy;
  }
  if (n.memory_free_mb < need.mem_mb) {
    *cause = "too little free memory (needs " + std::to_string(need.mem_mb) + " MB)";
    return NodeVerdict::kBusy;
  }
  for (const GresRequest& g : need.gres) {
    if (GresUnits(n, g, true) < g.count) {
      *cause = "too few free " + GresName(g) + " (needs " + std::to_string(g.count) + ")";
      return NodeVerdict::kBusy;
    }
  }
  cause->clear();
  return NodeVerdict::kFitsNow;
}

}  // namespace

const char* NodeVerdictName(NodeVerdict v) {
  switch (v) {
    case NodeVerdict::kFitsNow:
      return "fits_now";
    case NodeVerdict::kBusy:
      return "busy";
    case NodeVerdict::kUnavailable:
      return "unavailable";
    case NodeVerdict::kExcluded:
      return "excluded";
    case NodeVerdict::kLacksFeatures:
      return "lacks_features";
    case NodeVerdict::kTooSmall:
      return "too_small";
    case NodeVerdict::kReserved:
      return "reserved";
  }
  return "?";
}

// Per node, what advance reservations make of it for the job.
std::vector<Kept> ReservedCauses(const JobRequest& r, const ClusterView& view, TimeMs now) {
  std::vector<Kept> out(view.nodes.size());
  if (view.advance.empty()) return out;
  const TimeMs end = r.time_limit_ms > 0 ? now + r.time_limit_ms : kNever;
  auto in = [](TimeMs t, TimeMs from) {
    return t <= from ? std::string("now") : "in " + FormatDuration(t - from);
  };
  const AdvanceReservation* own = nullptr;
  for (const AdvanceReservation& a : view.advance) {
    if (a.name == r.reservation && !a.flex) own = &a;
  }
  if (own) {
    std::vector<char> inside(view.nodes.size(), 0);
    for (NodeIndex n : own->nodes) {
      if (n < inside.size()) inside[n] = 1;
    }
    for (size_t n = 0; n < out.size(); ++n) {
      out[n].outside = !inside[n];
    }
  }
  const uint32_t gpus_needed = NeedOf(r).gpus;
  for (const AdvanceReservation& a : view.advance) {
    if (a.name == r.reservation || !(a.start_ms < end && now < a.end_ms)) continue;
    const std::string cause =
        "reserved: " + std::string(a.maint ? "maintenance reservation " : "reservation ") + a.name +
        (a.start_ms <= now ? " until " + in(a.end_ms, now)
                           : " from " + in(a.start_ms, now) + " to " + in(a.end_ms, now) +
                                 ", which the job's time limit would run into");
    for (size_t k = 0; k < a.nodes.size(); ++k) {
      const NodeIndex n = a.nodes[k];
      if (n >= out.size() || out[n].outside || !out[n].by.empty()) continue;
      // A GPU count keeps only some GPUs: the node is kept from the job when the rest is short.
      if (!a.gpus.empty() && view.nodes[n].gpus >= a.gpus[k] + gpus_needed) continue;
      out[n].by = cause;
    }
  }
  return out;
}

std::vector<PartitionExplanation> ExplainPlacement(const JobRequest& request,
                                                   const ClusterView& view, TimeMs now) {
  std::vector<PartitionExplanation> out;
  const Need need = NeedOf(request);
  const std::vector<Kept> reserved = ReservedCauses(request, view, now);
  for (const std::string& name : request.partitions) {
    const PartitionView* p = view.FindPartition(name);
    if (!p) continue;
    PartitionExplanation e;
    e.partition = p->name;
    e.nodes = static_cast<uint32_t>(p->nodes.size());
    e.needed = request.MinNodes();
    std::map<std::pair<NodeVerdict, std::string>, size_t> group_of;
    for (NodeIndex i : p->nodes) {
      const NodeView& n = view.nodes[i];
      std::string cause;
      const NodeVerdict v = Judge(n, request, need, reserved[i], &cause);
      if (v == NodeVerdict::kFitsNow) ++e.fit_now;
      auto [it, added] = group_of.try_emplace({v, cause}, e.groups.size());
      if (added) e.groups.push_back({v, cause, {}});
      e.groups[it->second].nodes.push_back(n.name);
    }
    std::stable_sort(e.groups.begin(), e.groups.end(), [](const NodeGroup& a, const NodeGroup& b) {
      if ((a.verdict == NodeVerdict::kFitsNow) != (b.verdict == NodeVerdict::kFitsNow)) {
        return a.verdict == NodeVerdict::kFitsNow;
      }
      return a.nodes.size() > b.nodes.size();
    });
    // The gang as a whole, in this partition alone: now (topology, --nodelist and all), and
    // on an empty cluster.
    JobRequest here = request;
    here.partitions = {p->name};
    if (auto placed = Place(here, view, PlaceMode::kNow, now); !placed.ok()) {
      e.gang_now = placed.status().message();
    }
    if (request.MinNodes() > p->nodes.size()) {
      e.never = "asks for " + std::to_string(request.MinNodes()) + " nodes; partition " + p->name +
                " has " + std::to_string(p->nodes.size());
    } else if (auto ever = Place(here, view, PlaceMode::kEver, now); !ever.ok()) {
      e.never = ever.status().message();
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace muster::core
