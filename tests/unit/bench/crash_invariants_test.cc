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

// A job array's tasks share its name: each must be there once, with the ids that follow the
// array's. A task lost (or one counted twice) out of the one record a pending array is, is caught.
TEST(CrashInvariantsTest, AnArrayMissingOrDoublingATaskIsCaught) {
  auto array_of = [](uint32_t tasks) {
    std::vector<ClientLedger> ledgers(1);
    Submission s{"arr", 10, Outcome::kAcked};
    s.tasks = tasks;
    ledgers[0].subs.push_back(s);
    return ledgers;
  };
  Jobs jobs;
  for (uint64_t id : {10, 11, 12}) jobs[id] = Running(id, "arr", "node" + std::to_string(id), {0});
  Checker c;
  EXPECT_EQ(c.Round("r: ", array_of(3), jobs, {}, {}), 0u) << c.violations().front();
  EXPECT_EQ(c.Round("r: ", array_of(4), jobs, {}, {}), 1u) << "task 13 lost";
  EXPECT_NE(c.violations().back().find("exists 3 times (an array of 4 tasks)"), std::string::npos);
  jobs.erase(12);
  jobs[14] = Running(14, "arr", "node14", {0});  // task 2 under another's id
  EXPECT_EQ(c.Round("r: ", array_of(3), jobs, {}, {}), 1u);
  EXPECT_NE(c.violations().back().find("acknowledged as job 12 but is job 14"), std::string::npos);

  // A task running at the kill may end CANCELLED by a cancel of its array's id, not otherwise.
  Jobs before{{11, Running(11, "arr", "node11", {0})}};
  before[11].mutable_array()->set_array_job_id(10);
  Jobs after{{10, before[11]}, {11, before[11]}};
  after[10].set_id(10);
  for (auto& [id, j] : after) j.set_state(v1::CANCELLED);
  auto ledgers = array_of(2);
  Checker d;
  EXPECT_EQ(d.Round("r: ", ledgers, after, before, {}), 1u) << "cancelled by no one";
  EXPECT_NE(d.violations().back().find("job 11 was running at the kill and ended CANCELLED"),
            std::string::npos);
  ledgers[0].job_ops[10].push_back({'c', Outcome::kAcked, 0});
  Checker e;
  EXPECT_EQ(e.Round("r: ", ledgers, after, before, {}), 0u) << e.violations().front();
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
