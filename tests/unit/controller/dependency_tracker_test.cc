// DependencyTracker on its own (no engine), over a job table a restarted controller reads from
// its store: the terms a new job may name, terms dropped as they are satisfied (and the record
// that keeps what is left across a restart), terms that can never be satisfied, '?' and after's
// delay, singleton, and that only tracked jobs are looked at.
#include "dependency_tracker.h"

#include <gtest/gtest.h>

#include "manager_context.h"
#include "muster/core/reason.h"

namespace muster::controller {
namespace {

constexpr TimeMs kNow = 1'700'000'000'000;
constexpr TimeMs kMinute = 60'000;

class DependencyTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Job 1 ended well, job 2 failed, job 3 runs since ten minutes ago.
    world_.PutJobs({Job(1, v1::COMPLETED), Job(2, v1::FAILED), Job(3, v1::RUNNING)});
    Start();
  }
  // A fresh tracker and job table over the same store, as after a restart; recovery tracks the
  // jobs that have terms left unless `track` is false.
  void Start(bool track = true) {
    deps_.reset();
    table_.reset();
    ctx_ = world_.Restart();
    table_ = std::make_unique<JobTable>(*ctx_, world_.state(), kNow);
    deps_ = std::make_unique<DependencyTracker>(*ctx_, table_->jobs);
    for (const v1::JobRecord& r : world_.state().jobs) {
      if (track && r.dependency_terms_size() > 0) deps_->Track(r.id());
    }
  }
  static v1::JobRecord Job(uint64_t id, v1::JobState state, const std::string& name = "job",
                           uint32_t uid = 1000) {
    v1::JobRecord r;
    r.set_id(id);
    r.set_state(state);
    r.set_submit_time_ms(kNow - 20 * kMinute);
    v1::JobSpec* s = r.mutable_spec();
    s->set_name(name);
    s->set_uid(uid);
    s->set_user(uid == 1000 ? "alice" : "bob");
    s->add_partitions("p");
    s->set_nodes(1);
    s->set_ntasks(1);
    if (state != v1::PENDING) r.set_start_time_ms(kNow - 10 * kMinute);
    if (state != v1::PENDING && state != v1::RUNNING) {
      r.set_end_time_ms(kNow - kMinute);
      r.set_exit_code(state == v1::COMPLETED ? 0 : 1);
    }
    return r;
  }
  // A pending job submitted with --dependency=`dep`: its terms as TermsFor makes them.
  v1::JobRecord Waiter(uint64_t id, const std::string& dep, const std::string& name = "job",
                       uint32_t uid = 1000) {
    v1::JobRecord r = Job(id, v1::PENDING, name, uid);
    r.mutable_spec()->set_dependency(dep);
    r.set_reason(core::ReasonName(core::JobReason::kDependency));
    Status st = deps_->TermsFor(r.mutable_spec(), &r);
    EXPECT_TRUE(st.ok()) << dep << ": " << st.ToString();
    return r;
  }
  // The waiters enter the store; the controller restarts and tracks them.
  void Submit(const std::vector<v1::JobRecord>& waiters) {
    world_.PutJobs(waiters);
    Start();
  }
  const v1::JobRecord& Rec(uint64_t id) { return table_->jobs.Find(id)->rec(); }
  std::string Left(uint64_t id) { return DependencyTracker::Describe(Rec(id)); }
  std::optional<core::JobReason> Reason(uint64_t id) { return core::ParseReason(Rec(id).reason()); }

  ManagerContext world_{""};
  std::unique_ptr<EngineContext> ctx_;
  std::unique_ptr<JobTable> table_;
  std::unique_ptr<DependencyTracker> deps_;
};

TEST_F(DependencyTrackerTest, ANewJobNamesOnlyJobsItsSubmitterMayKnow) {
  v1::JobRecord rec;
  v1::JobSpec spec;
  spec.set_dependency("afterok:1,afterany:3");
  ASSERT_TRUE(deps_->TermsFor(&spec, &rec).ok());
  ASSERT_EQ(rec.dependency_terms_size(), 2);
  EXPECT_EQ(rec.dependency_terms(0).kind(), v1::DependencyRecord::AFTEROK);
  EXPECT_EQ(rec.dependency_terms(0).job_id(), 1u);
  EXPECT_EQ(rec.dependency_terms(1).kind(), v1::DependencyRecord::AFTERANY);
  EXPECT_EQ(rec.dependency_terms(1).job_id(), 3u);

  spec.set_dependency("afterok:99");
  Status unknown = deps_->TermsFor(&spec, &rec);
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("Job dependency problem: job 99 is not known"),
            std::string::npos)
      << unknown.message();
  // Where bob sees only his own jobs, alice's job 1 is as unknown as job 99.
  spec.set_dependency("afterok:1");
  Status hidden = deps_->TermsFor(&spec, &rec, 1001);
  EXPECT_EQ(hidden.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(hidden.message().find("job 1 is not known"), std::string::npos) << hidden.message();
  spec.set_dependency("aftercorr:1");
  EXPECT_EQ(deps_->TermsFor(&spec, &rec).code(), StatusCode::kInvalidArgument) << "not an array";
}

TEST_F(DependencyTrackerTest, SatisfiedTermsAreDroppedAndWhatIsLeftOutlivesARestart) {
  Submit({Waiter(10, "afterok:1,afterok:3")});
  deps_->Resolve(kNow);
  EXPECT_EQ(Left(10), "afterok:3(unfulfilled)") << "job 1 ended well; job 3 still runs";
  Start();
  ASSERT_EQ(Rec(10).dependency_terms_size(), 1) << "the dropped term was stored";
  EXPECT_EQ(Rec(10).dependency_terms(0).job_id(), 3u);
  // Job 3 ends well while the controller is away.
  world_.PutJobs({Job(3, v1::COMPLETED)});
  Start();
  deps_->Resolve(kNow);
  EXPECT_EQ(Rec(10).dependency_terms_size(), 0);
  EXPECT_EQ(Reason(10), core::JobReason::kNone) << "no longer waiting for a dependency";
  EXPECT_EQ(Rec(10).state(), v1::PENDING);
}

TEST_F(DependencyTrackerTest, ATermThatCanNeverBeSatisfiedHoldsTheJobOrCancelsIt) {
  v1::JobRecord kill = Waiter(12, "afterok:2");
  kill.mutable_spec()->set_kill_on_invalid_dep(1);
  Submit({Waiter(11, "afterok:2"), kill, Waiter(13, "afternotok:2")});
  deps_->Resolve(kNow);
  EXPECT_EQ(Rec(11).state(), v1::PENDING);
  EXPECT_EQ(Reason(11), core::JobReason::kDependencyNeverSatisfied);
  EXPECT_NE(Rec(11).reason_detail().find("can never be satisfied"), std::string::npos);
  EXPECT_EQ(Left(11), "afterok:2(failed)");
  EXPECT_EQ(Rec(12).state(), v1::CANCELLED) << "--kill-on-invalid-dep";
  EXPECT_EQ(Left(13), "") << "job 2 failed, as afternotok waits for";
  Start();
  EXPECT_EQ(Rec(12).state(), v1::CANCELLED) << "stored";
  EXPECT_EQ(Reason(11), core::JobReason::kDependencyNeverSatisfied) << "stored";
}

TEST_F(DependencyTrackerTest, OneTermIsEnoughAfterAQuestionMarkAndAfterWaitsOutItsDelay) {
  Submit({Waiter(14, "afterok:2?afterany:1"), Waiter(15, "afterok:2?afterok:3"),
          Waiter(16, "after:3+20")});
  deps_->Resolve(kNow);
  EXPECT_EQ(Left(14), "") << "afterany:1 alone settles it";
  EXPECT_EQ(Reason(15), core::JobReason::kDependency) << "job 3 may still end well";
  EXPECT_EQ(Rec(15).dependency_terms_size(), 2);
  EXPECT_EQ(Left(16), "after:3+20(unfulfilled)") << "job 3 has run 10 minutes of 20";
  deps_->Resolve(kNow + 10 * kMinute);
  EXPECT_EQ(Left(16), "");
}

TEST_F(DependencyTrackerTest, ASingletonWaitsForTheUsersEarlierJobOfTheSameName) {
  world_.PutJobs({Job(20, v1::PENDING, "train")});
  Submit({Waiter(21, "singleton", "train"), Waiter(22, "singleton", "train", 1001),
          Waiter(23, "singleton", "eval")});
  deps_->Resolve(kNow);
  EXPECT_EQ(Left(21), "singleton(unfulfilled)") << "alice's job 20 is called train too";
  EXPECT_EQ(Left(22), "") << "bob's earlier jobs are not called train";
  EXPECT_EQ(Left(23), "");
  world_.PutJobs({Job(20, v1::COMPLETED, "train")});
  Start();
  deps_->Resolve(kNow);
  EXPECT_EQ(Left(21), "");
}

TEST_F(DependencyTrackerTest, OnlyTrackedJobsAreResolved) {
  world_.PutJobs({Waiter(10, "afterok:1")});
  Start(/*track=*/false);
  deps_->Resolve(kNow);
  EXPECT_EQ(Left(10), "afterok:1(unfulfilled)") << "untracked: not looked at";
  deps_->Track(10);
  deps_->Resolve(kNow);
  EXPECT_EQ(Left(10), "");
}

}  // namespace
}  // namespace muster::controller
