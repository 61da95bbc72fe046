#include "muster/core/step_layout.h"

#include <algorithm>
#include <limits>

#include "muster/common/strings.h"

namespace muster::core {
namespace {

// Counts come from the client: bound them, so no product below can overflow.
constexpr uint32_t kMaxCount = 1u << 20;

struct Pick {
  size_t room;
  uint32_t tasks;
};

}  // namespace

Result<TaskDistribution> ParseTaskDistribution(const std::string& text) {
  TaskDistribution d;
  if (text.empty() || text == "block") return d;
  if (text == "cyclic") {
    d.kind = TaskDistribution::Kind::kCyclic;
    return d;
  }
  if (StartsWith(text, "plane=")) {
    auto n = ParseUint(std::string_view(text).substr(6));
    if (n && *n >= 1 && *n <= kMaxCount) {
      d.kind = TaskDistribution::Kind::kPlane;
      d.plane = static_cast<uint32_t>(*n);
      return d;
    }
    return InvalidArgument("task distribution " + text + ": the plane size must be 1 to " +
                           std::to_string(kMaxCount));
  }
  return InvalidArgument("task distribution " + text +
                         " is not one of block, cyclic or plane=N (arbitrary is not supported)");
}

std::vector<std::vector<uint32_t>> AssignTaskIds(const std::vector<uint32_t>& tasks,
                                                 const TaskDistribution& d) {
  std::vector<std::vector<uint32_t>> ids(tasks.size());
  uint64_t total = 0;
  for (size_t k = 0; k < tasks.size(); ++k) {
    ids[k].reserve(tasks[k]);
    total += tasks[k];
  }
  // Block is one pass with runs as long as each node's share; cyclic and plane go round the
  // nodes in runs of 1 and `plane`, until every node has its share.
  const uint64_t run = d.kind == TaskDistribution::Kind::kBlock
                           ? std::numeric_limits<uint64_t>::max()
                       : d.kind == TaskDistribution::Kind::kCyclic ? 1
                                                                   : std::max<uint32_t>(d.plane, 1);
  uint64_t next = 0;
  while (next < total) {
    for (size_t k = 0; k < tasks.size(); ++k) {
      for (uint64_t i = 0; i < run && ids[k].size() < tasks[k]; ++i) {
        ids[k].push_back(static_cast<uint32_t>(next++));
      }
    }
  }
  return ids;
}

Result<StepLayout> LayOutStep(const std::vector<StepRoom>& rooms, const StepShape& shape,
                              uint32_t job_cpus_per_task, const std::string& job, bool selected) {
  if (rooms.empty()) return InvalidArgument("no node of " + job + " is left to run the step");
  for (uint32_t v : {shape.nodes, shape.ntasks, shape.ntasks_per_node, shape.cpus_per_task,
                     shape.gpus_per_task, shape.gpus_per_node, shape.gpus}) {
    if (v > kMaxCount) {
      return InvalidArgument("step request out of range: " + std::to_string(v) + " (at most " +
                             std::to_string(kMaxCount) + ")");
    }
  }
  const bool want_gpus = shape.WantsGpus();
  const uint32_t job_cpt = std::max<uint32_t>(1, job_cpus_per_task);
  const uint32_t cpt = shape.cpus_per_task > 0 ? shape.cpus_per_task : job_cpt;
  uint32_t nodes = shape.nodes;
  uint32_t ntasks = shape.ntasks;
  const uint32_t tpn = shape.ntasks_per_node;
  if (nodes > rooms.size()) {
    return FailedPrecondition("the step asks for " + std::to_string(nodes) + " nodes; " + job +
                              " has " + std::to_string(rooms.size()) +
                              (selected ? " of those selected" : ""));
  }
  // Defaults as srun has them inside an allocation.
  std::vector<uint32_t> shares;  // tasks per chosen node, largest first; empty: fill in order
  if (!nodes && !ntasks && !tpn) {
    if (cpt == job_cpt) {
      for (const StepRoom& r : rooms) shares.push_back(r.job_tasks);
      nodes = static_cast<uint32_t>(shares.size());
      for (uint32_t s : shares) ntasks += s;
    } else {
      for (const StepRoom& r : rooms) ntasks += r.job_tasks;
    }
  }
  if (tpn) {
    if (!nodes) nodes = ntasks ? (ntasks + tpn - 1) / tpn : static_cast<uint32_t>(rooms.size());
    if (!ntasks) ntasks = nodes * tpn;
    if (uint64_t{ntasks} > uint64_t{nodes} * tpn) {
      return InvalidArgument(std::to_string(ntasks) + " tasks do not fit " + std::to_string(nodes) +
                             " nodes at --ntasks-per-node=" + std::to_string(tpn));
    }
  }
  if (nodes && !ntasks) ntasks = nodes;  // srun -N without -n: one task per node
  if (nodes > ntasks) {
    return InvalidArgument("the step asks for more nodes (" + std::to_string(nodes) +
                           ") than tasks (" + std::to_string(ntasks) + ")");
  }
  if (nodes > rooms.size()) {
    return FailedPrecondition("the step needs " + std::to_string(nodes) + " nodes; " + job +
                              " has " + std::to_string(rooms.size()));
  }
  if (shape.overcommit && shares.empty() && !nodes) {
    // More tasks than CPUs: fill in order would put them all on the first node, so spread them
    // over the job's nodes as srun's block distribution does.
    nodes = std::min<uint32_t>(static_cast<uint32_t>(rooms.size()), ntasks);
  }
  if (shares.empty() && nodes) {
    for (uint32_t k = 0, left = ntasks; k < nodes; ++k) {
      uint32_t s = tpn ? std::min(tpn, left) : ntasks / nodes + (k < ntasks % nodes ? 1 : 0);
      shares.push_back(s);
      left -= s;
    }
  }
  if (shape.overcommit) {
    for (uint32_t share : shares) {
      if (share > kMaxTasksPerNode) {
        return InvalidArgument("the step puts " + std::to_string(share) +
                               " tasks on one node; at most " + std::to_string(kMaxTasksPerNode) +
                               " with --overcommit");
      }
    }
  }
  // The CPUs a node needs for `tasks` of the step's tasks: one task's with --overcommit.
  auto cpus_needed = [&](uint32_t tasks) -> uint64_t {
    return uint64_t{shape.overcommit ? std::min<uint32_t>(tasks, 1) : tasks} * cpt;
  };
  auto gpus_for = [&](uint32_t tasks) -> uint64_t {
    if (shape.gpus_per_task) return uint64_t{shape.gpus_per_task} * tasks;
    return shape.gpus_per_node;  // -G is checked once the node count is known
  };

  // The tasks go to the first nodes that hold their share; `live` counts only what other steps
  // leave free, otherwise everything the job has (to tell "busy" from "never").
  auto lay_out = [&](bool live) -> std::vector<Pick> {
    std::vector<Pick> picks;
    auto cpus_of = [&](const StepRoom& r) {
      return live ? static_cast<uint32_t>(r.free_cpus.size()) : r.all_cpus;
    };
    auto gpus_of = [&](const StepRoom& r) {
      return live ? static_cast<uint32_t>(r.free_gpus.size()) : r.all_gpus;
    };
    if (!shares.empty()) {
      size_t k = 0;
      for (size_t i = 0; i < rooms.size() && k < shares.size(); ++i) {
        if (cpus_of(rooms[i]) < cpus_needed(shares[k])) continue;
        if (want_gpus && gpus_of(rooms[i]) < gpus_for(shares[k])) continue;
        picks.push_back({i, shares[k++]});
      }
      if (k < shares.size()) picks.clear();
      return picks;
    }
    uint32_t left = ntasks;
    for (size_t i = 0; i < rooms.size() && left > 0; ++i) {
      uint32_t fit = cpus_of(rooms[i]) / cpt;
      if (shape.overcommit && fit > 0) fit = kMaxTasksPerNode;
      if (shape.gpus_per_task) fit = std::min(fit, gpus_of(rooms[i]) / shape.gpus_per_task);
      if (shape.gpus_per_node && gpus_of(rooms[i]) < shape.gpus_per_node) fit = 0;
      fit = std::min(fit, left);
      if (fit == 0) continue;
      picks.push_back({i, fit});
      left -= fit;
    }
    if (left > 0) picks.clear();
    return picks;
  };
  std::vector<Pick> picks = lay_out(true);
  if (picks.empty()) {
    if (lay_out(false).empty()) {
      std::string what = std::to_string(ntasks) + " task(s) x " + std::to_string(cpt) + " CPU(s)";
      if (want_gpus) what += " with GPUs";
      return FailedPrecondition("more processors requested than permitted: the step asks for " +
                                what + (nodes ? " on " + std::to_string(nodes) + " node(s)" : "") +
                                ", more than " + job + " holds");
    }
    return Unavailable("Requested nodes are busy");
  }
  uint32_t gpus_per_picked = 0;
  if (shape.gpus) {
    if (shape.gpus % picks.size() != 0) {
      return InvalidArgument("-G/--gpus=" + std::to_string(shape.gpus) + " does not divide over " +
                             std::to_string(picks.size()) + " nodes; give --gpus-per-node");
    }
    gpus_per_picked = shape.gpus / static_cast<uint32_t>(picks.size());
    for (const Pick& p : picks) {
      if (rooms[p.room].free_gpus.size() < gpus_per_picked) {
        return Unavailable("Requested nodes are busy");
      }
    }
  }

  std::vector<uint32_t> counts;
  for (const Pick& p : picks) counts.push_back(p.tasks);
  std::vector<std::vector<uint32_t>> ids = AssignTaskIds(counts, shape.distribution);

  StepLayout layout;
  layout.cpus_per_task = cpt;
  for (size_t k = 0; k < picks.size(); ++k) {
    const Pick& p = picks[k];
    const StepRoom& r = rooms[p.room];
    StepPlacement& sp = layout.nodes.emplace_back();
    sp.room = p.room;
    sp.tasks = p.tasks;
    sp.task_ids = std::move(ids[k]);
    if (!shape.overlap) {
      // --exact: just what the tasks need; otherwise every CPU of the job left free here.
      size_t n = shape.exact ? static_cast<size_t>(cpus_needed(p.tasks)) : r.free_cpus.size();
      n = std::min(n, r.free_cpus.size());  // the layout checked the room; never read past it
      sp.cpus.assign(r.free_cpus.begin(), r.free_cpus.begin() + static_cast<long>(n));
    }
    if (want_gpus) {
      size_t n = gpus_per_picked ? gpus_per_picked : static_cast<size_t>(gpus_for(p.tasks));
      n = std::min(n, r.free_gpus.size());
      sp.gpus.assign(r.free_gpus.begin(), r.free_gpus.begin() + static_cast<long>(n));
    }
  }
  return layout;
}

}  // namespace muster::core
