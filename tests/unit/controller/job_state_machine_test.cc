// The job state machine on its own: what each change does to a record, and that a change not in
// its table is never made.
#include <gtest/gtest.h>

#include "engine_context.h"
#include "engine_fixture.h"
#include "job_manager.h"
#include "node_manager.h"
#include "resource_ledger.h"

namespace muster::controller {
namespace {

using core::JobReason;

class JobStateMachineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = ParseConfig(kConfig, "test.toml");
    ASSERT_TRUE(c.ok());
    EngineOptions o;
    o.config = *c;
    ctx_ = std::make_unique<EngineContext>(o, &store_);
    ledger_ = std::make_unique<ResourceLedger>(ctx_->config());
    nodes_ = std::make_unique<NodeManager>(*ctx_);
    jobs_ = std::make_unique<JobManager>(*ctx_, *nodes_, *ledger_);
  }

  v1::JobRecord Running() {
    v1::JobRecord r;
    r.set_id(5);
    r.set_state(v1::PENDING);
    JobChange start{.to = v1::RUNNING, .credential = "c"};
    v1::NodeAllocation* na = start.allocation.add_nodes();
    na->set_node("node1");
    na->add_cpu_ids(0);
    start.allocation.add_nodes()->set_node("node2");
    return jobs_->NextRecord(r, start, 1000);
  }

  store::InMemoryStateStore store_;
  std::unique_ptr<EngineContext> ctx_;
  std::unique_ptr<ResourceLedger> ledger_;
  std::unique_ptr<NodeManager> nodes_;
  std::unique_ptr<JobManager> jobs_;
};

TEST_F(JobStateMachineTest, SubmittedHeldReleasedStarted) {
  v1::JobRecord r;
  r.set_id(5);
  r.mutable_spec()->set_hold(true);  // sbatch --hold
  r = jobs_->NextRecord(r, {.to = v1::PENDING, .reason = JobReason::kJobHeldUser}, 10);
  EXPECT_EQ(r.state(), v1::PENDING);
  EXPECT_EQ(r.reason(), "JobHeldUser");
  EXPECT_TRUE(r.spec().hold());
  r = jobs_->NextRecord(r, {.to = v1::PENDING, .detail = "", .hold = false}, 20);
  EXPECT_FALSE(r.spec().hold());
  EXPECT_EQ(r.reason(), "None");

  const v1::JobRecord run = Running();
  EXPECT_EQ(run.state(), v1::RUNNING);
  EXPECT_EQ(run.start_time_ms(), 1000);
  EXPECT_EQ(run.credential(), "c");
  EXPECT_EQ(run.allocation().nodes_size(), 2);
  EXPECT_TRUE(run.reason_detail().empty());
}

TEST_F(JobStateMachineTest, AnEndWaitsForTheNodesThatStillHoldTheJob) {
  v1::JobRecord run = Running();
  // Only node1 holds it (node2 already cleaned up, say).
  core::Placement p;
  core::NodePlacement np;
  np.node = 0;
  np.cpus = {0};
  p.nodes.push_back(np);
  ledger_->Hold(5, p);
  const v1::JobRecord done =
      jobs_->NextRecord(run, {.to = v1::FAILED, .reason = JobReason::kNonZeroExitCode}, 5000);
  EXPECT_EQ(done.state(), v1::FAILED);
  EXPECT_EQ(done.reason(), "NonZeroExitCode");
  EXPECT_EQ(done.end_time_ms(), 5000);
  ASSERT_EQ(done.completing_nodes_size(), 1);
  EXPECT_EQ(done.completing_nodes(0), "node1");
}

TEST_F(JobStateMachineTest, ARequeueCountsTheRunAndEndsItsSteps) {
  v1::JobRecord run = Running();
  v1::StepRecord* step = run.add_steps();
  step->set_id(0);
  step->set_state(v1::RUNNING);
  step->add_running_nodes("node1");
  run.set_batch_started(true);
  const v1::JobRecord again = jobs_->NextRecord(
      run, {.to = v1::PENDING, .reason = JobReason::kNodeFail, .detail = "requeued: lost"}, 7000);
  EXPECT_EQ(again.state(), v1::PENDING);
  EXPECT_EQ(again.requeue_count(), 1u);
  EXPECT_FALSE(again.batch_started());
  EXPECT_EQ(again.reason(), "NodeFail");
  EXPECT_EQ(again.steps(0).state(), v1::CANCELLED);
  EXPECT_EQ(again.end_time_ms(), 0) << "not ended: it waits to run again";
}

TEST_F(JobStateMachineTest, EndedJobsStayEnded) {
  v1::JobRecord done = jobs_->NextRecord(Running(), {.to = v1::COMPLETED}, 2000);
  EXPECT_DEATH(jobs_->NextRecord(done, {.to = v1::RUNNING}, 3000), "not in the state machine");
  EXPECT_DEATH(jobs_->NextRecord(done, {.to = v1::PENDING}, 3000), "not in the state machine");
  v1::JobRecord fresh;
  fresh.set_id(9);
  EXPECT_DEATH(jobs_->NextRecord(fresh, {.to = v1::RUNNING}, 3000), "not in the state machine")
      << "a new job is PENDING first";
}

}  // namespace
}  // namespace muster::controller
