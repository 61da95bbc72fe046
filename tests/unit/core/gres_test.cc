// MIG slices, GPU shards and other counted GRES: placement by unit, the exclusion between a
// whole GPU and its shards, and backfill that respects reservations of either.
#include <gtest/gtest.h>

#include <random>

#include "cluster_builder.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

using testing::Pool;
using testing::Shards;

// node0: 4 whole H100s, 7 MIG 1g.10gb slices, 2 NVMe drives. node1: 2 GPUs shared as 4 shards each.
ClusterView Cluster() {
  testing::ClusterBuilder b;
  b.Nodes(1, {16, 64000, 4, "h100"}, "node", 0, testing::Under("leaf1"))
      .Nodes(1, {16, 64000, 2, "a100"}, "node", 1, testing::Under("leaf1"))
      .Partition("gpu");
  b.node(0).gres = {Pool("gpu", "1g.10gb", 7), Pool("nvme", "", 2)};
  b.node(1).gres = {Shards(2, 4)};
  return b.Build();
}

JobRequest Request(uint32_t gpus, std::vector<GresRequest> gres) {
  JobRequest r;
  r.partitions = {"gpu"};
  r.tasks_per_node = {1};
  r.gpus_per_node = gpus;
  r.gres = std::move(gres);
  return r;
}

TEST(GresTest, MigSlicesAreTheirOwnTypeAndCountedApartFromWholeGpus) {
  ClusterView v = Cluster();
  auto p = Place(Request(0, {{"gpu", "1g.10gb", 2}}), v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->nodes.size(), 1u);
  EXPECT_EQ(p->nodes[0].node, 0u);
  EXPECT_TRUE(p->nodes[0].gpus.empty());
  ASSERT_EQ(p->nodes[0].gres.size(), 1u);
  EXPECT_EQ(p->nodes[0].gres[0].first, 0u);
  EXPECT_EQ(p->nodes[0].gres[0].second, (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(Place(Request(4, {{"gpu", "1g.10gb", 7}, {"nvme", "", 2}}), v, PlaceMode::kNow).ok());
  EXPECT_FALSE(Place(Request(0, {{"gpu", "1g.10gb", 8}}), v, PlaceMode::kEver).ok());
  EXPECT_FALSE(Place(Request(0, {{"gpu", "3g.40gb", 1}}), v, PlaceMode::kEver).ok());
  // Taken slices are gone for the next job.
  Allocate(*p, v);
  EXPECT_FALSE(Place(Request(0, {{"gpu", "1g.10gb", 6}}), v, PlaceMode::kNow).ok());
  EXPECT_TRUE(Place(Request(0, {{"gpu", "1g.10gb", 5}}), v, PlaceMode::kNow).ok());
  Release(*p, v);
  EXPECT_TRUE(v.nodes[0].Idle());
}

TEST(GresTest, ShardsShareOneGpuAndExcludeWholeUse) {
  ClusterView v = Cluster();
  auto a = Place(Request(0, {{"shard", "", 2}}), v, PlaceMode::kNow);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->nodes[0].node, 1u);
  ASSERT_EQ(a->nodes[0].gres.size(), 1u);
  const auto& units = a->nodes[0].gres[0].second;
  ASSERT_EQ(units.size(), 2u);
  EXPECT_EQ(v.nodes[1].gres[0].on_gpu[units[0]], v.nodes[1].gres[0].on_gpu[units[1]])
      << "both shards on one GPU";
  Allocate(*a, v);
  EXPECT_EQ(v.nodes[1].FreeGpus(), 1u) << "a GPU with shards in use is not free whole";
  JobRequest both = Request(2, {});
  both.gpu_type = "a100";
  EXPECT_FALSE(Place(both, v, PlaceMode::kNow).ok());
  // Best fit: two more shards fill the GPU already in use.
  auto b = Place(Request(0, {{"shard", "", 2}}), v, PlaceMode::kNow);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(v.nodes[1].gres[0].on_gpu[b->nodes[0].gres[0].second[0]],
            v.nodes[1].gres[0].on_gpu[units[0]]);
  Allocate(*b, v);
  // A whole GPU taken closes its shards.
  JobRequest one = Request(1, {});
  one.gpu_type = "a100";
  auto c = Place(one, v, PlaceMode::kNow);
  ASSERT_TRUE(c.ok());
  Allocate(*c, v);
  EXPECT_EQ(v.nodes[1].gres[0].FreeUnits(), 0u);
  EXPECT_FALSE(Place(Request(0, {{"shard", "", 1}}), v, PlaceMode::kNow).ok());
  Release(*a, v);
  EXPECT_EQ(v.nodes[1].FreeGpus(), 0u) << "job b still holds shards on that GPU";
  Release(*b, v);
  EXPECT_EQ(v.nodes[1].FreeGpus(), 1u);
  Release(*c, v);
  EXPECT_TRUE(v.nodes[1].Idle());
}

TEST(GresTest, ExclusiveTakesEveryUnit) {
  ClusterView v = Cluster();
  JobRequest r = Request(0, {});
  r.exclusive = true;
  auto p = Place(r, v, PlaceMode::kNow);
  ASSERT_TRUE(p.ok());
  Allocate(*p, v);
  EXPECT_FALSE(v.nodes[p->nodes[0].node].Idle());
  for (const GresView& pool : v.nodes[p->nodes[0].node].gres) EXPECT_EQ(pool.FreeUnits(), 0u);
  Release(*p, v);
  EXPECT_TRUE(v.nodes[p->nodes[0].node].Idle());
}

TEST(GresTest, BackfillKeepsShardsOffAGpuReservedWhole) {
  ClusterView v = Cluster();
  // GPU0 of node1 is taken whole until t=5000.
  NodePlacement busy{1, {}, 0, {0}, 1, {}};
  v.nodes[1].Take(busy);
  v.running.push_back({99, 1, 5'000, 0, 1, 0, {0}});
  PendingJob whole{1, 0, Request(2, {}), -1, {}, false};
  whole.request.gpu_type = "a100";
  whole.request.time_limit_ms = 1'000;
  whole.priority.fixed = 100;
  PendingJob long_shards{2, 0, Request(0, {{"shard", "", 2}}), -1, {}, false};
  long_shards.request.time_limit_ms = 10'000;
  long_shards.priority.fixed = 1;
  SchedulePass pass = Schedule(v, {whole, long_shards}, 0, {});
  ASSERT_EQ(pass.reservations.size(), 2u);
  EXPECT_EQ(pass.reservations[0].start_ms, 5'000);
  EXPECT_TRUE(pass.starts.empty()) << "shards on GPU1 until t=10000 would delay the reservation";
  long_shards.request.time_limit_ms = 4'000;
  pass = Schedule(v, {whole, long_shards}, 0, {});
  ASSERT_EQ(pass.starts.size(), 1u) << "ends before the reservation: it backfills";
  EXPECT_EQ(pass.starts[0].job, 2u);
}

TEST(GresTest, AForecastTellsApartNodesThatDifferOnlyInTheirGres) {
  // Three alike nodes with two NVMe drives each. node0 runs a 1-CPU job, node1 a 1-CPU job that
  // also holds both its drives, both until t=5000; node2 is full until t=9000. Without their
  // GRES the forecast cannot tell node0 from node1 (same capacity, same free CPUs, same release).
  // Six more idle nodes without drives make the cluster alike enough for forecasts to ask by
  // node class (Profile::Classify).
  testing::ClusterBuilder b;
  b.Nodes(9, {16, 64000, 0, ""}, "node", 0, testing::Under("leaf1")).Partition("gpu");
  for (int i = 0; i < 3; ++i) b.node(i).gres = {Pool("nvme", "", 2)};
  ClusterView v = b.Build();
  auto run = [&](JobId job, NodeIndex n, uint32_t cpus, uint32_t drives, TimeMs end) {
    NodePlacement np{n, {}, 0, {}, 1, {}};
    for (uint32_t c = 0; c < cpus; ++c) np.cpus.push_back(c);
    if (drives) np.gres = {{0, {0, 1}}};
    v.nodes[n].Take(np);
    v.running.push_back({job, n, end, cpus, 0, 0, {drives}});
  };
  run(97, 0, 1, 0, 5'000);
  run(98, 1, 1, 2, 5'000);
  run(99, 2, 16, 0, 9'000);
  PendingJob gang{1, 0, Request(0, {{"nvme", "", 2}}), -1, {}, false};
  gang.request.nodes = 2;
  gang.request.tasks_per_node = {1, 1};
  gang.request.time_limit_ms = 1'000;
  SchedulePass pass = Schedule(v, {gang}, 0, {});
  ASSERT_TRUE(pass.starts.empty());
  ASSERT_EQ(pass.reservations.size(), 1u);
  EXPECT_EQ(pass.reservations[0].start_ms, 5'000) << "node1's drives are busy until then";
}

TEST(GresTest, RandomTakesAndGivesNeverBindAUnitTwice) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 300; ++iter) {
    ClusterView v = Cluster();
    std::vector<Placement> live;
    for (int step = 0; step < 40; ++step) {
      if (!live.empty() && rng() % 3 == 0) {
        size_t k = rng() % live.size();
        Release(live[k], v);
        live.erase(live.begin() + static_cast<long>(k));
        continue;
      }
      JobRequest r = Request(rng() % 3, {});
      switch (rng() % 4) {
        case 0:
          r.gres = {{"shard", "", 1 + static_cast<uint32_t>(rng() % 5)}};
          break;
        case 1:
          r.gres = {{"gpu", "1g.10gb", 1 + static_cast<uint32_t>(rng() % 3)}};
          break;
        case 2:
          r.gres = {{"nvme", "", 1}};
          break;
        default:
          break;
      }
      auto p = Place(r, v, PlaceMode::kNow);
      if (!p.ok()) continue;
      // Every unit and GPU handed out must be free before the take.
      for (const NodePlacement& np : p->nodes) {
        const NodeView& n = v.nodes[np.node];
        for (uint32_t g : np.gpus) ASSERT_TRUE(n.gpu_free[g]) << "iter " << iter;
        for (const auto& [pool, units] : np.gres) {
          for (uint32_t u : units) ASSERT_TRUE(n.gres[pool].free[u]) << "iter " << iter;
        }
        ASSERT_EQ(np.gpus.size(), r.gpus_per_node);
      }
      Allocate(*p, v);
      live.push_back(*p);
      // A GPU is free exactly when it is not taken whole and none of its shards is taken.
      const NodeView& n1 = v.nodes[1];
      for (uint32_t g = 0; g < n1.gpus; ++g) {
        bool shard_taken = false;
        for (size_t u = 0; u < n1.gres[0].free.size(); ++u) {
          if (n1.gres[0].on_gpu[u] == g && !n1.gres[0].free[u]) shard_taken = true;
        }
        if (n1.gpu_free[g]) {
          ASSERT_FALSE(shard_taken) << "iter " << iter;
        }
      }
    }
    for (const Placement& p : live) Release(p, v);
    ASSERT_TRUE(v.nodes[0].Idle());
    ASSERT_TRUE(v.nodes[1].Idle()) << "iter " << iter;
  }
}

}  // namespace
}  // namespace muster::core
