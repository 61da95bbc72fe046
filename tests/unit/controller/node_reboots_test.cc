// Reboots an admin asks for, through the engine: who may, when the reboot is issued (after the
// node's last job), what the node is after it comes back from a new boot, time-outs, failures,
// cancelling, and a restart of the controller in the middle.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

class RebootTest : public EngineTest {
 protected:
  // A node whose agent can reboot it, in boot `boot`, as a fresh agent instance.
  void UpIn(const std::string& node, const std::string& boot, const std::string& instance) {
    Up(node, {}, instance, [&](v1::NodeInventory* inv) {
      inv->set_boot_id(boot);
      inv->set_can_reboot(true);
      inv->set_reboot_once_per_boot(true);
    });
  }
  void AllUpRebootable() {
    for (const char* n : {"node1", "node2", "node3", "node4"}) {
      UpIn(n, std::string(n) + "-boot1", std::string(n) + "-a");
    }
  }
  Status Reboot(const std::string& nodes, bool asap, const std::string& next = "",
                const std::string& reason = "", Caller who = Root()) {
    v1::UpdateNodeRequest r;
    r.set_nodes(nodes);
    r.set_action(v1::UpdateNodeRequest::REBOOT);
    r.set_asap(asap);
    r.set_next_state(next);
    r.set_reason(reason);
    return engine_->UpdateNode(who, r, now_).status();
  }
  void Drain(const std::string& node, const std::string& reason) {
    v1::UpdateNodeRequest r;
    r.set_nodes(node);
    r.set_action(v1::UpdateNodeRequest::DRAIN);
    r.set_reason(reason);
    ASSERT_TRUE(engine_->UpdateNode(Root(), r, now_).ok());
  }
  void Resume(const std::string& node) {
    v1::UpdateNodeRequest r;
    r.set_nodes(node);
    r.set_action(v1::UpdateNodeRequest::RESUME);
    ASSERT_TRUE(engine_->UpdateNode(Root(), r, now_).ok());
  }
  // The node's agent says its reboot program failed.
  void RebootFailed(const std::string& node, const std::string& error) {
    v1::AgentMessage m;
    m.mutable_reboot_failed()->set_error(error);
    Agent(node, m);
  }
  Status Cancel(const std::string& nodes, Caller who = Root()) {
    v1::UpdateNodeRequest r;
    r.set_nodes(nodes);
    r.set_action(v1::UpdateNodeRequest::CANCEL_REBOOT);
    return engine_->UpdateNode(who, r, now_).status();
  }
  // The reboot orders sent to `node` since the last look.
  std::vector<v1::RebootNode> RebootOrders(const std::string& node) {
    std::vector<v1::RebootNode> out;
    for (const auto& m : Sent(node)) {
      if (m.has_reboot_node()) out.push_back(m.reboot_node());
    }
    return out;
  }
  size_t RebootsSent(const std::string& node) { return RebootOrders(node).size(); }
  void Tick(TimeMs dt = 100) {
    now_ += dt;
    engine_->Tick(now_);
  }
};

TEST_F(RebootTest, AnAsapRebootDrainsWaitsForTheJobThenResumesFromTheNewBoot) {
  AllUpRebootable();
  auto id = *Submit(Gang(1, 8));
  Pass();
  const std::string node = Job(id).nodes(0);
  Run(id);
  Sent(node);
  // Only admins (not operators, not users).
  EXPECT_EQ(Reboot(node, true, "", "", Alice()).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(Reboot(node, true).ok());
  EXPECT_TRUE(Node(node).drain());
  EXPECT_EQ(Node(node).reason(), "Reboot ASAP");
  EXPECT_EQ(Node(node).reboot(), "requested");
  // It waits for the job: nothing is issued while it runs, and no new job lands there.
  Tick();
  EXPECT_EQ(RebootsSent(node), 0u);
  auto other = *Submit(Gang(4, 1));
  Pass();
  EXPECT_EQ(Job(other).state(), v1::PENDING);
  Exited(id, node, 0);
  Cleaned(id, node);
  Tick();
  EXPECT_EQ(RebootsSent(node), 1u);
  EXPECT_EQ(Node(node).reboot(), "issued");
  Tick();
  EXPECT_EQ(RebootsSent(node), 0u) << "issued once";
  // The same boot registering again (the agent restarted, the host did not) is not the reboot.
  UpIn(node, node + "-boot1", node + "-b");
  EXPECT_EQ(Node(node).reboot(), "issued");
  // A new boot is: the ASAP drain is lifted and the node takes work again.
  UpIn(node, node + "-boot2", node + "-c");
  EXPECT_EQ(Node(node).reboot(), "");
  EXPECT_FALSE(Node(node).drain()) << Node(node).reason();
  Pass();
  EXPECT_EQ(Job(other).state(), v1::RUNNING);
}

TEST_F(RebootTest, WithoutAsapTheNodeKeepsTakingWorkUntilIdleAndKeepsItsAdminDrain) {
  AllUpRebootable();
  Drain("node2", "bad fan");
  ASSERT_TRUE(Reboot("node[1-2]", false, "", "kernel update").ok());
  EXPECT_FALSE(Node("node1").drain());
  EXPECT_EQ(Node("node1").reason(), "kernel update");
  // Both idle: issued at the next tick.
  Tick();
  EXPECT_EQ(RebootsSent("node1"), 1u);
  EXPECT_EQ(RebootsSent("node2"), 1u);
  // Issued: no work goes there while it reboots.
  auto id = *Submit(Gang(3, 1));
  Pass();
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  UpIn("node1", "node1-boot2", "node1-b");
  UpIn("node2", "node2-boot2", "node2-b");
  EXPECT_FALSE(Node("node1").drain());
  EXPECT_TRUE(Node("node2").drain()) << "the admin's own drain stays";
  EXPECT_EQ(Node("node2").reason(), "bad fan");
}

TEST_F(RebootTest, NextStateDownLeavesItDrainedAndResumeLiftsAnyDrain) {
  AllUpRebootable();
  ASSERT_TRUE(Reboot("node1", false, "down", "firmware").ok());
  Drain("node2", "bad fan");
  ASSERT_TRUE(Reboot("node2", false, "RESUME").ok());
  EXPECT_EQ(Reboot("node3", false, "sideways").code(), StatusCode::kInvalidArgument);
  Tick();
  UpIn("node1", "node1-boot2", "node1-b");
  UpIn("node2", "node2-boot2", "node2-b");
  EXPECT_TRUE(Node("node1").drain());
  EXPECT_EQ(Node("node1").reason(), "firmware: reboot complete");
  EXPECT_FALSE(Node("node2").drain());
}

TEST_F(RebootTest, ARebootThatNeverComesBackOrFailsDrainsTheNodeWithWhy) {
  AllUpRebootable();
  ASSERT_TRUE(Reboot("node[1-2]", false).ok());
  Tick();
  ASSERT_EQ(RebootsSent("node1"), 1u);
  ASSERT_EQ(RebootsSent("node2"), 1u);
  // node2's agent could not run its program.
  RebootFailed("node2", "reboot program exited 1: no permission");
  EXPECT_TRUE(Node("node2").drain());
  EXPECT_EQ(Node("node2").reboot(), "");
  EXPECT_NE(Node("node2").reason().find("reboot failed: reboot program exited 1"),
            std::string::npos)
      << Node("node2").reason();
  // node1 never registers from a new boot (the default timeout is 600 s).
  Tick(599'000);
  EXPECT_EQ(Node("node1").reboot(), "issued");
  Tick(2'000);
  EXPECT_EQ(Node("node1").reboot(), "");
  EXPECT_TRUE(Node("node1").drain());
  EXPECT_NE(Node("node1").reason().find("reboot timed out"), std::string::npos);
}

// The order may be lost with a session that drops as it is sent: every new session from the
// boot the reboot was issued in gets it again, the same reboot (its issued time), until the
// node is back from a new boot; the timeout still counts from the first issue.
TEST_F(RebootTest, AnIssuedRebootIsSentAgainToEachNewSessionFromTheSameBoot) {
  AllUpRebootable();
  ASSERT_TRUE(Reboot("node1", false).ok());
  Tick();
  std::vector<v1::RebootNode> first = RebootOrders("node1");
  ASSERT_EQ(first.size(), 1u);
  const uint64_t issued = first[0].issued_ms();
  EXPECT_NE(issued, 0u);
  // The agent restarted (a new instance), still in boot 1.
  UpIn("node1", "node1-boot1", "node1-b");
  std::vector<v1::RebootNode> again = RebootOrders("node1");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].issued_ms(), issued) << "the same reboot, not a new one";
  Tick();
  EXPECT_EQ(RebootsSent("node1"), 0u) << "sent at the new session only";
  EXPECT_EQ(RebootsSent("node2"), 0u);
  Tick(500'000);
  UpIn("node1", "node1-boot1", "node1-c");
  EXPECT_EQ(RebootsSent("node1"), 1u);
  // Within the last minute before the timeout: a reboot started now could come back after it.
  Tick(50'000);
  UpIn("node1", "node1-boot1", "node1-d");
  EXPECT_EQ(RebootsSent("node1"), 0u);
  Tick(51'000);
  EXPECT_EQ(Node("node1").reboot(), "") << "timed out from the first issue";
  EXPECT_NE(Node("node1").reason().find("reboot timed out"), std::string::npos);
  UpIn("node1", "node1-boot1", "node1-e");
  EXPECT_EQ(RebootsSent("node1"), 0u) << "nothing issued any more";
}

// An agent that does not say it runs each reboot once per boot (one from before that) would run
// a repeated order again: it is not repeated to it.
TEST_F(RebootTest, AnAgentThatWouldRunARepeatedRebootAgainIsNotSentItAgain) {
  AllUpRebootable();
  ASSERT_TRUE(Reboot("node1", false).ok());
  Tick();
  ASSERT_EQ(RebootsSent("node1"), 1u);
  Up("node1", {}, "node1-old", [&](v1::NodeInventory* inv) {
    inv->set_boot_id("node1-boot1");
    inv->set_can_reboot(true);
  });
  EXPECT_EQ(RebootsSent("node1"), 0u);
  EXPECT_EQ(Node("node1").reboot(), "issued");
}

TEST_F(RebootTest, CancelDropsAWaitingRebootAndItsAsapDrainButNotAnIssuedOne) {
  AllUpRebootable();
  auto id = *Submit(Gang(1, 8));
  Pass();
  const std::string node = Job(id).nodes(0);
  Run(id);
  ASSERT_TRUE(Reboot(node, true).ok());
  EXPECT_EQ(Cancel(node, Alice()).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(Cancel(node).ok());
  EXPECT_FALSE(Node(node).drain());
  EXPECT_EQ(Node(node).reboot(), "");
  EXPECT_EQ(Cancel(node).code(), StatusCode::kFailedPrecondition) << "nothing left to cancel";
  Exited(id, node, 0);
  Cleaned(id, node);
  Tick();
  EXPECT_EQ(RebootsSent(node), 0u);
  // Issued: too late to call back.
  const std::string idle = node == "node1" ? "node2" : "node1";
  ASSERT_TRUE(Reboot(idle, false).ok());
  Tick();
  ASSERT_EQ(RebootsSent(idle), 1u);
  EXPECT_EQ(Cancel(idle).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Reboot(idle, false).code(), StatusCode::kFailedPrecondition) << "rebooting already";
}

TEST_F(RebootTest, ANodeWithoutARebootProgramIsRefusedAndAllMeansEveryNode) {
  AllUp();  // agents without reboot_program
  const Status refused = Reboot("node1", false);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("reboot_program"), std::string::npos);
  EXPECT_EQ(Reboot("node9", false).code(), StatusCode::kNotFound);
  AllUpRebootable();
  ASSERT_TRUE(Reboot("ALL", false).ok());
  for (const char* n : {"node1", "node2", "node3", "node4"})
    EXPECT_EQ(Node(n).reboot(), "requested");
  // Audited as the admin's reboot.
  auto log = engine_->ListAudit(Root(), Chronological(), now_);
  ASSERT_TRUE(log.ok());
  bool seen = false;
  for (const auto& e : log->entries()) seen = seen || e.action() == "reboot";
  EXPECT_TRUE(seen);
}

TEST_F(RebootTest, AnAsapRebootTakesNoNewWorkEvenOnceItsDrainIsLifted) {
  AllUpRebootable();
  auto id = *Submit(Gang(1, 8));
  Pass();
  const std::string node = Job(id).nodes(0);
  Run(id);
  ASSERT_TRUE(Reboot(node, true).ok());
  Resume(node);
  EXPECT_FALSE(Node(node).drain());
  auto other = *Submit(Gang(4, 1));  // needs every node
  Pass();
  EXPECT_EQ(Job(other).state(), v1::PENDING) << "still to reboot as soon as its job ends";
}

TEST_F(RebootTest, NoTimeOutWhileNoControllerRanAndAnUnreadableBootIsNoReboot) {
  AllUpRebootable();
  ASSERT_TRUE(Reboot("node1", false).ok());
  Tick();
  ASSERT_EQ(RebootsSent("node1"), 1u);
  // The controller is down longer than the timeout while the node reboots.
  now_ += 3'600'000;
  Restart();
  Tick();
  EXPECT_EQ(Node("node1").reboot(), "issued") << "the node gets its time from this start";
  // An agent that cannot read its boot id proves no reboot.
  UpIn("node1", "", "node1-b");
  EXPECT_EQ(Node("node1").reboot(), "issued");
  UpIn("node1", "node1-boot2", "node1-c");
  EXPECT_EQ(Node("node1").reboot(), "");
  // A failure report for a reboot never issued changes nothing.
  ASSERT_TRUE(Reboot("node2", false, "", "x").ok());
  RebootFailed("node2", "bogus");
  EXPECT_EQ(Node("node2").reboot(), "requested");
  EXPECT_FALSE(Node("node2").drain());
}

TEST_F(RebootTest, APendingAndAnIssuedRebootSurviveAControllerRestart) {
  AllUpRebootable();
  ASSERT_TRUE(Reboot("node1", false).ok());
  Tick();
  ASSERT_EQ(RebootsSent("node1"), 1u);
  auto id = *Submit(Gang(1, 8));
  Pass();
  const std::string busy = Job(id).nodes(0);
  Run(id);
  ASSERT_TRUE(Reboot(busy, true, "resume").ok());
  Restart();
  // The rebooted node comes back from its new boot; the busy one still runs its job.
  UpIn("node1", "node1-boot2", "node1-b");
  for (const char* n : {"node2", "node3", "node4"}) {
    if (n != busy) UpIn(n, std::string(n) + "-boot1", std::string(n) + "-b");
  }
  Up(busy, {id}, busy + "-b", [&](v1::NodeInventory* inv) {
    inv->set_boot_id(busy + "-boot1");
    inv->set_can_reboot(true);
  });
  EXPECT_EQ(Node("node1").reboot(), "");
  EXPECT_EQ(Node(busy).reboot(), "requested");
  EXPECT_TRUE(Node(busy).drain());
  Tick();
  EXPECT_EQ(RebootsSent(busy), 0u);
}

}  // namespace
}  // namespace muster::controller
