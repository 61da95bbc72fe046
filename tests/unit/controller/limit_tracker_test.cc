// LimitTracker on its own (no engine), over the accounts, QoS and jobs a restarted controller
// reads from its store: the MaxWall a job without a time limit gets, per-job limits that hold a
// job and name the scope, DenyOnLimit's refusals, the submit and stored-bytes limits counted over
// a whole sub-tree, and the counters a pass charges with what running jobs hold.
#include "limit_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "manager_context.h"

namespace muster::controller {
namespace {

constexpr TimeMs kNow = 1'700'000'000'000;
constexpr int64_t kHour = 3'600'000;

constexpr const char* kLimits = R"(
[[nodes]]
names = "gpu1"
cpus = 8
memory_mb = 1000
gpus = 8
gpu_type = "h100"

[[partition]]
name = "gpu"
nodes = "gpu1"

[[qos]]
name = "capped"
flags = ["DenyOnLimit"]
max_gpus_per_job = 4
max_wall = "1:00:00"

[[accounts]]
name = "science"
users = ["bob"]
grp_submit_jobs = 3
grp_gpus = { h100 = 8 }
grp_stored_mb = 1
max_wall = "4:00:00"

[[accounts]]
name = "physics"
parent = "science"
users = ["alice"]
max_nodes_per_job = 1
)";

class LimitTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  // The managers afresh over the store, as a restarted controller makes them.
  void Start() {
    policy_.reset();  // the old controller goes before the new one starts
    policy_ = std::make_unique<PolicyManagers>(world_, kNow);
    limits_ = &*policy_->limits;
  }
  static v1::JobSpec Spec(const std::string& user, const std::string& account,
                          const std::string& qos = "normal") {
    v1::JobSpec s;
    s.set_user(user);
    s.set_uid(user == "alice" ? 1000 : 1001);
    s.set_account(account);
    s.set_qos(qos);
    s.set_nodes(1);
    s.set_ntasks(1);
    s.add_partitions("p");
    return s;
  }
  static v1::JobRecord Job(uint64_t id, v1::JobState state, v1::JobSpec spec) {
    v1::JobRecord r;
    r.set_id(id);
    r.set_state(state);
    r.set_submit_time_ms(kNow - kHour);
    if (state != v1::PENDING) r.set_start_time_ms(kNow - kHour);
    if (state == v1::COMPLETED) r.set_end_time_ms(kNow - 1000);
    *r.mutable_spec() = std::move(spec);
    return r;
  }
  // A job running on gpu1 with `gpus` of its GPUs, of whatever type it asked for.
  static v1::JobRecord OnGpus(uint64_t id, v1::JobSpec spec, uint32_t gpus) {
    spec.set_gpus_per_node(gpus);
    spec.set_partitions(0, "gpu");
    v1::JobRecord r = Job(id, v1::RUNNING, std::move(spec));
    r.mutable_allocation()->set_partition("gpu");
    v1::NodeAllocation* na = r.mutable_allocation()->add_nodes();
    na->set_node("gpu1");
    na->add_cpu_ids(0);
    na->set_ntasks(1);
    for (uint32_t g = 0; g < gpus; ++g) na->add_gpu_indices(g);
    return r;
  }
  ManagerContext world_{kLimits};
  std::unique_ptr<PolicyManagers> policy_;
  LimitTracker* limits_ = nullptr;  // policy_'s, the one under test
};

TEST_F(LimitTrackerTest, AJobWithoutATimeLimitGetsTheSmallestMaxWallOfItsQosAndTree) {
  v1::JobSpec spec = Spec("alice", "physics");
  EXPECT_EQ(limits_->WallLimit(spec), 4 * kHour) << "physics sets none: science's holds";
  spec.set_qos("capped");
  EXPECT_EQ(limits_->WallLimit(spec), kHour) << "the QoS's is smaller";
  // Outside the tree and in a QoS without limits, nothing bounds it.
  EXPECT_EQ(limits_->WallLimit(Spec("carol", "elsewhere")), 0);
}

TEST_F(LimitTrackerTest, APendingJobOverAPerJobLimitWaitsWithAReasonThatNamesTheScope) {
  std::string detail;
  const v1::JobSpec physics = Spec("alice", "physics");
  EXPECT_EQ(limits_->PerJobLimit(physics, 5 * kHour, {1, 0, ""}, &detail),
            core::JobReason::kAssocMaxWallDurationPerJobLimit);
  EXPECT_NE(detail.find("account science allows at most"), std::string::npos) << detail;
  // No time limit at all is over any MaxWall.
  EXPECT_EQ(limits_->PerJobLimit(physics, 0, {1, 0, ""}, &detail),
            core::JobReason::kAssocMaxWallDurationPerJobLimit);
  EXPECT_NE(detail.find("this job has no time limit"), std::string::npos) << detail;
  EXPECT_EQ(limits_->PerJobLimit(physics, kHour, {2, 0, ""}, &detail),
            core::JobReason::kAssocMaxNodePerJobLimit);
  EXPECT_NE(detail.find("account physics allows at most 1 nodes per job"), std::string::npos)
      << detail;
  EXPECT_EQ(
      limits_->PerJobLimit(Spec("alice", "physics", "capped"), kHour, {1, 8, "h100"}, &detail),
      core::JobReason::kQOSMaxGRESPerJob);
  EXPECT_NE(detail.find("qos capped allows at most 4 GPUs per job"), std::string::npos) << detail;
  detail.clear();
  EXPECT_EQ(limits_->PerJobLimit(physics, kHour, {1, 8, "h100"}, &detail), core::JobReason::kNone);
  EXPECT_EQ(detail, "");
}

TEST_F(LimitTrackerTest, OnlyADenyOnLimitQosRefusesAtSubmissionWhatIsOverAPerJobLimit) {
  Status refused =
      limits_->CheckSubmit(Spec("alice", "physics", "capped"), kHour, {1, 8, "h100"}, 1);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("job violates a limit of qos capped (DenyOnLimit)"),
            std::string::npos)
      << refused.message();
  // Over the account's MaxWall in a QoS without DenyOnLimit: accepted, to wait.
  const v1::JobSpec normal = Spec("alice", "physics");
  EXPECT_TRUE(limits_->CheckSubmit(normal, 5 * kHour, {1, 0, ""}, 1).ok());
  std::string detail;
  EXPECT_NE(limits_->PerJobLimit(normal, 5 * kHour, {1, 0, ""}, &detail), core::JobReason::kNone);
}

TEST_F(LimitTrackerTest, SubmitLimitsCountThePendingAndRunningJobsOfTheWholeSubtree) {
  world_.PutJobs(
      {Job(1, v1::PENDING, Spec("alice", "physics")), Job(2, v1::RUNNING, Spec("alice", "physics")),
       Job(3, v1::PENDING, Spec("bob", "science")), Job(4, v1::COMPLETED, Spec("bob", "science"))});
  Start();
  Status refused = limits_->CheckSubmit(Spec("bob", "science"), kHour, {1, 0, ""}, 1);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  // Physics's jobs count for science; the finished one does not.
  EXPECT_NE(refused.message().find("account science is at its limit (AssocGrpSubmitJobsLimit"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find(": 3 jobs pending or running, at most 3"), std::string::npos)
      << refused.message();
  // Job 1 moving up from physics to science already counts there.
  const v1::JobSpec from = policy_->table->jobs.Find(1)->rec().spec();
  EXPECT_TRUE(limits_->CheckSubmit(Spec("alice", "science"), kHour, {1, 0, ""}, 1, &from).ok());
}

TEST_F(LimitTrackerTest, StoredScriptsCountForEveryAccountAboveAndPastTheLimitAreRefused) {
  v1::JobRecord stored = Job(1, v1::PENDING, Spec("bob", "science"));
  stored.set_payload_bytes(900 << 10);
  world_.PutJobs({stored});
  Start();
  // Alice's bytes in physics count against science's 1 MiB along with bob's there.
  const v1::JobSpec physics = Spec("alice", "physics");
  EXPECT_TRUE(limits_->CheckStored(physics, 100 << 10).ok());
  Status refused = limits_->CheckStored(physics, 200 << 10);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("account science is at its limit (GrpStoredMB)"),
            std::string::npos)
      << refused.message();
}

TEST_F(LimitTrackerTest, APassChargesWhatRunningJobsHoldAndNamesThemWhenALimitHolds) {
  // It asked for any type and got gpu1's: science's h100 limit counts it.
  world_.PutJobs({OnGpus(5, Spec("alice", "physics"), 6)});
  Start();
  const JobUse running = limits_->RunningUse(policy_->table->jobs.Find(5)->rec());
  EXPECT_EQ(running.gpus, 6u);
  EXPECT_EQ(running.gpu_type, "h100");

  std::vector<core::LimitCounter> counters;
  limits_->BeginPass(&counters);
  const v1::JobSpec next = Spec("alice", "physics");
  const auto charges = limits_->ChargesOf(next, {1, 4, "h100"});
  ASSERT_EQ(charges.size(), 1u);
  const core::LimitCounter& c = counters.at(charges[0].counter);
  EXPECT_EQ(c.what, "account science: h100 GPUs (GrpTRES gres/gpu:h100)");
  EXPECT_EQ(c.used, 6u);
  EXPECT_EQ(c.max, 8u);
  EXPECT_EQ(charges[0].amount, 4u);
  EXPECT_TRUE(limits_->ChargesOf(next, {1, 4, "a100"}).empty()) << "a limit of h100 only";

  // Explained outside the pass: 6 held + 4 asked > 8, and job 5 is the one holding them.
  const auto holding = limits_->HoldingLimits(next, {1, 4, "h100"});
  ASSERT_EQ(holding.size(), 1u);
  EXPECT_EQ(holding[0].need, 4u);
  EXPECT_EQ(holding[0].jobs, (std::vector<std::pair<uint64_t, uint64_t>>{{5, 6}}));
  EXPECT_TRUE(limits_->HoldingLimits(next, {1, 2, "h100"}).empty()) << "6 + 2 fit in 8";
}

TEST_F(LimitTrackerTest, AUsersOwnMaxLimitsReplaceTheAccountsAndItsGrpLimitsCountItsJobsThere) {
  world_.PutJobs(
      {Job(1, v1::PENDING, Spec("alice", "physics")), Job(2, v1::RUNNING, Spec("bob", "science"))});
  Start();
  v1::UpdateUserRequest own;
  own.set_op(v1::ACCOUNT_OP_MODIFY);
  own.set_user("alice");
  own.set_account("physics");
  own.mutable_limits()->set_max_nodes_per_job(2);    // physics allows 1
  own.mutable_limits()->set_max_wall_ms(6 * kHour);  // science allows 4 hours
  own.mutable_limits()->set_grp_submit(1);
  own.mutable_limits()->set_grp_jobs(1);
  Status st = policy_->accounts.UpdateUser(ManagerContext::Root(), own);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const v1::JobSpec alice = Spec("alice", "physics");
  EXPECT_EQ(limits_->WallLimit(alice), 6 * kHour) << "hers replaces science's";
  std::string detail;
  EXPECT_EQ(limits_->PerJobLimit(alice, 5 * kHour, {2, 0, ""}, &detail), core::JobReason::kNone)
      << detail;
  EXPECT_EQ(limits_->PerJobLimit(alice, kHour, {3, 0, ""}, &detail),
            core::JobReason::kAssocMaxNodePerJobLimit);
  EXPECT_NE(detail.find("user alice in account physics allows at most 2 nodes"), std::string::npos)
      << detail;
  // Her GrpSubmitJobs=1 counts her job 1 in physics; science's 3 still counts everyone's.
  st = limits_->CheckSubmit(alice, kHour, {1, 0, ""}, 1);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("user alice in account physics is at its limit "
                              "(AssocGrpSubmitJobsLimit"),
            std::string::npos)
      << st.message();
  // Others in the tree keep the accounts' limits.
  EXPECT_EQ(limits_->WallLimit(Spec("bob", "physics")), 4 * kHour);
  EXPECT_TRUE(limits_->CheckSubmit(Spec("bob", "science"), kHour, {1, 0, ""}, 1).ok());
  // A pass charges her running jobs to her association's own counter.
  std::vector<core::LimitCounter> counters;
  limits_->BeginPass(&counters);
  bool found = false;
  for (const core::LimitCharge& c : limits_->ChargesOf(alice, {1, 0, ""})) {
    const core::LimitCounter& counter = counters.at(c.counter);
    if (counter.what != "user alice in account physics: running jobs (GrpJobs)") continue;
    found = true;
    EXPECT_EQ(counter.max, 1u);
    EXPECT_EQ(counter.reason, core::JobReason::kAssocGrpJobsLimit);
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace muster::controller
