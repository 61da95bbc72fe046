// The resource ledger: units held and released exactly, through the engine and on its own.
#include "resource_ledger.h"

#include "engine_fixture.h"

namespace muster::controller {
namespace {

TEST_F(EngineTest, MigSlicesShardsAndCountedGresAreAllocatedByUnit) {
  config_.nodes[0].gres = {{"gpu", "1g.10gb", 7}, {"nvme", "", 2}};
  config_.nodes[1].shards_per_gpu = 4;
  Restart();
  AllUp();
  EXPECT_EQ(Node("node1").gres(), "gpu:1g.10gb:7,nvme:2");
  EXPECT_EQ(Node("node2").gres(), "shard:32");
  v1::JobSpec mig;
  mig.set_gpus_per_node(2);
  mig.set_gpu_type("1G.10GB");
  auto m = Submit(mig);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Job(*m).gres(), "gpu:1g.10gb:2") << "a MIG profile as GPU type asks for slices";
  EXPECT_EQ(Job(*m).gpus_per_node(), 0u);
  v1::JobSpec shards;
  auto* g = shards.add_gres();
  g->set_name("shard");
  g->set_count(3);
  auto sh = Submit(shards);
  ASSERT_TRUE(sh.ok()) << sh.status().ToString();
  v1::JobSpec disks;
  g = disks.add_gres();
  g->set_name("nvme");
  g->set_count(3);
  auto d = Submit(disks);
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("asks for 3 nvme per node"), std::string::npos)
      << d.status().message();
  Pass();
  v1::JobInfo mj = Job(*m);
  ASSERT_EQ(mj.state(), v1::RUNNING);
  EXPECT_EQ(mj.nodes(0), "node1");
  ASSERT_EQ(mj.allocation().nodes(0).gres_size(), 1);
  EXPECT_EQ(mj.allocation().nodes(0).gres(0).units_size(), 2);
  v1::JobInfo sj = Job(*sh);
  ASSERT_EQ(sj.state(), v1::RUNNING);
  EXPECT_EQ(sj.nodes(0), "node2");
  ASSERT_EQ(sj.allocation().nodes(0).gres(0).on_gpu_size(), 3);
  EXPECT_EQ(Node("node2").gres_used(), "shard:3");
  EXPECT_EQ(Node("node2").gpus_allocated(), 1u) << "the shards' GPU is not free whole";
  EXPECT_EQ(Node("node1").gres_used(), "gpu:1g.10gb:2,nvme:0");
  // Held units survive a controller restart.
  Restart();
  Up("node1", {*m});
  Up("node2", {*sh});
  Up("node3");
  Up("node4");
  Pass();
  EXPECT_EQ(Node("node2").gres_used(), "shard:3");
  EXPECT_EQ(Node("node1").gres_used(), "gpu:1g.10gb:2,nvme:0");
  // And are free again once the job has left the node.
  Started(*sh, "node2");
  Exited(*sh, "node2", 0);
  Cleaned(*sh, "node2");
  EXPECT_EQ(Node("node2").gres_used(), "shard:0");
  EXPECT_EQ(Node("node2").gpus_allocated(), 0u);
}

}  // namespace
}  // namespace muster::controller

namespace muster::controller {
namespace {

// The ledger on its own, over the fixture's configuration.
class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = ParseConfig(kConfig, "test.toml");
    ASSERT_TRUE(c.ok());
    config_ = *c;
    ledger_ = std::make_unique<ResourceLedger>(config_);
  }

  // `cpus` CPUs from `first_cpu` and GPUs `gpus` on node `node`.
  static core::Placement On(core::NodeIndex node, uint32_t first_cpu, uint32_t cpus,
                            std::vector<uint32_t> gpus, uint64_t mem_mb = 1000) {
    core::Placement p;
    p.partition = "gpu";
    core::NodePlacement np;
    np.node = node;
    for (uint32_t c = 0; c < cpus; ++c) np.cpus.push_back(first_cpu + c);
    np.gpus = std::move(gpus);
    np.mem_mb = mem_mb;
    np.ntasks = 1;
    p.nodes.push_back(np);
    return p;
  }

  Config config_;
  std::unique_ptr<ResourceLedger> ledger_;
};

TEST_F(LedgerTest, HoldsAndReleasesExactlyWhatWasPlaced) {
  const core::Placement a = On(0, 0, 4, {0, 1}, 8000);
  ASSERT_TRUE(ledger_->Fits(a));
  ledger_->Hold(1, a);
  EXPECT_TRUE(ledger_->Holds(0, 1));
  EXPECT_FALSE(ledger_->Fits(a)) << "nothing is held twice";
  EXPECT_FALSE(ledger_->Fits(On(0, 3, 2, {})));
  EXPECT_TRUE(ledger_->Fits(On(0, 4, 2, {2})));
  EXPECT_EQ(ledger_->node(0).FreeGpus(), 6u);
  EXPECT_EQ(ledger_->node(0).memory_free_mb, 64000u - 8000u);
  ASSERT_TRUE(ledger_->CheckInvariants().ok());

  EXPECT_TRUE(ledger_->Release(1, 0));
  EXPECT_FALSE(ledger_->Release(1, 0)) << "released once";
  EXPECT_TRUE(ledger_->Fits(a));
  EXPECT_EQ(ledger_->node(0).FreeGpus(), 8u);
  EXPECT_EQ(ledger_->node(0).memory_free_mb, 64000u);
  EXPECT_TRUE(ledger_->CheckInvariants().ok());
}

TEST_F(LedgerTest, RecordsAndPlacementsConvertBothWays) {
  const core::Placement a = On(2, 8, 2, {5, 7});
  const v1::Allocation alloc = ledger_->ToAllocation(a);
  ASSERT_EQ(alloc.nodes_size(), 1);
  EXPECT_EQ(alloc.partition(), "gpu");
  EXPECT_EQ(alloc.nodes(0).node(), "node3");
  EXPECT_EQ(alloc.nodes(0).cpu_ids_size(), 2);
  const core::NodePlacement back = ledger_->PlacementOf(alloc.nodes(0), 2);
  EXPECT_EQ(back.cpus, a.nodes[0].cpus);
  EXPECT_EQ(back.gpus, a.nodes[0].gpus);
  EXPECT_EQ(back.mem_mb, a.nodes[0].mem_mb);
}

TEST_F(LedgerTest, ARecoveredRecordNeverHoldsAUnitTwiceOrOneTheNodeLacks) {
  ledger_->Hold(1, On(0, 0, 2, {0}));
  v1::JobRecord rec;
  rec.set_id(2);
  rec.set_state(v1::RUNNING);
  v1::NodeAllocation* na = rec.mutable_allocation()->add_nodes();
  na->set_node("node1");
  for (uint32_t c : {1u, 2u, 99u}) na->add_cpu_ids(c);  // cpu 1 is job 1's, cpu 99 does not exist
  for (uint32_t g : {0u, 3u}) na->add_gpu_indices(g);   // gpu 0 is job 1's
  auto index = [&](const std::string& n) -> std::optional<size_t> {
    return n == "node1" ? std::optional<size_t>(0) : std::nullopt;
  };
  ledger_->HoldRecovered(rec, index);
  EXPECT_EQ(ledger_->held(0).at(2).cpus, std::vector<uint32_t>{2});
  EXPECT_EQ(ledger_->held(0).at(2).gpus, std::vector<uint32_t>{3});
  EXPECT_TRUE(ledger_->CheckInvariants().ok()) << ledger_->CheckInvariants().ToString();

  // A finished job holds only the nodes still cleaning up.
  v1::JobRecord done = rec;
  done.set_id(3);
  done.set_state(v1::COMPLETED);
  ledger_->HoldRecovered(done, index);
  EXPECT_FALSE(ledger_->Holds(0, 3));
}

TEST_F(LedgerTest, RunningUseTellsWhenEachHoldingEnds) {
  ledger_->Hold(1, On(0, 0, 4, {0, 1}));
  ledger_->Hold(2, On(1, 0, 2, {}));
  core::ClusterView view;
  ledger_->AddRunningUse(view, [](uint64_t job) { return static_cast<TimeMs>(job * 1000); });
  ASSERT_EQ(view.running.size(), 2u);
  EXPECT_EQ(view.running[0].job, 1u);
  EXPECT_EQ(view.running[0].cpus, 4u);
  EXPECT_EQ(view.running[0].gpus, 2u);
  EXPECT_EQ(view.running[0].end_ms, 1000);
  EXPECT_EQ(view.running[1].node, 1u);
  EXPECT_EQ(view.running[1].end_ms, 2000);
}

}  // namespace
}  // namespace muster::controller
