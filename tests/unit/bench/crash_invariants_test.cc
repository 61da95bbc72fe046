// The crash harness's own checks must catch what they are there for: each case below is a
// controller that lost or doubled something, and one that did nothing wrong.
#include "crash_invariants.h"

#include <gtest/gtest.h>

namespace muster::bench::crash {
namespace {

v1::JobInfo Running(uint64_t id, const std::string& name, const std::string& node,
                    std::vector<uint32_t> gpus) {
  v1::JobInfo j;
  j.set_id(id);
  j.set_name(name);
  j.set_state(v1::RUNNING);
  j.set_start_time_ms(1000);
  v1::NodeAllocation* na = j.mutable_allocation()->add_nodes();
  na->set_node(node);
  for (uint32_t g : gpus) na->add_gpu_indices(g);
  return j;
}

std::vector<ClientLedger> Acked(std::vector<std::pair<std::string, uint64_t>> subs) {
  std::vector<ClientLedger> ledgers(1);
  for (auto& [name, id] : subs) ledgers[0].subs.push_back({name, id, Outcome::kAcked});
  return ledgers;
}

TEST(CrashInvariantsTest, ASoundRoundHasNoViolation) {
  Checker c;
  Jobs jobs{{1, Running(1, "a", "node1", {0, 1})}, {2, Running(2, "b", "node1", {2})}};
  EXPECT_EQ(c.Round("r: ", Acked({{"a", 1}, {"b", 2}}), jobs, jobs, {}), 0u)
      << c.violations().front();
}

TEST(CrashInvariantsTest, ALostOrDoubledOrForeignJobIsCaught) {
  Checker c;
  Jobs jobs{{2, Running(2, "b", "node1", {0})},
            {3, Running(3, "b", "node2", {0})},
            {4, Running(4, "x", "node3", {0})}};
  EXPECT_EQ(c.Round("r: ", Acked({{"a", 1}, {"b", 2}}), jobs, {}, {}), 3u);
  ASSERT_EQ(c.violations().size(), 3u);
  EXPECT_NE(c.violations()[0].find("job 1 (a) exists 0 times"), std::string::npos);
}

TEST(CrashInvariantsTest, AGpuInTwoJobsIsCaughtButAFinishedGangsCleanNodeIsNot) {
  Checker c;
  v1::JobInfo gang = Running(1, "a", "node1", {0});
  *gang.mutable_allocation()->add_nodes() = gang.allocation().nodes(0);
  gang.mutable_allocation()->mutable_nodes(1)->set_node("node2");
  gang.set_state(v1::COMPLETED);
  gang.set_completing(true);
  gang.add_completing_nodes("node2");  // node1 reported clean: job 2 may use its GPU 0
  Jobs jobs{{1, gang}, {2, Running(2, "b", "node1", {0})}};
  EXPECT_EQ(c.Round("r: ", Acked({{"a", 1}, {"b", 2}}), jobs, {}, {}), 0u)
      << c.violations().front();
  jobs[1].clear_completing_nodes();
  jobs[1].add_completing_nodes("node1");  // still cleaning node1: GPU 0 is held twice
  EXPECT_EQ(c.Round("r: ", Acked({{"a", 1}, {"b", 2}}), jobs, {}, {}), 1u);
}

TEST(CrashInvariantsTest, ARunningJobRequeuedOrRestartedByTheRecoveryIsCaught) {
  Checker c;
  Jobs before{{1, Running(1, "a", "node1", {0})}};
  Jobs after = before;
  after[1].set_start_time_ms(2000);  // started again
  EXPECT_EQ(c.Round("r: ", Acked({{"a", 1}}), after, before, {}), 1u);
  after[1].set_state(v1::PENDING);
  after[1].set_requeue_count(1);
  EXPECT_EQ(c.Round("r: ", Acked({{"a", 1}}), after, before, {}), 1u);
}

TEST(CrashInvariantsTest, AJobThatRanTwiceOrALostCancelIsCaughtAtTheEnd) {
  Checker c;
  auto ledgers = Acked({{"a", 1}});
  ledgers[0].job_ops[1].push_back({'c', Outcome::kAcked, 5000});
  v1::JobInfo done = Running(1, "a", "node1", {0});
  done.set_state(v1::COMPLETED);
  done.set_end_time_ms(9000);  // ran to its end after the cancel was answered
  EXPECT_EQ(c.End(ledgers, {{1, done}}, {{1, 2}}), 2u);
}

}  // namespace
}  // namespace muster::bench::crash
