// Victim choice: rank the candidates (lower priority, then less work lost, then the newer job),
// find for every node the fewest best-ranked jobs whose end frees the preemptor's slot there, then
// the lowest rank bound under which a gang fits the request's topology, and inside the domain
// that gang chose, the cheapest nodes.
#include "muster/core/preemption.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "cluster_index.h"

namespace muster::core {
namespace {

bool SlotFits(const NodeView& n, const Need& need) {
  if (need.exclusive) return n.Idle();
  for (const GresRequest& g : need.gres) {
    if (GresUnits(n, g, true) < g.count) return false;
  }
  return n.FreeGpus() >= need.gpus && n.FreeCpus() >= need.cpus &&
         n.memory_free_mb >= need.mem_mb && GpuSocketsFree(n, need);
}

// One node's way to the slot: the candidates to end there (ranks, ascending) and what that
// costs: the highest priority among them, how many, and how recent their work is.
struct NodeCost {
  bool possible = false;
  int64_t worst = INT64_MIN;      // INT64_MIN: free already
  std::vector<uint32_t> victims;  // indices into the ranked candidates
  int64_t since_sum = 0;          // of the victims' work_since_ms: higher loses less

  // Cheaper first: lower worst priority, fewer victims, less work lost.
  bool operator<(const NodeCost& o) const {
    if (worst != o.worst) return worst < o.worst;
    if (victims.size() != o.victims.size()) return victims.size() < o.victims.size();
    return since_sum > o.since_sum;
  }
};

}  // namespace

Result<PreemptionPlan> PlanPreemption(const JobRequest& request, const ClusterView& view,
                                      const std::vector<PreemptCandidate>& candidates) {
  if (!request.required_nodes.empty()) {
    return InvalidArgument("preemption is not planned for jobs that name their nodes (--nodelist)");
  }
  if (request.partitions.empty()) return InvalidArgument("the request names no partition");
  // Rank: the cheapest to stop first.
  std::vector<uint32_t> ranked(candidates.size());
  std::iota(ranked.begin(), ranked.end(), 0u);
  std::sort(ranked.begin(), ranked.end(), [&](uint32_t a, uint32_t b) {
    const PreemptCandidate& x = candidates[a];
    const PreemptCandidate& y = candidates[b];
    if (x.priority != y.priority) return x.priority < y.priority;
    if (x.work_since_ms != y.work_since_ms) return x.work_since_ms > y.work_since_ms;
    return x.job > y.job;
  });
  // Per node: (rank, the candidate's share of that node), in rank order.
  std::map<NodeIndex, std::vector<std::pair<uint32_t, const NodePlacement*>>> on_node;
  for (uint32_t rank = 0; rank < ranked.size(); ++rank) {
    for (const NodePlacement& np : candidates[ranked[rank]].placement.nodes) {
      if (np.node < view.nodes.size()) on_node[np.node].push_back({rank, &np});
    }
  }

  ClusterView copy = view;
  ClusterIndex index(&copy);
  const Need need = NeedOf(request);
  const GangLimits limits = GangLimits::Of(request);
  const uint32_t count = request.MinNodes();
  Status last = FailedPrecondition("no running job it may preempt frees room for it");

  for (const std::string& pname : request.partitions) {
    size_t part = view.partitions.size();
    for (size_t i = 0; i < view.partitions.size(); ++i) {
      if (view.partitions[i].name == pname) part = i;
    }
    if (part == view.partitions.size()) continue;
    if (view.partitions[part].max_time_ms > 0 &&
        (request.time_limit_ms <= 0 || request.time_limit_ms > view.partitions[part].max_time_ms)) {
      continue;
    }
    const NodeSet capacity = index.CapacitySet(part, request, need, /*up_only=*/true);
    if (capacity.Count() < count) continue;

    // Each node's cheapest way to the slot.
    std::vector<NodeCost> cost(view.nodes.size());
    std::vector<int64_t> levels;
    capacity.ForEach([&](size_t pos) {
      const NodeIndex n = index.NodeAt(static_cast<uint32_t>(pos));
      NodeCost& c = cost[n];
      if (SlotFits(view.nodes[n], need)) {
        c.possible = true;
        levels.push_back(c.worst);
        return;
      }
      auto it = on_node.find(n);
      if (it == on_node.end()) return;
      NodeView trial = view.nodes[n];
      std::vector<uint32_t> taken;
      for (const auto& [rank, np] : it->second) {
        trial.Give(*np);
        taken.push_back(rank);
        if (SlotFits(trial, need)) break;
      }
      if (!SlotFits(trial, need)) return;
      // Drop what was not needed after all (a job holding only what the slot does not use),
      // the most expensive first.
      for (size_t k = taken.size(); k-- > 0;) {
        NodeView without = view.nodes[n];
        for (size_t j = 0; j < taken.size(); ++j) {
          if (j == k) continue;
          for (const auto& [rank, np] : it->second) {
            if (rank == taken[j]) without.Give(*np);
          }
        }
        if (SlotFits(without, need)) taken.erase(taken.begin() + static_cast<std::ptrdiff_t>(k));
      }
      c.possible = true;
      c.victims = taken;
      for (uint32_t rank : taken) {
        const PreemptCandidate& v = candidates[ranked[rank]];
        c.worst = std::max(c.worst, v.priority);
        c.since_sum += v.work_since_ms;
      }
      levels.push_back(c.worst);
    });
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    if (levels.empty()) continue;

    // The lowest priority bound under which a gang fits.
    auto eligible = [&](int64_t bound) {
      NodeSet cand(index.size());
      capacity.ForEach([&](size_t pos) {
        const NodeCost& c = cost[index.NodeAt(static_cast<uint32_t>(pos))];
        if (c.possible && c.worst <= bound) cand.Set(pos);
      });
      return cand;
    };
    auto gang_at = [&](int64_t bound) { return index.ChooseGang(eligible(bound), count, limits); };
    if (gang_at(levels.back()).empty()) {
      last = FailedPrecondition(
          "even with every job it may preempt gone, no set of nodes in partition " + pname +
          " fits it");
      continue;
    }
    size_t lo = 0, hi = levels.size() - 1;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (gang_at(levels[mid]).empty()) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const int64_t bound = levels[lo];
    const std::vector<NodeIndex> gang = gang_at(bound);

    // Where the gang goes: a gang that fits under one leaf takes the leaf whose cheapest nodes
    // cost least (checked against its topology limits); a wider one keeps the leaves chosen.
    // Inside, the cheapest nodes: free ones first, then those needing the fewest, lowest-priority,
    // newest victims.
    auto cheapest = [&](const NodeSet& cand) {
      std::vector<NodeIndex> nodes;
      cand.ForEach([&](size_t pos) { nodes.push_back(index.NodeAt(static_cast<uint32_t>(pos))); });
      std::stable_sort(nodes.begin(), nodes.end(),
                       [&](NodeIndex a, NodeIndex b) { return cost[a] < cost[b]; });
      if (nodes.size() > count) nodes.resize(count);
      return nodes;
    };
    // A set's cost: its worst node, then the victims and work of all its nodes.
    auto set_cost = [&](const std::vector<NodeIndex>& nodes) {
      NodeCost total;
      total.possible = true;
      for (NodeIndex n : nodes) {
        total.worst = std::max(total.worst, cost[n].worst);
        total.victims.insert(total.victims.end(), cost[n].victims.begin(), cost[n].victims.end());
        total.since_sum += cost[n].since_sum;
      }
      std::sort(total.victims.begin(), total.victims.end());
      total.victims.erase(std::unique(total.victims.begin(), total.victims.end()),
                          total.victims.end());
      return total;
    };
    std::vector<NodeIndex> pool;
    if (index.LeavesSpanned(gang) == 1) {
      std::map<uint32_t, std::vector<size_t>> by_leaf;
      eligible(bound).ForEach(
          [&](size_t pos) { by_leaf[index.LeafOf(static_cast<uint32_t>(pos))].push_back(pos); });
      NodeCost best;
      for (const auto& [leaf, positions] : by_leaf) {
        if (positions.size() < count) continue;
        NodeSet cand(index.size());
        for (size_t pos : positions) cand.Set(pos);
        if (index.ChooseGang(cand, count, limits).empty()) continue;
        std::vector<NodeIndex> nodes = cheapest(cand);
        const NodeCost c = set_cost(nodes);
        if (pool.empty() || c < best) {
          best = c;
          pool = std::move(nodes);
        }
      }
    }
    if (pool.empty()) {
      std::vector<uint32_t> leaves;
      for (NodeIndex n : gang) leaves.push_back(index.LeafOf(index.PosOf(n)));
      std::sort(leaves.begin(), leaves.end());
      NodeSet cand = eligible(bound);
      NodeSet inside(index.size());
      cand.ForEach([&](size_t pos) {
        if (std::binary_search(leaves.begin(), leaves.end(),
                               index.LeafOf(static_cast<uint32_t>(pos)))) {
          inside.Set(pos);
        }
      });
      pool = cheapest(inside);
      // Within the same leaves the limits hold, but for NVLink domains that split a leaf: then
      // the gang as chosen.
      NodeSet chosen(index.size());
      for (NodeIndex n : pool) chosen.Set(index.PosOf(n));
      if (index.ChooseGang(chosen, count, limits).empty()) pool = gang;
    }
    std::sort(pool.begin(), pool.end());
    std::vector<uint32_t> victim_ranks;
    for (NodeIndex n : pool) {
      victim_ranks.insert(victim_ranks.end(), cost[n].victims.begin(), cost[n].victims.end());
    }
    std::sort(victim_ranks.begin(), victim_ranks.end());
    victim_ranks.erase(std::unique(victim_ranks.begin(), victim_ranks.end()), victim_ranks.end());
    if (victim_ranks.empty()) {
      return FailedPrecondition("it fits without preempting anything");
    }
    // Check the plan as a whole: with every victim gone, each chosen node has the slot free.
    std::vector<bool> gone(ranked.size(), false);
    for (uint32_t r : victim_ranks) gone[r] = true;
    for (NodeIndex n : pool) {
      NodeView after = view.nodes[n];
      if (auto it = on_node.find(n); it != on_node.end()) {
        for (const auto& [rank, np] : it->second) {
          if (gone[rank]) after.Give(*np);
        }
      }
      if (!SlotFits(after, need))
        return Internal("preemption plan does not free node " + after.name);
    }
    PreemptionPlan plan;
    plan.partition = pname;
    plan.nodes = std::move(pool);
    for (uint32_t r : victim_ranks) plan.victims.push_back(candidates[ranked[r]].job);
    return plan;
  }
  return last;
}

}  // namespace muster::core
