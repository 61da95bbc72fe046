// Node features, weights and GRES set live: the GRES text (pure), the settings laid over the
// file's nodes, the changes an admin may plan, and what a restart of the engine keeps.
#include "node_overlay.h"

#include "engine_fixture.h"

namespace muster::controller {
namespace {

using Req = v1::UpdateNodeRequest;

Req Set(const std::string& nodes) {
  Req r;
  r.set_action(Req::SET);
  r.set_nodes(nodes);
  return r;
}

Req Reset(const std::string& nodes, std::vector<std::string> fields = {}) {
  Req r;
  r.set_action(Req::RESET);
  r.set_nodes(nodes);
  for (auto& f : fields) r.add_reset(f);
  return r;
}

class NodeOverlayTest : public EngineTest {
 protected:
  // Plans, stores and applies a change as ControllerRunner::ChangeNodes does: the engine
  // recovered from the store again, under the same file; the agents register again, each with
  // the jobs `running_` says it runs.
  Status Apply(const Req& req, Caller who = Root()) {
    auto plan = engine_->PlanNodeSettings(who, req, now_);
    if (!plan.ok()) return plan.status();
    MUSTER_RETURN_IF_ERROR(engine_->CommitNodeSettings(*plan));
    Restart();
    for (const char* n : {"node1", "node2", "node3", "node4"}) Up(n, running_[n]);
    return Status::Ok();
  }
  std::map<std::string, std::vector<uint64_t>> running_;
  const NodeConfig& Running(const std::string& name) { return *engine_->config().FindNode(name); }
};

TEST(LiveGresTest, WholeGpusAndOtherGresReplaceTheFilesAndBadTextIsRefused) {
  NodeConfig n;
  n.name = "n1";
  n.gpus = 8;
  n.gpu_type = "h100";
  n.gres = {{"nvme", "", 2}};
  NodeConfig a = n;
  ASSERT_TRUE(ApplyLiveGres("gpu:4,bandwidth:fast:100", a).ok());
  EXPECT_EQ(a.gpus, 4u);
  EXPECT_EQ(a.gpu_type, "h100") << "no type given: the file's";
  ASSERT_EQ(a.gres.size(), 1u) << "nvme replaced";
  EXPECT_EQ(a.gres[0], (NodeConfig::Gres{"bandwidth", "fast", 100}));
  a = n;
  ASSERT_TRUE(ApplyLiveGres("GPU:A100:2, NVMe", a).ok());
  EXPECT_EQ(a.gpus, 2u);
  EXPECT_EQ(a.gpu_type, "A100") << "a GPU type as written";
  a = n;
  ASSERT_TRUE(ApplyLiveGres("gpu:H100:4", a).ok());
  EXPECT_EQ(a.gpu_type, "h100") << "the file's spelling of the same type";
  a = n;
  ASSERT_TRUE(ApplyLiveGres("gpu:2,nvme", a).ok());
  EXPECT_EQ(a.gres[0], (NodeConfig::Gres{"nvme", "", 1})) << "a count defaults to 1";
  a = n;
  ASSERT_TRUE(ApplyLiveGres("gpu:0", a).ok()) << "Slurm's way to take a node's GPUs away";
  EXPECT_EQ(a.gpus, 0u);
  EXPECT_TRUE(a.gres.empty());
  a = n;
  ASSERT_TRUE(ApplyLiveGres("(null)", a).ok());
  EXPECT_EQ(a.gpus, 0u);
  for (const char* bad : {"gpu:h100:4:x", "gpu:4,gpu:a100:2", "nvme:2,nvme:3", "shard:32",
                          "gpu:2000", "bad name:1", ":4", "nvme:fast:200000"}) {
    a = n;
    Status s = ApplyLiveGres(bad, a);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(a, n) << bad << ": nothing changed";
  }
  // MIG slices and shards stay the file's.
  NodeConfig mig = n;
  mig.gres = {{"gpu", "1g.10gb", 7}, {"nvme", "", 2}};
  mig.shards_per_gpu = 4;
  ASSERT_TRUE(ApplyLiveGres("gpu:6,ib", mig).ok());
  EXPECT_EQ(mig.gpus, 6u);
  EXPECT_EQ(mig.shards_per_gpu, 4u);
  EXPECT_EQ(mig.gres, (std::vector<NodeConfig::Gres>{{"gpu", "1g.10gb", 7}, {"ib", "", 1}}));
}

TEST_F(NodeOverlayTest, FeaturesAndWeightSetLiveOutliveARestartUntilReset) {
  AllUp();
  v1::JobSpec fast = Gang(1, 1);
  fast.set_constraint("fast");
  EXPECT_EQ(Submit(fast).status().code(), StatusCode::kFailedPrecondition)
      << "no node has the feature yet";
  Req r = Set("node[1-2]");
  r.mutable_settings()->mutable_features()->add_names("fast");
  r.mutable_settings()->mutable_features()->add_names("ib");
  r.mutable_settings()->set_weight(5);
  const Caller alice{1000, 1000, "alice", false};
  EXPECT_EQ(Apply(r, alice).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(Apply(r).ok());
  EXPECT_EQ(Running("node1").features, (std::vector<std::string>{"fast", "ib"}));
  EXPECT_EQ(Running("node2").weight, 5u);
  EXPECT_EQ(Running("node3").features, (std::vector<std::string>{"ib", "nvl"})) << "untouched";
  EXPECT_TRUE(engine_->file_config().FindNode("node1")->features.empty()) << "the file's kept";
  auto id = Submit(fast);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Pass();
  const v1::JobInfo j = Job(*id);
  ASSERT_EQ(j.state(), v1::RUNNING);
  EXPECT_TRUE(j.nodes(0) == "node1" || j.nodes(0) == "node2") << j.nodes(0);
  running_[j.nodes(0)] = {*id};
  const v1::NodeInfo info = Node("node1");
  EXPECT_EQ(info.features(), "fast,ib");
  EXPECT_EQ(info.weight(), 5u);
  EXPECT_EQ(std::vector<std::string>(info.live().begin(), info.live().end()),
            (std::vector<std::string>{"features", "weight"}));
  // A second change keeps what it does not name; a reset of one field keeps the others.
  Req w = Set("node1");
  w.mutable_settings()->set_weight(7);
  ASSERT_TRUE(Apply(w).ok());
  EXPECT_EQ(Running("node1").weight, 7u);
  EXPECT_EQ(Running("node1").features, (std::vector<std::string>{"fast", "ib"}));
  ASSERT_TRUE(Apply(Reset("node1", {"features"})).ok());
  EXPECT_TRUE(Running("node1").features.empty());
  EXPECT_EQ(Running("node1").weight, 7u);
  ASSERT_TRUE(Apply(Reset("node[1-2]")).ok());
  EXPECT_EQ(Running("node2").weight, 1u);
  EXPECT_TRUE(Running("node2").features.empty());
  EXPECT_TRUE(Node("node2").live().empty());
  EXPECT_EQ(Apply(Reset("node2")).code(), StatusCode::kInvalidArgument) << "nothing left to reset";
}

// A node the file no longer defines loses its live settings at the next start, so that a file
// that brings it back gives it the file's (as the reconfiguration that does so checked).
TEST_F(NodeOverlayTest, ARemovedNodesSettingsGoWithIt) {
  AllUp();
  Req r = Set("node4");
  r.mutable_settings()->set_weight(9);
  ASSERT_TRUE(Apply(r).ok());
  const Config full = config_;
  std::string smaller = kConfig;
  smaller.replace(smaller.find("node[3-4]"), 9, "node3");
  smaller.replace(smaller.find("node[1-4]"), 9, "node[1-3]");
  auto c = ParseConfig(smaller, "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  config_ = *c;
  Restart();
  config_ = full;
  Restart();
  EXPECT_EQ(Running("node4").weight, 1u);
  EXPECT_TRUE(engine_->node_settings().empty());
}

TEST_F(NodeOverlayTest, GresSetLiveNeverTakesWhatAJobHolds) {
  AllUp();
  auto id = Submit(Gang(1, 8));
  ASSERT_TRUE(id.ok());
  Pass();
  const std::string held = Job(*id).nodes(0);
  running_[held] = {*id};
  Req shrink = Set(held);
  shrink.mutable_settings()->set_gres("gpu:h100:4");
  auto plan = engine_->PlanNodeSettings(Root(), shrink, now_);
  ASSERT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find(std::to_string(*id)), std::string::npos)
      << plan.status().ToString();
  Req more = Set(held);
  more.mutable_settings()->set_gres("gpu:h100:8,nvme:2");
  ASSERT_TRUE(Apply(more).ok());
  EXPECT_EQ(Running(held).gres, (std::vector<NodeConfig::Gres>{{"nvme", "", 2}}));
  EXPECT_EQ(Job(*id).state(), v1::RUNNING) << "the job goes on under the new engine";
  // Another node's GPUs taken away live: nothing lands there, and the node is not drained for
  // having more GPUs than it is said to.
  const std::string other = held == "node1" ? "node2" : "node1";
  Req none = Set(other);
  none.mutable_settings()->set_gres("gpu:0");
  ASSERT_TRUE(Apply(none).ok());
  EXPECT_EQ(Node(other).gpus(), 0u);
  EXPECT_FALSE(Node(other).drain());
}

TEST_F(NodeOverlayTest, BadChangesAreRefusedWholeAndNameWhy) {
  AllUp();
  Req r = Set("node[1-9]");
  r.mutable_settings()->set_weight(3);
  auto plan = engine_->PlanNodeSettings(Root(), r, now_);
  EXPECT_EQ(plan.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->PlanNodeSettings(Root(), Set("node1"), now_).status().code(),
            StatusCode::kInvalidArgument)
      << "nothing to set";
  Req f = Set("node1");
  f.mutable_settings()->mutable_features()->add_names("a|b");
  EXPECT_EQ(engine_->PlanNodeSettings(Root(), f, now_).status().code(),
            StatusCode::kInvalidArgument);
  Req g = Set("ALL");
  g.mutable_settings()->set_gres("gpu:4:7:x");
  EXPECT_EQ(engine_->PlanNodeSettings(Root(), g, now_).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->PlanNodeSettings(Root(), Reset("node1", {"cpus"}), now_).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine_->node_settings().empty()) << "nothing stored";
}

// A stored GRES text that does not apply (written by hand, or by a later version) is left out at a
// start, named among the recovery problems; the rest of the node's settings still apply.
TEST(NodeOverlayPureTest, GresThatDoNotApplyAreLeftOutAndNamed) {
  Config c;
  NodeConfig n;
  n.name = "n1";
  n.gpus = 8;
  n.gpu_type = "a100";
  c.nodes.push_back(n);
  NodeSettingsMap s;
  s["n1"].set_gres("gpu:4:x:y");
  s["n1"].set_weight(9);
  s["gone"].set_weight(2);
  std::vector<std::string> problems;
  OverlayNodeSettings(c, s, &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("node n1"), std::string::npos) << problems[0];
  EXPECT_EQ(c.nodes[0].gpus, 8u);
  EXPECT_EQ(c.nodes[0].weight, 9u);
}

}  // namespace
}  // namespace muster::controller
