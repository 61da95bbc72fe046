// Partitions changed live: the records laid over the file's partitions (pure), the changes an
// admin may plan against them, and what a restart of the engine keeps.
#include "partition_overlay.h"

#include "engine_fixture.h"

namespace muster::controller {
namespace {

using Req = v1::UpdatePartitionRequest;

Req Change(Req::Action a, const std::string& name) {
  Req r;
  r.set_action(a);
  r.set_name(name);
  return r;
}

std::vector<std::string> Names(const Config& c) {
  std::vector<std::string> out;
  for (const auto& p : c.partitions) out.push_back(p.name + (p.is_default ? "*" : ""));
  return out;
}

class PartitionOverlayTest : public EngineTest {
 protected:
  // Plans, stores and applies a change as ControllerRunner::ChangePartition does, the engine
  // recovered from the store again (what the runner's reconfiguration does).
  Status Apply(const Req& req, Caller who = Root()) {
    auto plan = engine_->PlanPartitionChange(who, req, now_);
    if (!plan.ok()) return plan.status();
    MUSTER_RETURN_IF_ERROR(engine_->CommitPartitionChange(*plan));
    Restart();
    AllUp();
    return Status::Ok();
  }
};

TEST_F(PartitionOverlayTest, RecordsReplaceRemoveAndAddAndOneThatNoLongerHoldsIsLeftOut) {
  v1::PartitionRecord debug;
  debug.set_name("debug");
  debug.set_nodes("node[1-2]");
  debug.set_is_default(true);
  debug.set_max_time_ms(600'000);
  v1::PartitionRecord gone;
  gone.set_name("gpu");
  gone.set_removed(true);
  v1::PartitionRecord stale;
  stale.set_name("old");
  stale.set_nodes("node9");
  Overlaid o = OverlayPartitions(config_, {debug, gone, stale});
  EXPECT_EQ(Names(o.config), std::vector<std::string>{"debug*"});
  EXPECT_EQ(o.config.FindPartition("debug")->nodes, (std::vector<std::string>{"node1", "node2"}));
  ASSERT_EQ(o.problems.size(), 1u);
  EXPECT_NE(o.problems[0].find("'old'"), std::string::npos);
  EXPECT_NE(o.problems[0].find("node9"), std::string::npos);
  EXPECT_NE(o.problems[0].find("left out"), std::string::npos);
  // A file partition's live definition whose node is gone keeps its rules on the nodes left;
  // the file's own (open to all) never comes back in its place.
  v1::PartitionRecord closed;
  closed.set_name("gpu");
  closed.set_nodes("node[3-9]");
  closed.add_allowed_uids("alice");
  o = OverlayPartitions(config_, {closed});
  ASSERT_NE(o.config.FindPartition("gpu"), nullptr);
  EXPECT_EQ(o.config.FindPartition("gpu")->nodes, (std::vector<std::string>{"node3", "node4"}));
  EXPECT_EQ(o.config.FindPartition("gpu")->allowed_uids, std::vector<std::string>{"alice"});
  ASSERT_EQ(o.problems.size(), 1u);
  EXPECT_NE(o.problems[0].find("kept on node[3-4] only"), std::string::npos) << o.problems[0];
  // The newest default wins, whatever the names' order.
  v1::PartitionRecord old_default;
  old_default.set_name("zeta");
  old_default.set_nodes("node1");
  old_default.set_is_default(true);
  old_default.set_updated_ms(1);
  v1::PartitionRecord new_default = old_default;
  new_default.set_name("alpha");
  new_default.set_updated_ms(2);
  o = OverlayPartitions(config_, {new_default, old_default});
  EXPECT_EQ(Names(o.config), (std::vector<std::string>{"gpu", "zeta", "alpha*"}));
  // Without the file's default, the first partition is the default, as in a file.
  debug.set_is_default(false);
  o = OverlayPartitions(config_, {gone, debug});
  EXPECT_EQ(Names(o.config), std::vector<std::string>{"debug*"});
}

TEST_F(PartitionOverlayTest, WhatAChangeMayBe) {
  const Config& c = config_;
  EXPECT_EQ(PlanPartitionChange(Change(Req::CREATE, "gpu"), c, c, {}, "ops", 0).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(PlanPartitionChange(Change(Req::UPDATE, "nope"), c, c, {}, "ops", 0).status().code(),
            StatusCode::kNotFound);
  Req bad = Change(Req::CREATE, "debug");
  EXPECT_EQ(PlanPartitionChange(bad, c, c, {}, "ops", 0).status().code(),
            StatusCode::kInvalidArgument)
      << "no nodes";
  bad.set_nodes("node[1-9]");
  auto unknown = PlanPartitionChange(bad, c, c, {}, "ops", 0);
  ASSERT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("node5"), std::string::npos);
  bad.set_nodes("node1");
  bad.set_preempt_mode("sometimes");
  EXPECT_EQ(PlanPartitionChange(bad, c, c, {}, "ops", 0).status().code(),
            StatusCode::kInvalidArgument);
  Req name = Change(Req::CREATE, "a b");
  name.set_nodes("node1");
  EXPECT_EQ(PlanPartitionChange(name, c, c, {}, "ops", 0).status().code(),
            StatusCode::kInvalidArgument);
  Req undefault = Change(Req::UPDATE, "gpu");
  undefault.set_is_default(false);
  EXPECT_EQ(PlanPartitionChange(undefault, c, c, {}, "ops", 0).status().code(),
            StatusCode::kInvalidArgument)
      << "make another the default instead";
  Req huge = Change(Req::CREATE, "long");
  huge.set_nodes("node1");
  huge.set_max_time_ms(int64_t{1} << 62);
  EXPECT_EQ(PlanPartitionChange(huge, c, c, {}, "ops", 0).status().code(),
            StatusCode::kInvalidArgument);
  // Neither the default nor the last partition is deleted.
  EXPECT_EQ(PlanPartitionChange(Change(Req::DELETE, "gpu"), c, c, {}, "ops", 5).status().code(),
            StatusCode::kFailedPrecondition);
  // A live definition left out (its nodes gone) may still be deleted.
  v1::PartitionRecord stale;
  stale.set_name("old");
  stale.set_nodes("node9");
  auto gone = PlanPartitionChange(Change(Req::DELETE, "old"), c, c, {stale}, "ops", 5);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_FALSE(gone->record.has_value());
  // A file partition deleted leaves a record that removes it; a reset leaves none.
  Config two = c;
  PartitionConfig other = c.partitions[0];
  other.name = "other";
  other.is_default = false;
  two.partitions.push_back(other);
  Config two_file = two;
  two_file.partitions[0].is_default = false;
  two_file.partitions[1].is_default = true;
  auto del = PlanPartitionChange(Change(Req::DELETE, "gpu"), two_file, two_file, {}, "ops", 5);
  ASSERT_TRUE(del.ok());
  ASSERT_TRUE(del->record.has_value());
  EXPECT_TRUE(del->record->removed());
  EXPECT_EQ(del->record->user(), "ops");
  auto reset = PlanPartitionChange(Change(Req::RESET, "gpu"), c, c, {}, "ops", 5);
  ASSERT_TRUE(reset.ok());
  EXPECT_FALSE(reset->record.has_value());
  // An update keeps what it does not name.
  Req tier = Change(Req::UPDATE, "gpu");
  tier.set_priority_tier(7);
  auto updated = PlanPartitionChange(tier, c, c, {}, "ops", 5);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated->record->priority_tier(), 7u);
  EXPECT_EQ(updated->record->nodes(), "node[1-4]");
  EXPECT_TRUE(updated->record->is_default());
}

TEST_F(PartitionOverlayTest, ALivePartitionTakesJobsSurvivesARestartAndGoesOnlyWhenIdle) {
  AllUp();
  Req create = Change(Req::CREATE, "debug");
  create.set_nodes("node[3-4]");
  create.set_max_time_ms(60'000);
  create.set_allowed_uids("alice");
  EXPECT_EQ(Apply(create, Alice()).code(), StatusCode::kPermissionDenied) << "admins only";
  ASSERT_TRUE(Apply(create).ok());
  ASSERT_NE(engine_->config().FindPartition("debug"), nullptr);
  EXPECT_EQ(engine_->config().FindPartition("debug")->max_time_ms, 60'000);
  // Its own rules: bob may not submit, alice may; a job longer than its limit is refused.
  v1::JobSpec s = Gang(1, 1);
  s.add_partitions("debug");
  EXPECT_FALSE(Submit(s, Bob()).ok());
  auto id = Submit(s, Alice());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Pass();
  ASSERT_EQ(Job(*id).state(), v1::RUNNING);
  EXPECT_EQ(Job(*id).nodes(0).substr(0, 4), "node");
  EXPECT_GE(Job(*id).nodes(0), "node3");
  // Kept across a restart of the controller.
  Restart();
  AllUp();
  ASSERT_NE(engine_->config().FindPartition("debug"), nullptr);
  auto list = engine_->ListPartitions(Alice());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->partitions_size(), 2);
  EXPECT_EQ(list->partitions(1).origin(), "live");
  EXPECT_EQ(list->partitions(0).origin(), "file");
  // Not deleted while a job names it.
  auto refused = engine_->PlanPartitionChange(Root(), Change(Req::DELETE, "debug"), now_);
  ASSERT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(std::to_string(*id)), std::string::npos);
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(*id);
  ASSERT_TRUE(engine_->CancelJob(Root(), cancel, now_).ok());
  CleanUp(*id, 0);
  now_ += 120'000;
  engine_->Tick(now_);
  ASSERT_TRUE(Apply(Change(Req::DELETE, "debug")).ok());
  EXPECT_EQ(engine_->config().FindPartition("debug"), nullptr);
  // The file's partition changed live, then reset to the file's definition.
  Req tier = Change(Req::UPDATE, "gpu");
  tier.set_priority_tier(9);
  ASSERT_TRUE(Apply(tier).ok());
  EXPECT_EQ(engine_->config().FindPartition("gpu")->priority_tier, 9u);
  EXPECT_EQ(engine_->ListPartitions(Root())->partitions(0).origin(), "file, changed live");
  ASSERT_TRUE(Apply(Change(Req::RESET, "gpu")).ok());
  EXPECT_EQ(engine_->config().FindPartition("gpu")->priority_tier, 1u);
  EXPECT_TRUE(engine_->partition_records().empty());
}

}  // namespace
}  // namespace muster::controller
