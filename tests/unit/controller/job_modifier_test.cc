// scontrol update JobId=...: who may change what in a pending job, the checks a submission gets,
// dependency circles refused, --nice and --begin, and the changes surviving a restart.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

constexpr const char* kPolicy = R"(
[[partition]]
name = "short"
nodes = "node[3-4]"
max_time = "1:00:00"

[[qos]]
name = "high"
priority = 100

[[accounts]]
name = "physics"
users = ["alice"]
qos = ["normal", "high"]

[[accounts]]
name = "bio"
users = ["alice", "bob"]
qos = ["normal"]
)";

class JobModifierTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    UseConfig(kPolicy);
  }

  Status Update(uint64_t id, const v1::JobModification& m, Caller who = Alice()) {
    v1::UpdateJobRequest req;
    req.add_job_ids(id);
    req.set_action(v1::UpdateJobRequest::MODIFY);
    *req.mutable_modify() = m;
    auto resp = engine_->UpdateJob(who, req, now_);
    if (!resp.ok()) return resp.status();
    const auto& r = resp->results(0);
    return r.code() == 0 ? Status::Ok() : Status(static_cast<StatusCode>(r.code()), r.message());
  }

  // A pending job of alice's: the cluster is full of root's work.
  uint64_t Waiting(int64_t time_limit_ms = 7'200'000) {
    if (!filler_) {
      auto f = Submit(Gang(4, 8), Root());
      EXPECT_TRUE(f.ok());
      filler_ = *f;
      Pass();
    }
    v1::JobSpec s = Gang(1, 8);
    s.set_time_limit_ms(time_limit_ms);
    s.set_account("physics");
    auto id = Submit(s, Alice());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }

  void FreeCluster() {
    Run(filler_);
    Exited(filler_, "node1", 0);
    for (const char* n : {"node1", "node2", "node3", "node4"}) Cleaned(filler_, n);
  }

  uint64_t filler_ = 0;
};

TEST_F(JobModifierTest, UsersLowerTimeLimitsAndNiceAdminsRaiseThemAndSetPriority) {
  const uint64_t id = Waiting();
  v1::JobModification m;
  m.set_time_limit_ms(3'600'000);
  ASSERT_TRUE(Update(id, m).ok());
  EXPECT_EQ(Job(id).time_limit_ms(), 3'600'000);
  m.set_time_limit_ms(4 * 3'600'000);
  Status s = Update(id, m);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_EQ(Job(id).time_limit_ms(), 3'600'000) << "nothing changed";
  ASSERT_TRUE(Update(id, m, Root()).ok());
  EXPECT_EQ(Job(id).time_limit_ms(), 4 * 3'600'000);

  v1::JobModification prio;
  prio.set_priority(5000);
  EXPECT_EQ(Update(id, prio).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(Update(id, prio, Root()).ok());
  Pass();
  EXPECT_EQ(Job(id).priority(), 5000);

  // Nice: a user may lower their own job's priority, not raise it.
  const uint64_t other = Waiting();
  Pass();
  const int64_t before = Job(other).priority();
  v1::JobModification nice;
  nice.set_nice(100);
  ASSERT_TRUE(Update(other, nice).ok());
  Pass();
  EXPECT_EQ(Job(other).priority(), before - 100);
  EXPECT_EQ(Job(other).nice(), 100);
  nice.set_nice(-100);
  EXPECT_EQ(Update(other, nice).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Update(other, nice, Bob()).code(), StatusCode::kPermissionDenied) << "not bob's job";
  // At submission the same rule.
  v1::JobSpec spec = Gang(1, 1);
  spec.set_nice(-5);
  EXPECT_EQ(Submit(spec, Alice()).status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Submit(spec, Root()).ok());

  // The changes are durable.
  Restart();
  AllUp();
  EXPECT_EQ(Job(id).time_limit_ms(), 4 * 3'600'000);
  EXPECT_EQ(Job(other).nice(), 100);
}

TEST_F(JobModifierTest, PartitionQosAndAccountAreCheckedAsAtSubmission) {
  const uint64_t id = Waiting(1'800'000);
  v1::JobModification m;
  m.add_partitions("nosuch");
  EXPECT_EQ(Update(id, m).code(), StatusCode::kInvalidArgument);
  m.clear_partitions();
  m.add_partitions("short");
  ASSERT_TRUE(Update(id, m).ok());
  EXPECT_EQ(Job(id).partition(), "short");

  v1::JobModification q;
  q.set_qos("high");
  ASSERT_TRUE(Update(id, q).ok());
  EXPECT_EQ(Job(id).qos(), "high");
  // bio does not allow "high": moving there keeping it is refused, and nothing changes.
  v1::JobModification a;
  a.set_account("bio");
  Status s = Update(id, a);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(Job(id).account(), "physics");
  a.set_qos("normal");
  ASSERT_TRUE(Update(id, a).ok()) << Update(id, a).ToString();
  EXPECT_EQ(Job(id).account(), "bio");
  v1::JobModification none;
  none.set_account("chemistry");
  EXPECT_FALSE(Update(id, none).ok());
  // A running job keeps what it has.
  FreeCluster();
  Pass();
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_EQ(Update(id, q).code(), StatusCode::kFailedPrecondition);
}

TEST_F(JobModifierTest, DependenciesChangeAndCirclesAreRefused) {
  const uint64_t a = Waiting();
  const uint64_t b = Waiting();
  v1::JobModification m;
  m.set_dependency("afterok:" + std::to_string(b));
  ASSERT_TRUE(Update(a, m).ok());
  Pass();
  EXPECT_EQ(Job(a).reason(), "Dependency");
  // b waiting for a would close a circle neither could leave.
  m.set_dependency("afterany:" + std::to_string(a));
  Status s = Update(b, m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("circle"), std::string::npos) << s.message();
  m.set_dependency("afterok:999999");
  EXPECT_NE(Update(b, m).message().find("not known"), std::string::npos);
  // Cleared: it waits for resources only.
  m.set_dependency("");
  ASSERT_TRUE(Update(a, m).ok());
  Pass();
  EXPECT_NE(Job(a).reason(), "Dependency");
}

TEST_F(JobModifierTest, BeginTimeHoldsTheJobUntilThen) {
  v1::JobSpec s = Gang(1, 8);
  s.set_begin_time_ms(now_ + 600'000);
  auto id = Submit(s, Alice());
  ASSERT_TRUE(id.ok());
  Pass();
  ASSERT_EQ(Job(*id).state(), v1::PENDING);
  EXPECT_EQ(Job(*id).reason(), "BeginTime");
  now_ += 300'000;
  // Moved earlier by its owner: it starts at the next pass.
  v1::JobModification m;
  m.set_begin_time_ms(now_);
  ASSERT_TRUE(Update(*id, m).ok());
  Pass();
  EXPECT_EQ(Job(*id).state(), v1::RUNNING);
  // And one that simply waits for its time.
  s.set_begin_time_ms(now_ + 60'000);
  auto later = Submit(s, Alice());
  Pass();
  EXPECT_EQ(Job(*later).reason(), "BeginTime");
  now_ += 60'000;
  Pass();
  EXPECT_EQ(Job(*later).state(), v1::RUNNING);
}

TEST_F(JobModifierTest, TopPutsAJobFirstAmongItsUsersLikeJobsByTradingNice) {
  const uint64_t a = Waiting();
  const uint64_t b = Waiting();
  const uint64_t c = Waiting();
  Pass();
  // Same size and age: submission order decides; c is last.
  v1::UpdateJobRequest req;
  req.add_job_ids(c);
  req.set_action(v1::UpdateJobRequest::TOP);
  auto r = engine_->UpdateJob(Alice(), req, now_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->results(0).code(), static_cast<int>(StatusCode::kPermissionDenied))
      << "users need enable_user_top";
  r = engine_->UpdateJob(Root(), req, now_);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->results(0).code(), 0) << r->results(0).message();
  Pass();
  EXPECT_GT(Job(c).priority(), Job(a).priority());
  EXPECT_GT(Job(c).priority(), Job(b).priority());
  // The nice it gained the others gave up, in equal parts: the sum is unchanged (or one more).
  const int64_t sum = int64_t{Job(a).nice()} + Job(b).nice() + Job(c).nice();
  EXPECT_GE(sum, 0);
  EXPECT_LE(sum, 1);
  EXPECT_LT(Job(c).nice(), 0) << "top may lower nice below zero";
  // Under enable_user_top its owner may too.
  config_.scheduling.enable_user_top = true;
  Restart();
  for (const char* n : {"node1", "node2", "node3", "node4"}) Up(n, {filler_});
  Pass();
  ASSERT_EQ(Job(a).state(), v1::PENDING);
  req.set_job_ids(0, a);
  r = engine_->UpdateJob(Alice(), req, now_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->results(0).code(), 0) << r->results(0).message();
  Pass();
  EXPECT_GT(Job(a).priority(), Job(c).priority());
}

TEST_F(JobModifierTest, DeadlineEndsAJobThatCanNoLongerFinishInTime) {
  // The cluster is full; one job must end within 2 h and runs for 1 h, one has no limit.
  const uint64_t busy = Waiting();
  v1::JobSpec s = Gang(1, 8);
  s.set_time_limit_ms(3'600'000);
  s.set_deadline_ms(now_ + 2 * 3'600'000);
  auto timed = Submit(s, Alice());
  ASSERT_TRUE(timed.ok());
  Pass();
  EXPECT_EQ(Job(*timed).state(), v1::PENDING);
  // Half an hour later it could still end in time; past the hour mark it cannot, also for a
  // controller that restarted in between.
  now_ += 1'800'000;
  Pass();
  EXPECT_EQ(Job(*timed).state(), v1::PENDING);
  Restart();
  now_ += 1'860'000;
  Pass();
  EXPECT_EQ(Job(*timed).state(), v1::DEADLINE);
  EXPECT_EQ(Job(*timed).reason(), "DeadLine");
  EXPECT_EQ(Job(busy).state(), v1::PENDING) << "no deadline, no end";
}

}  // namespace
}  // namespace muster::controller
