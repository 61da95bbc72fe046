// The scheduling pass is mechanism and its policy is pluggable: the same SchedulerLoop that runs
// Muster's DefaultPassPolicy runs a policy of the test's own (as a simulator runs published
// heuristics), asks it in the order pass_policy.h gives, and does what it says: whom it keeps
// out, who goes first, what a start gets, and what happens after.
#include "pass_policy.h"

#include <gtest/gtest.h>

#include "account_manager.h"
#include "cluster_views.h"
#include "manager_context.h"
#include "queue_orders.h"
#include "reservation_manager.h"
#include "scheduler_loop.h"

namespace muster::controller {
namespace {

constexpr TimeMs kNow = 1'700'000'000'000;

// Keeps account "blocked" out, puts the job named "urgent" first, gives every start a time limit
// of its own, and records what it was asked.
class TestPolicy final : public PassPolicy {
 public:
  void BeforePass(TimeMs) override { calls.push_back("before"); }
  void BeginPass(core::ClusterView*) override { calls.push_back("begin"); }
  core::JobReason Admit(const JobEntry& job, const JobUse&, std::string* detail) override {
    calls.push_back("admit " + std::to_string(job.rec().id()));
    if (job.rec().spec().account() != "blocked") return core::JobReason::kNone;
    *detail = "kept out by the test's policy";
    return core::JobReason::kAssocGrpJobsLimit;
  }
  void Order(const JobEntry& job, TimeMs, core::PendingJob* pj) const override {
    pj->priority.qos = job.rec().spec().name() == "urgent" ? 1.0 : 0.0;
  }
  void Charge(const JobEntry& job, const JobUse&, core::PendingJob*) override {
    calls.push_back("charge " + std::to_string(job.rec().id()));
  }
  void Start(const core::JobStart& start, const v1::JobRecord&, TimeMs,
             JobChange* change) const override {
    started.push_back(start.job);
    change->time_limit_ms = 4242;
  }
  void AfterPass(const core::SchedulePass& pass, TimeMs) override {
    calls.push_back("after " + std::to_string(pass.starts.size()));
  }

  std::vector<std::string> calls;
  mutable std::vector<uint64_t> started;
};

class PassPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One node of 4 CPUs: each job below takes all of it, so the order decides.
    world_.PutJobs({Pending(1, "first", "science", kNow - 3000),
                    Pending(2, "blocked-job", "blocked", kNow - 2000),
                    Pending(3, "urgent", "science", kNow - 1000)});
    Restart();
    loop_ = std::make_unique<SchedulerLoop>(*ctx_, table_->jobs, table_->nodes, table_->ledger,
                                            *views_, policy_);
  }
  // The controller's state loaded afresh from the store, node1 up again.
  void Restart() {
    ctx_ = world_.Restart();
    table_ = std::make_unique<JobTable>(*ctx_, world_.state(), kNow);
    accounts_ = std::make_unique<AccountManager>(*ctx_);
    reservations_ = std::make_unique<ReservationManager>(*ctx_, *accounts_);
    NodeUp("node1");
    views_ = std::make_unique<ClusterViews>(*ctx_, table_->jobs, table_->nodes, table_->ledger,
                                            *reservations_);
  }
  static v1::JobRecord Pending(uint64_t id, const std::string& name, const std::string& account,
                               TimeMs submitted) {
    v1::JobRecord r;
    r.set_id(id);
    r.set_state(v1::PENDING);
    r.set_submit_time_ms(submitted);
    v1::JobSpec* s = r.mutable_spec();
    s->set_name(name);
    s->set_user("alice");
    s->set_uid(1000);
    s->set_account(account);
    s->add_partitions("p");
    s->set_nodes(1);
    s->set_ntasks(1);
    s->set_cpus_per_task(4);
    s->set_script("#!/bin/sh\ntrue\n");
    return r;
  }
  void NodeUp(const std::string& node) {
    v1::RegisterRequest r;
    r.mutable_inventory()->set_name(node);
    r.mutable_inventory()->set_cpus(4);
    r.mutable_inventory()->set_memory_mb(1000);
    r.set_instance_id("agent-1");
    store::Mutation m;
    bool restarted = false;
    auto reg = table_->nodes.Register(r, kNow, m, &restarted);
    ASSERT_TRUE(reg.ok()) << reg.status().ToString();
    ASSERT_TRUE(world_.store().Commit(m).ok());
    v1::Hello hello;
    hello.set_node(node);
    hello.set_instance_id("agent-1");
    auto attached = table_->nodes.AttachSession(hello, kNow);
    ASSERT_TRUE(attached.ok()) << attached.status().ToString();
  }
  void Pass() {
    if (auto in = loop_->Prepare(kNow)) loop_->Apply(SchedulerLoop::Compute(*in), kNow);
  }
  const v1::JobRecord& Rec(uint64_t id) { return table_->jobs.Find(id)->rec(); }

  ManagerContext world_{""};
  std::unique_ptr<EngineContext> ctx_;
  std::unique_ptr<JobTable> table_;
  std::unique_ptr<AccountManager> accounts_;
  std::unique_ptr<ReservationManager> reservations_;
  std::unique_ptr<ClusterViews> views_;
  TestPolicy policy_;
  std::unique_ptr<SchedulerLoop> loop_;
};

TEST_F(PassPolicyTest, TheLoopRunsAPolicyOfItsOwnAndDoesWhatItSays) {
  Pass();
  // Its order, not submission order: "urgent" (submitted last) takes the node.
  EXPECT_EQ(Rec(3).state(), v1::RUNNING);
  EXPECT_EQ(Rec(3).time_limit_ms(), 4242) << "what the policy's Start gave it";
  EXPECT_EQ(policy_.started, std::vector<uint64_t>{3});
  EXPECT_EQ(Rec(1).state(), v1::PENDING);
  EXPECT_EQ(Rec(1).reason(), "Resources");
  // Kept out before the core saw it, with the policy's reason.
  EXPECT_EQ(Rec(2).state(), v1::PENDING);
  EXPECT_EQ(Rec(2).reason(), "AssocGrpJobsLimit");
  EXPECT_EQ(Rec(2).reason_detail(), "kept out by the test's policy");
  // Asked in pass_policy.h's order: before, begin, then each job admitted (and charged when
  // admitted), then after; the blocked job is never charged.
  const std::vector<std::string> want = {"before",  "begin",   "admit 1",  "charge 1",
                                         "admit 2", "admit 3", "charge 3", "after 1"};
  EXPECT_EQ(policy_.calls, want);
}

TEST_F(PassPolicyTest, AQueueOrderReplacesTheBasePolicysOrderAndKeepsTheRest) {
  // FCFS around the test's policy: job 1 (submitted first) takes the node, not "urgent"; the
  // base still keeps account "blocked" out and gives the start its time limit.
  auto base = std::make_unique<TestPolicy>();
  TestPolicy* inner = base.get();
  const TimeMs origin = 0;
  OrderedPassPolicy fcfs(OrderedPassPolicy::Kind::kFcfs,
                         OrderedPassPolicy::BackfillOrder::kPriority, std::move(base), origin);
  SchedulerLoop loop(*ctx_, table_->jobs, table_->nodes, table_->ledger, *views_, fcfs);
  if (auto in = loop.Prepare(kNow)) loop.Apply(SchedulerLoop::Compute(*in), kNow);
  EXPECT_EQ(Rec(1).state(), v1::RUNNING);
  EXPECT_EQ(Rec(1).time_limit_ms(), 4242);
  EXPECT_EQ(Rec(3).state(), v1::PENDING);
  EXPECT_EQ(Rec(2).reason(), "AssocGrpJobsLimit");
  EXPECT_EQ(inner->started, std::vector<uint64_t>{1});
}

TEST_F(PassPolicyTest, AJobThatWaitedProtectAfterGoesFirstAndOnlyItReserves) {
  // SJF: job 3 (a minute) before job 1 (a day); job 1 has waited 3 s, job 3 one.
  auto limit = [&](uint64_t id, TimeMs ms) {
    v1::JobRecord r = Rec(id);
    r.mutable_spec()->set_time_limit_ms(ms);
    r.set_time_limit_ms(ms);
    return r;
  };
  const std::vector<v1::JobRecord> pending = {limit(1, 86'400'000), limit(3, 60'000)};
  auto run = [&](TimeMs protect_after) {
    world_.PutJobs(pending);  // both pending again
    Restart();
    const TimeMs origin = 0;
    OrderedPassPolicy sjf(OrderedPassPolicy::Kind::kSjf,
                          OrderedPassPolicy::BackfillOrder::kPriority,
                          std::make_unique<TestPolicy>(), origin, protect_after);
    SchedulerLoop loop(*ctx_, table_->jobs, table_->nodes, table_->ledger, *views_, sjf);
    if (auto in = loop.Prepare(kNow)) loop.Apply(SchedulerLoop::Compute(*in), kNow);
  };
  run(0);
  EXPECT_EQ(Rec(3).state(), v1::RUNNING) << "SJF alone: the shortest first";
  EXPECT_EQ(Rec(1).state(), v1::PENDING);
  run(2'000);
  EXPECT_EQ(Rec(1).state(), v1::RUNNING) << "waited 3 s of the 2 it needed to be protected";
  EXPECT_EQ(Rec(3).state(), v1::PENDING);
  EXPECT_EQ(Rec(3).reason(), "Resources");
  EXPECT_NE(Rec(3).reason_detail().find("reserves nothing for it"), std::string::npos)
      << Rec(3).reason_detail();
}

}  // namespace
}  // namespace muster::controller
