// Randomized checks of the pass against brute force on small clusters:
//  - the combined plan (running jobs, starts, reservations) never overcommits a node at any
//    moment, so no backfilled job delays a reservation;
//  - every reservation starts at the earliest time a brute-force search finds, given only the
//    decisions for jobs ahead of it;
//  - gangs are whole, on schedulable nodes, and the pass is deterministic;
//  - gang placement spans no more leaves than the best placement at the lowest possible tier;
//  - required (--nodelist) nodes are always in the gang, excluded ones never;
//  - all of it under strict backfill and for jobs that take no reservation as well.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

constexpr TimeMs kHour = 3'600'000;
constexpr TimeMs kNow = 100 * kHour;

struct Interval {
  TimeMs start, end;
  int64_t cpus, gpus, mem;
};

TimeMs EndOf(TimeMs start, TimeMs limit) { return limit <= 0 ? kNever : start + limit; }

// What one slot of `r` takes on node `n` (exclusive: everything).
Interval Slot(const JobRequest& r, const NodeView& n, TimeMs start, TimeMs end) {
  if (r.exclusive) return {start, end, n.cpus, n.gpus, static_cast<int64_t>(n.memory_mb)};
  uint32_t tasks = 1;
  for (uint32_t t : r.tasks_per_node) tasks = std::max(tasks, t);
  return {start, end, static_cast<int64_t>(tasks * std::max<uint32_t>(1, r.cpus_per_task)),
          r.gpus_per_node, static_cast<int64_t>(r.mem_per_node_mb)};
}

// Does `add` fit on the node during its whole interval next to `used`?
bool FitsBeside(const NodeView& n, const std::vector<Interval>& used, const Interval& add) {
  std::vector<TimeMs> points = {add.start};
  for (const Interval& u : used) {
    if (u.start > add.start && u.start < add.end) points.push_back(u.start);
  }
  for (TimeMs t : points) {
    int64_t cpus = add.cpus, gpus = add.gpus, mem = add.mem;
    for (const Interval& u : used) {
      if (u.start <= t && t < u.end) {
        cpus += u.cpus;
        gpus += u.gpus;
        mem += u.mem;
      }
    }
    if (cpus > n.cpus || gpus > n.gpus || mem > static_cast<int64_t>(n.memory_mb)) return false;
  }
  return true;
}

bool Named(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The gang includes every required node and no excluded one.
bool Honours(const ClusterView& v, const JobRequest& r, const std::vector<NodePlacement>& nodes) {
  std::set<std::string> used;
  for (const NodePlacement& np : nodes) used.insert(v.nodes[np.node].name);
  for (const std::string& name : r.required_nodes) {
    if (!used.count(name)) return false;
  }
  for (const std::string& name : r.excluded_nodes) {
    if (used.count(name)) return false;
  }
  return true;
}

struct World {
  ClusterView view;
  std::vector<PendingJob> queue;
  SchedulerConfig config;
};

World RandomWorld(std::mt19937& rng) {
  World w;
  PartitionView p;
  p.name = "gpu";
  uint32_t nodes = 1 + rng() % 6;
  // Half the worlds are of alike nodes whose running jobs end at one of two times, so that
  // forecasts ask by node class (Profile::Classify) and a start or hold in the pass splits one.
  const bool alike = rng() % 2 == 0;
  if (alike) nodes = 2 + rng() % 7;
  for (uint32_t i = 0; i < nodes; ++i) {
    uint32_t gpus = alike ? 8 : (rng() % 3) * 4;
    w.view.nodes.push_back(NodeView::Empty("n" + std::to_string(i), alike ? 16 : 8 + rng() % 9,
                                           64000, gpus, "h100",
                                           "s1/leaf" + std::to_string(alike ? 0 : rng() % 2)));
    w.view.nodes.back().schedulable = rng() % 7 != 0;
    p.nodes.push_back(i);
  }
  w.view.partitions.push_back(p);
  // Running single-node jobs, recorded both as used resources and as releases.
  JobId id = 1000;
  for (uint32_t i = 0; i < nodes; ++i) {
    NodeView& n = w.view.nodes[i];
    for (int k = 0, jobs = static_cast<int>(rng() % (alike ? 2 : 3)); k < jobs; ++k) {
      NodePlacement np;
      np.node = i;
      uint32_t want_gpus = n.gpus ? static_cast<uint32_t>(rng() % (n.FreeGpus() + 1)) : 0;
      uint32_t want_cpus = static_cast<uint32_t>(rng() % (n.FreeCpus() + 1));
      if (alike) {
        want_gpus = (rng() % 2) * 8;
        want_cpus = want_gpus ? 16 : 0;
      }
      for (uint32_t g = 0; g < n.gpus && np.gpus.size() < want_gpus; ++g)
        if (n.gpu_free[g]) np.gpus.push_back(g);
      for (uint32_t c = 0; c < n.cpus && np.cpus.size() < want_cpus; ++c)
        if (n.cpu_free[c]) np.cpus.push_back(c);
      np.mem_mb = rng() % 2 ? 0 : std::min<uint64_t>(n.memory_free_mb, 16000);
      Allocate(Placement{"gpu", 0, {np}}, w.view);
      TimeMs end = rng() % 10 == 0 ? kNever : kNow + static_cast<TimeMs>(1 + rng() % 8) * kHour;
      if (alike) end = kNow + static_cast<TimeMs>(1 + rng() % 2) * kHour;
      w.view.running.push_back({++id, i, end, static_cast<uint32_t>(np.cpus.size()),
                                static_cast<uint32_t>(np.gpus.size()), np.mem_mb});
    }
  }
  const TimeMs limits[] = {0, kHour / 2, kHour, 2 * kHour, 5 * kHour};
  for (uint32_t j = 0, jobs = 1 + rng() % 12; j < jobs; ++j) {
    PendingJob pj;
    pj.id = j + 1;
    pj.submit_time_ms = kNow - static_cast<TimeMs>(rng() % 1000);
    pj.priority.fixed = 1 + rng() % 5;
    JobRequest& r = pj.request;
    r.partitions = {"gpu"};
    r.nodes = 1 + rng() % 3;
    if (r.nodes > 1 && rng() % 4 == 0) r.min_nodes = 1 + rng() % (r.nodes - 1);  // -N min-max
    r.tasks_per_node.assign(r.nodes, 1 + rng() % 2);
    r.cpus_per_task = 1 + rng() % 4;
    r.gpus_per_node = rng() % 9;
    r.mem_per_node_mb = rng() % 3 == 0 ? 32000 : 0;
    r.exclusive = rng() % 10 == 0;
    r.time_limit_ms = limits[rng() % 5];
    // Sometimes a required node (--nodelist) and an excluded one (--exclude).
    uint32_t required = rng() % (nodes * 4);
    if (required < nodes) r.required_nodes = {"n" + std::to_string(required)};
    uint32_t excluded = rng() % (nodes * 4);
    if (excluded < nodes && excluded != required) {
      r.excluded_nodes = {"n" + std::to_string(excluded)};
    }
    w.queue.push_back(std::move(pj));
  }
  w.config.backfill_depth = 1 + rng() % 5;
  // Sometimes selective reservations (a job the policy lets wait without holding anything) and
  // strict backfill: both only take starts or reservations away, never overcommit.
  w.config.strict_backfill = rng() % 4 == 0;
  for (PendingJob& pj : w.queue) pj.reserve = rng() % 5 != 0;
  return w;
}

TEST(BruteForceTest, PlansNeverOvercommitAndReservationsAreEarliest) {
  std::mt19937 rng(2026);
  int reservations_checked = 0, backfilled = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    World w = RandomWorld(rng);
    SchedulePass pass = Schedule(w.view, w.queue, kNow, w.config);
    SchedulePass again = Schedule(w.view, w.queue, kNow, w.config);

    // Determinism: identical decisions.
    ASSERT_EQ(pass.starts.size(), again.starts.size());
    ASSERT_EQ(pass.reservations.size(), again.reservations.size());
    for (size_t i = 0; i < pass.starts.size(); ++i) {
      ASSERT_EQ(pass.starts[i].job, again.starts[i].job);
      for (size_t k = 0; k < pass.starts[i].placement.nodes.size(); ++k) {
        ASSERT_EQ(pass.starts[i].placement.nodes[k].node, again.starts[i].placement.nodes[k].node);
        ASSERT_EQ(pass.starts[i].placement.nodes[k].gpus, again.starts[i].placement.nodes[k].gpus);
      }
    }
    for (size_t i = 0; i < pass.reservations.size(); ++i) {
      ASSERT_EQ(pass.reservations[i].start_ms, again.reservations[i].start_ms);
      ASSERT_EQ(pass.reservations[i].nodes, again.reservations[i].nodes);
    }
    ASSERT_EQ(pass.starts.size() + pass.pending.size(), w.queue.size());
    backfilled += static_cast<int>(pass.stats.backfilled);

    std::map<JobId, const PendingJob*> by_id;
    for (const auto& j : w.queue) by_id[j.id] = &j;
    std::vector<size_t> order = PriorityOrder(w.view, w.queue, kNow, w.config);
    std::map<JobId, size_t> rank;
    for (size_t k = 0; k < order.size(); ++k) rank[w.queue[order[k]].id] = k;

    // Each decision as intervals per node, tagged with the job's rank.
    std::vector<std::vector<std::pair<size_t, Interval>>> plan(w.view.nodes.size());
    for (const RunningUse& u : w.view.running) {
      plan[u.node].push_back(
          {0, Interval{kNow, u.end_ms, u.cpus, u.gpus, static_cast<int64_t>(u.mem_mb)}});
    }
    ClusterView used = w.view;
    for (const JobStart& s : pass.starts) {
      const JobRequest& r = by_id[s.job]->request;
      if (w.config.strict_backfill) {
        // Strict backfill: a start ends by the first reserved start ahead of it.
        for (const Reservation& res : pass.reservations) {
          if (rank[res.job] < rank[s.job]) {
            ASSERT_LE(EndOf(kNow, r.time_limit_ms), res.start_ms)
                << "job " << s.job << " passes job " << res.job << " iter " << iter;
          }
        }
      }
      ASSERT_GE(s.placement.nodes.size(), r.MinNodes()) << "partial gang";
      ASSERT_LE(s.placement.nodes.size(), r.nodes);
      ASSERT_TRUE(Honours(w.view, r, s.placement.nodes)) << "iter " << iter;
      std::set<NodeIndex> distinct;
      for (const NodePlacement& np : s.placement.nodes) {
        NodeView& n = used.nodes[np.node];
        ASSERT_TRUE(n.schedulable);
        ASSERT_TRUE(distinct.insert(np.node).second);
        ASSERT_EQ(np.gpus.size(), r.exclusive ? n.gpus : r.gpus_per_node);
        for (uint32_t g : np.gpus) {
          ASSERT_TRUE(n.gpu_free[g]) << "GPU given twice";
          n.gpu_free[g] = false;
        }
        for (uint32_t c : np.cpus) {
          ASSERT_TRUE(n.cpu_free[c]) << "CPU given twice";
          n.cpu_free[c] = false;
        }
        plan[np.node].push_back(
            {rank[s.job] + 1, Slot(r, w.view.nodes[np.node], kNow, EndOf(kNow, r.time_limit_ms))});
      }
    }
    for (const Reservation& res : pass.reservations) {
      const JobRequest& r = by_id[res.job]->request;
      ASSERT_TRUE(by_id[res.job]->reserve) << "a reservation for a job that takes none";
      ASSERT_EQ(res.nodes.size(), r.MinNodes());
      ASSERT_GT(res.start_ms, kNow);
      std::vector<NodePlacement> at;
      for (NodeIndex n : res.nodes) at.push_back(NodePlacement{n, {}, 0, {}, 1});
      ASSERT_TRUE(Honours(w.view, r, at)) << "iter " << iter;
      for (NodeIndex n : res.nodes) {
        ASSERT_TRUE(w.view.nodes[n].schedulable);
        plan[n].push_back({rank[res.job] + 1, Slot(r, w.view.nodes[n], res.start_ms, res.end_ms)});
      }
    }
    // 1. No overcommit at any moment: a backfilled start never eats into a reservation.
    for (size_t n = 0; n < plan.size(); ++n) {
      std::vector<Interval> all;
      for (const auto& [r, iv] : plan[n]) all.push_back(iv);
      for (size_t i = 0; i < all.size(); ++i) {
        std::vector<Interval> others = all;
        others.erase(others.begin() + static_cast<long>(i));
        // Check from each interval's own start: enough to find any overlap peak.
        ASSERT_TRUE(FitsBeside(
            w.view.nodes[n], others,
            Interval{all[i].start, all[i].start + 1, all[i].cpus, all[i].gpus, all[i].mem}))
            << "node " << n << " overcommitted at " << all[i].start - kNow << " ms (iter " << iter
            << ")";
      }
    }
    // 2. Each reservation is at the earliest time brute force finds, given only the decisions
    //    for jobs ahead of it.
    for (const Reservation& res : pass.reservations) {
      const JobRequest& r = by_id[res.job]->request;
      const size_t me = rank[res.job] + 1;
      // Under strict backfill no job starts before the first reserved start ahead of it unless it
      // ends by then.
      TimeMs floor = kNow;
      if (w.config.strict_backfill) {
        TimeMs first = kNever;
        for (const Reservation& other : pass.reservations) {
          if (rank[other.job] + 1 < me) first = std::min(first, other.start_ms);
        }
        if (first != kNever) floor = first;
      }
      std::vector<TimeMs> times = {kNow, floor};
      for (const auto& node_plan : plan) {
        for (const auto& [rk, iv] : node_plan) {
          if (rk < me && iv.end != kNever) times.push_back(iv.end);
        }
      }
      std::sort(times.begin(), times.end());
      TimeMs earliest = kNever;
      for (TimeMs t : times) {
        // Before the floor only a start that ends by it.
        if (t < floor && EndOf(t, r.time_limit_ms) > floor) continue;
        uint32_t fit = 0;
        bool required_fit = true;
        for (size_t n = 0; n < plan.size(); ++n) {
          const NodeView& node = w.view.nodes[n];
          const bool required = Named(r.required_nodes, node.name);
          bool fits = node.schedulable && !(r.gpus_per_node && node.gpus < r.gpus_per_node) &&
                      !Named(r.excluded_nodes, node.name);
          if (fits) {
            std::vector<Interval> before;
            for (const auto& [rk, iv] : plan[n]) {
              if (rk < me) before.push_back(iv);
            }
            fits = FitsBeside(node, before, Slot(r, node, t, EndOf(t, r.time_limit_ms)));
          }
          fit += fits ? 1 : 0;
          if (required && !fits) required_fit = false;
        }
        if (fit >= r.MinNodes() && required_fit) {
          earliest = t;
          break;
        }
      }
      ASSERT_EQ(res.start_ms, earliest) << "job " << res.job << " iter " << iter;
      ++reservations_checked;
    }
  }
  EXPECT_GT(reservations_checked, 500) << "the generator must exercise reservations";
  EXPECT_GT(backfilled, 100) << "the generator must exercise backfill";
}

// Smallest (tier height, leaves) over every subset of `count` free nodes: brute force.
// Subsets must include candidate `forced` when it is not -1.
std::pair<int, int> BestSpan(const ClusterView& v, const std::vector<NodeIndex>& cand,
                             uint32_t count, int64_t forced) {
  std::pair<int, int> best = {99, 99};
  const size_t n = cand.size();
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    if (static_cast<uint32_t>(__builtin_popcount(mask)) != count) continue;
    bool has_forced = forced < 0;
    for (size_t i = 0; i < n; ++i) {
      if ((mask >> i & 1) && static_cast<int64_t>(cand[i]) == forced) has_forced = true;
    }
    if (!has_forced) continue;
    std::set<std::string> leaves, spines;
    for (size_t i = 0; i < n; ++i) {
      if (!(mask >> i & 1)) continue;
      const std::string& topo = v.nodes[cand[i]].topology;
      leaves.insert(topo);
      spines.insert(topo.substr(0, topo.find('/')));
    }
    int height = leaves.size() == 1 ? 1 : spines.size() == 1 ? 2 : 3;
    best = std::min(best, {height, static_cast<int>(leaves.size())});
  }
  return best;
}

TEST(BruteForceTest, GangSpansTheFewestLeavesAtTheLowestTier) {
  std::mt19937 rng(7);
  int checked = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    ClusterView v;
    PartitionView p;
    p.name = "gpu";
    uint32_t nodes = 2 + rng() % 11;
    for (uint32_t i = 0; i < nodes; ++i) {
      std::string topo = "spine" + std::to_string(rng() % 2) + "/leaf" + std::to_string(rng() % 3);
      v.nodes.push_back(NodeView::Empty("n" + std::to_string(i), 8, 64000, 4, "h100", topo));
      for (uint32_t g = 0; g < 4; ++g) v.nodes.back().gpu_free[g] = rng() % 3 != 0;
      p.nodes.push_back(i);
    }
    v.partitions.push_back(p);
    JobRequest r;
    r.partitions = {"gpu"};
    r.nodes = 1 + rng() % std::min<uint32_t>(nodes, 6);
    r.tasks_per_node.assign(r.nodes, 1);
    r.gpus_per_node = 1 + rng() % 4;
    std::vector<NodeIndex> cand;
    for (uint32_t i = 0; i < nodes; ++i) {
      if (v.nodes[i].FreeGpus() >= r.gpus_per_node) cand.push_back(i);
    }
    // A third of the time one of the candidates is required (--nodelist).
    int64_t forced = -1;
    if (!cand.empty() && rng() % 3 == 0) {
      forced = cand[rng() % cand.size()];
      r.required_nodes = {v.nodes[static_cast<size_t>(forced)].name};
    }
    auto placed = Place(r, v, PlaceMode::kNow);
    if (cand.size() < r.nodes) {
      ASSERT_FALSE(placed.ok());
      continue;
    }
    ASSERT_TRUE(placed.ok()) << placed.status().ToString();
    if (forced >= 0) {
      ASSERT_TRUE(Honours(v, r, placed->nodes)) << "iter " << iter;
    }
    std::set<std::string> leaves, spines;
    for (const auto& np : placed->nodes) {
      const std::string& topo = v.nodes[np.node].topology;
      leaves.insert(topo);
      spines.insert(topo.substr(0, topo.find('/')));
    }
    int height = leaves.size() == 1 ? 1 : spines.size() == 1 ? 2 : 3;
    std::pair<int, int> ours = {height, static_cast<int>(leaves.size())};
    ASSERT_EQ(ours, BestSpan(v, cand, r.nodes, forced)) << "iter " << iter;
    ++checked;
  }
  EXPECT_GT(checked, 1000);
}

}  // namespace
}  // namespace muster::core
