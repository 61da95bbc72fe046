#include "cluster_views.h"

#include "job_views.h"
#include "muster/core/scheduler.h"

namespace muster::controller {
namespace {

// The node's CPU layout from what its agent reported through hwloc (machine totals); all 0 when
// it reported none (not registered yet, or no hwloc there). True when that changed the view.
bool SetCpuLayout(const v1::NodeInventory& inv, core::NodeView* v) {
  const uint32_t sockets = inv.packages(), cores = inv.cores(), threads = inv.threads();
  const bool known = sockets > 0 && cores >= sockets && threads >= cores;
  const uint32_t per_socket = known ? cores / sockets : 0;
  const uint32_t per_core = known ? threads / cores : 0;
  const bool changed = v->sockets != (known ? sockets : 0) || v->cores_per_socket != per_socket ||
                       v->threads_per_core != per_core;
  v->sockets = known ? sockets : 0;
  v->cores_per_socket = per_socket;
  v->threads_per_core = per_core;
  return changed;
}

// Each GPU's socket as its agent reported it (for --gpus-per-socket): by GPU index, unknown where
// not reported or not one of the node's sockets; empty when none is known. True when that
// changed the view.
bool SetGpuSockets(const v1::NodeInventory& inv, core::NodeView* v) {
  std::vector<uint32_t> sockets;
  for (const v1::GpuDevice& g : inv.gpus()) {
    if (!g.has_socket() || g.socket() >= v->sockets || g.index() >= v->gpus) continue;
    if (sockets.empty()) sockets.assign(v->gpus, core::kUnknownSocket);
    sockets[g.index()] = g.socket();
  }
  if (sockets == v->gpu_socket) return false;
  v->gpu_socket = std::move(sockets);
  return true;
}

// The node's layout from its agent's report: CPUs, and the sockets of its GPUs.
bool SetLayout(const v1::NodeInventory& inv, core::NodeView* v) {
  const bool cpus = SetCpuLayout(inv, v);
  return SetGpuSockets(inv, v) || cpus;
}

}  // namespace

ClusterViews::ClusterViews(const EngineContext& ctx, const JobManager& jobs,
                           const NodeManager& nodes, const ResourceLedger& ledger,
                           const ReservationManager& reservations)
    : ctx_(ctx), jobs_(jobs), nodes_(nodes), ledger_(ledger), reservations_(reservations) {
  for (const PartitionConfig& pc : ctx.config().partitions) {
    core::PartitionView pv;
    pv.name = pc.name;
    pv.max_time_ms = pc.max_time_ms;
    pv.priority_tier = pc.priority_tier;
    for (const std::string& n : pc.nodes) {
      pv.nodes.push_back(static_cast<core::NodeIndex>(*ctx.NodeIndex(n)));
    }
    base_view_.partitions.push_back(std::move(pv));
  }
  capacity_view_ = base_view_;
  for (size_t i = 0; i < ledger.size(); ++i) capacity_view_.nodes.push_back(ledger.node(i));
  for (const core::PartitionView& pv : capacity_view_.partitions) {
    std::string type;
    bool mixed = false;
    for (core::NodeIndex n : pv.nodes) {
      const core::NodeView& nv = capacity_view_.nodes[n];
      if (nv.gpus == 0) continue;
      if (!type.empty() && nv.gpu_type != type) mixed = true;
      type = nv.gpu_type;
    }
    partition_gpu_type_[pv.name] = mixed ? "" : type;
  }
}

core::ClusterView ClusterViews::LiveView(TimeMs now) const {
  core::ClusterView view = base_view_;
  view.nodes.reserve(ledger_.size());
  for (size_t i = 0; i < ledger_.size(); ++i) {
    const NodeEntry& n = nodes_.at(i);
    view.nodes.push_back(ledger_.node(i));
    SetLayout(n.inventory, &view.nodes.back());
    view.nodes.back().schedulable = nodes_.Schedulable(n);
    if (!view.nodes.back().schedulable) view.nodes.back().unavailable = nodes_.WhyUnschedulable(n);
  }
  // Running: until its time limit. Ended but still cleaning up, or over its limit and being
  // killed: about one kill grace from now.
  const TimeMs overdue = now + ctx_.scheduling().kill_grace_ms;
  ledger_.AddRunningUse(view, [&](uint64_t id) {
    const JobEntry* job = jobs_.Find(id);
    if (!job) return overdue;
    const v1::JobRecord& r = job->rec();
    TimeMs end = LimitEnd(r);
    if (r.state() != v1::RUNNING || end <= now) end = overdue;
    return end;
  });
  reservations_.AddWindows(view, now);
  return view;
}

std::string ClusterViews::GpuTypeOf(const core::JobRequest& r) const {
  if (!r.gpu_type.empty() || r.gpus_per_node == 0) return r.gpu_type;
  // Any type will do, but where every candidate node has one type, that is the one it gets.
  std::string type;
  for (const std::string& p : r.partitions) {
    auto it = partition_gpu_type_.find(p);
    if (it == partition_gpu_type_.end() || it->second.empty()) return "";
    if (!type.empty() && type != it->second) return "";
    type = it->second;
  }
  return type;
}

Status ClusterViews::CanEverRun(const core::JobRequest& asked) {
  // Reservations come and go (and change their nodes): they are not the configuration's, so
  // the answer, cached per shape, leaves them out; the pass says when one does not fit.
  core::JobRequest request = asked;
  request.reservation.clear();
  if (request.AsksForCpuShape()) {
    // The CPU layouts (and the GPUs' sockets) come from the agents, not the configuration:
    // brought up to date here (only for the requests that ask for one), the cached answers
    // dropped when one changed. A node that has not reported one counts as holding any
    // (core::PlaceMode::kEver).
    bool changed = false;
    for (size_t i = 0; i < capacity_view_.nodes.size(); ++i) {
      changed |= SetLayout(nodes_.at(i).inventory, &capacity_view_.nodes[i]);
    }
    if (changed) ever_cache_.clear();
  }
  const std::string shape = core::ShapeKey(request);
  auto cached = ever_cache_.find(shape);
  if (cached == ever_cache_.end()) {
    if (ever_cache_.size() >= 4096) ever_cache_.clear();
    cached =
        ever_cache_
            .emplace(shape, core::Place(request, capacity_view_, core::PlaceMode::kEver).status())
            .first;
  }
  if (cached->second.ok()) return Status::Ok();
  return Status(cached->second.code(), "job can never run: " + cached->second.message());
}

}  // namespace muster::controller
