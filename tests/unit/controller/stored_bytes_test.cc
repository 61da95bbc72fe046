// Stored-bytes limits: one user's scripts and environments cannot fill the controller's store.
// A job counts from submission until archived, an array's shared script once; the limit that
// refuses is named with the numbers; the counts survive a restart; `muster diag` shows who
// stores most (to admins) or one's own row (to users).
#include "engine_fixture.h"
#include "limit_tracker.h"

namespace muster::controller {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class StoredBytesTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    UseSiteLimit(10);
  }

  // The cluster (with `extra` config, if any) restarted under a site limit of `mib` per user.
  void UseSiteLimit(uint32_t mib, const char* extra = nullptr) {
    if (extra) UseConfig(extra);
    config_.scheduling.max_stored_mb_per_user = mib;
    Restart();
    AllUp();
  }

  // A held job (it stays pending) whose script is `mib` MiB and environment 1 KiB (each
  // variable counts with the NUL that ends it at launch).
  Result<uint64_t> SubmitBig(uint64_t mib, Caller who, const std::string& array = "",
                             const std::string& qos = "") {
    v1::JobSpec s = Gang(1, 1);
    s.set_hold(true);
    s.set_script("#!/bin/sh\n#" + std::string(mib * kMiB - 12, 'x') + "\n");
    s.add_environment("BLOB=" + std::string(1018, 'e'));
    s.set_array(array);
    s.set_qos(qos);
    return Submit(s, who);
  }

  void CancelAndArchive(uint64_t id) {
    v1::CancelJobRequest req;
    req.add_job_ids(id);
    auto r = engine_->CancelJob(Root(), req, now_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    now_ += 61'000;  // past finished_job_retention_ms
    engine_->Tick(now_);
  }

  // scontrol update JobId=id Account=account QOS=qos as `who`: the job's result.
  v1::CancelJobResult Move(uint64_t id, const Caller& who, const std::string& account,
                           const std::string& qos = "") {
    v1::UpdateJobRequest move;
    move.set_action(v1::UpdateJobRequest::MODIFY);
    move.add_job_ids(id);
    if (!account.empty()) move.mutable_modify()->set_account(account);
    if (!qos.empty()) move.mutable_modify()->set_qos(qos);
    auto r = engine_->UpdateJob(who, move, now_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->results(0) : v1::CancelJobResult();
  }

  v1::DiagnosticsResponse Diag(const Caller& who) {
    v1::DiagnosticsResponse d;
    engine_->FillDiagnostics(who, &d);
    return d;
  }
};

TEST_F(StoredBytesTest, TheSitesPerUserLimitRefusesNamingItAndFreesWhenJobsAreArchived) {
  auto a = SubmitBig(4, Alice());
  auto b = SubmitBig(4, Alice());
  ASSERT_TRUE(a.ok() && b.ok());
  auto refused = SubmitBig(4, Alice());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("user alice is at the site's limit (scheduling.max_stored_mb_per_user)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("8.0 MiB of job scripts and environments stored"), std::string::npos) << m;
  EXPECT_NE(m.find("at most 10 MiB; this job adds 4.0 MiB"), std::string::npos) << m;
  // Another user, and root, are not held back by alice's bytes.
  EXPECT_TRUE(SubmitBig(4, Bob()).ok());
  EXPECT_TRUE(SubmitBig(4, Root()).ok());
  EXPECT_TRUE(SubmitBig(4, Root()).ok());
  EXPECT_TRUE(SubmitBig(4, Root()).ok());  // root is exempt from the site's limit

  // Cancelled, it still counts until archived: its script is still stored.
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(*a);
  ASSERT_TRUE(engine_->CancelJob(Root(), cancel, now_).ok());
  EXPECT_FALSE(SubmitBig(4, Alice()).ok());
  now_ += 61'000;
  engine_->Tick(now_);
  EXPECT_TRUE(SubmitBig(4, Alice()).ok());
}

TEST_F(StoredBytesTest, AnArraysTasksShareOneScriptAndTheCountsSurviveARestart) {
  // 100 tasks of a 4 MiB script store 4 MiB: the array counts once.
  auto arr = SubmitBig(4, Alice(), "0-99");
  ASSERT_TRUE(arr.ok()) << arr.status().ToString();
  auto one = SubmitBig(4, Alice());
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  // Tasks split off the array (a task named alone is held apart) still share its script.
  v1::UpdateJobRequest release;
  release.set_action(v1::UpdateJobRequest::RELEASE);
  release.add_job_ids(*arr + 7);
  ASSERT_TRUE(engine_->UpdateJob(Alice(), release, now_).ok());
  EXPECT_EQ(Diag(Root()).store_users(0).bytes(), 8 * kMiB + 2 * 1024);
  EXPECT_FALSE(SubmitBig(4, Alice()).ok());

  Restart();
  AllUp();
  const v1::DiagnosticsResponse d = Diag(Root());
  ASSERT_EQ(d.store_users_size(), 1);
  EXPECT_EQ(d.store_users(0).user(), "alice");
  EXPECT_EQ(d.store_users(0).bytes(), 8 * kMiB + 2 * 1024);
  EXPECT_EQ(d.store_users(0).submissions(), 2u);
  auto refused = SubmitBig(4, Alice());
  ASSERT_FALSE(refused.ok()) << "the restart forgot alice's stored bytes";
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);

  // The array's script leaves the store with its last task, not before.
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(*arr);
  ASSERT_TRUE(engine_->CancelJob(Root(), cancel, now_).ok());
  now_ += 61'000;
  engine_->Tick(now_);
  EXPECT_EQ(Diag(Root()).store_users(0).bytes(), 4 * kMiB + 1024);
  EXPECT_TRUE(SubmitBig(4, Alice()).ok());
}

TEST_F(StoredBytesTest, DiagShowsAdminsTheBiggestUsersAndEveryoneElseTheirOwnRow) {
  ASSERT_TRUE(SubmitBig(1, Alice()).ok());
  ASSERT_TRUE(SubmitBig(3, Bob()).ok());
  const v1::DiagnosticsResponse admin = Diag(Root());
  ASSERT_EQ(admin.store_users_size(), 2);
  EXPECT_EQ(admin.store_users(0).user(), "bob");  // biggest first
  EXPECT_EQ(admin.store_users(1).user(), "alice");
  EXPECT_EQ(admin.store_bytes_total(), 4 * kMiB + 2 * 1024);
  const v1::DiagnosticsResponse alice = Diag(Alice());
  ASSERT_EQ(alice.store_users_size(), 1);
  EXPECT_EQ(alice.store_users(0).user(), "alice");
  EXPECT_EQ(alice.store_users(0).bytes(), kMiB + 1024);
}

constexpr const char* kLimits = R"(
[[qos]]
name = "bulk"
grp_stored_mb = 6

[[accounts]]
name = "physics"
users = ["alice", "bob"]
max_stored_mb_per_user = 20

[[accounts]]
name = "theory"
parent = "physics"
users = ["carol"]
)";

TEST_F(StoredBytesTest, AccountAndQosLimitsBoundTheirUsersAndAreChangedLive) {
  UseSiteLimit(10, kLimits);
  // The account's MaxStoredMBPerUser (20), larger than the site's 10, holds for its users.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(SubmitBig(4, Alice()).ok()) << i;
  auto refused = SubmitBig(4, Alice());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "user alice is at account physics's limit (MaxStoredMBPerUser)"),
            std::string::npos)
      << refused.status().message();
  // A sub-account's user counts against its parent's per-user limit too.
  const Caller carol{1002, 1002, "carol", false};
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(SubmitBig(4, carol).ok()) << i;
  auto parents = SubmitBig(4, carol);
  ASSERT_FALSE(parents.ok());
  EXPECT_NE(parents.status().message().find("account physics's limit"), std::string::npos)
      << parents.status().message();
  // The QoS's GrpStoredMB bounds all its users together.
  ASSERT_TRUE(SubmitBig(4, Bob(), "", "bulk").ok());
  auto grp = SubmitBig(4, Bob(), "", "bulk");
  ASSERT_FALSE(grp.ok());
  EXPECT_NE(grp.status().message().find("qos bulk is at its limit (GrpStoredMB)"),
            std::string::npos)
      << grp.status().message();
  // A QoS added live (sacctmgr add qos live GrpStoredMB=4), then raised.
  v1::UpdateQosRequest add;
  add.set_op(v1::ACCOUNT_OP_ADD);
  add.set_name("live");
  add.mutable_limits()->set_grp_stored_mb(4);
  ASSERT_TRUE(engine_->UpdateQos(Root(), add, now_).ok());
  ASSERT_TRUE(SubmitBig(3, Bob(), "", "live").ok());
  EXPECT_FALSE(SubmitBig(3, Bob(), "", "live").ok());
  v1::UpdateQosRequest raise;
  raise.set_op(v1::ACCOUNT_OP_MODIFY);
  raise.set_name("live");
  raise.mutable_limits()->set_grp_stored_mb(100);
  auto r = engine_->UpdateQos(Root(), raise, now_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(SubmitBig(3, Bob(), "", "live").ok());
}

constexpr const char* kTwoAccounts = R"(
[[accounts]]
name = "physics"
users = ["alice"]
max_stored_mb_per_user = 12

[[accounts]]
name = "chem"
users = ["alice"]
max_stored_mb_per_user = 20
)";

TEST_F(StoredBytesTest, AUserInSeveralAccountsHasOneAllowanceNotTheSum) {
  UseSiteLimit(10, kTwoAccounts);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(SubmitBig(4, Alice()).ok()) << i;  // physics
  // Arguments are stored too: 200 KiB of them count like a script's.
  v1::JobSpec args = Gang(1, 1);
  args.set_hold(true);
  args.set_account("chem");
  for (int i = 0; i < 2; ++i) args.add_script_args(std::string(100 << 10, 'a'));
  auto with_args = Submit(args, Alice());
  ASSERT_TRUE(with_args.ok()) << with_args.status().ToString();
  EXPECT_GT(Diag(Root()).store_users(0).bytes(), 8 * kMiB + (200 << 10));
  v1::JobSpec chem = Gang(1, 1);
  chem.set_hold(true);
  chem.set_account("chem");
  chem.set_script("#!/bin/sh\n#" + std::string(3 * kMiB, 'x') + "\n");
  // Three fit: 17.2 MiB in all, within chem's 20.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Submit(chem, Alice()).ok()) << i;
  // The fourth makes 20.2 MiB: over chem's 20 for all alice's jobs, though chem holds 9.2.
  auto refused = Submit(chem, Alice());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "is at the MaxStoredMBPerUser of the job's account or QoS, which bounds all"),
            std::string::npos)
      << refused.status().message();
}

constexpr const char* kSmallPhysics = R"(
[[accounts]]
name = "physics"
users = ["alice"]
max_stored_mb_per_user = 6

[[accounts]]
name = "chem"
users = ["alice"]
)";

TEST_F(StoredBytesTest, MovingAJobToAnotherAccountMovesItsBytes) {
  UseSiteLimit(100, kSmallPhysics);
  auto id = SubmitBig(4, Alice());  // physics, alice's default
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_FALSE(SubmitBig(4, Alice()).ok());  // physics holds 4 of alice's 6 MiB there
  v1::UpdateJobRequest move;
  move.set_action(v1::UpdateJobRequest::MODIFY);
  move.add_job_ids(*id);
  move.mutable_modify()->set_account("chem");
  auto moved = engine_->UpdateJob(Alice(), move, now_);
  ASSERT_TRUE(moved.ok() && moved->results(0).code() == 0) << moved->DebugString();
  // Its bytes went with it: physics has room for another, as it has after a restart.
  EXPECT_TRUE(SubmitBig(4, Alice()).ok());
  EXPECT_FALSE(SubmitBig(4, Alice()).ok());
  Restart();
  AllUp();
  EXPECT_FALSE(SubmitBig(4, Alice()).ok());
  v1::JobSpec chem = Gang(1, 1);
  chem.set_hold(true);
  chem.set_account("chem");
  EXPECT_TRUE(Submit(chem, Alice()).ok());
  EXPECT_EQ(Diag(Root()).store_users(0).bytes(), 8 * kMiB + 2 * 1024 + 15);
}

// physics and chem share a parent that takes at most 3 jobs; chem alone takes 1 job and 3 MiB.
constexpr const char* kSiblings = R"(
[[accounts]]
name = "science"
grp_submit_jobs = 3

[[accounts]]
name = "physics"
parent = "science"
users = ["alice"]

[[accounts]]
name = "chem"
parent = "science"
users = ["alice"]
grp_submit_jobs = 1
max_stored_mb_per_user = 3
)";

// Moving a pending job into an account is submitting it there: an account at its limit takes
// neither its bytes nor its count (before, `scontrol update Account=` walked past both). A limit
// the job already counts under (their common parent) does not refuse the move.
TEST_F(StoredBytesTest, AJobMovesOnlyIntoAnAccountWithRoomForIt) {
  UseSiteLimit(100, kSiblings);
  auto move_to_chem = [&](uint64_t id) { return Move(id, Alice(), "chem"); };
  auto big = SubmitBig(4, Alice());  // physics
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  v1::CancelJobResult refused = move_to_chem(*big);
  EXPECT_EQ(refused.code(), static_cast<int>(StatusCode::kResourceExhausted));
  EXPECT_NE(refused.message().find("user alice is at account chem's limit (MaxStoredMBPerUser)"),
            std::string::npos)
      << refused.message();
  auto small = SubmitBig(1, Alice());
  auto third = SubmitBig(1, Alice());
  ASSERT_TRUE(small.ok() && third.ok());
  // science holds its 3 jobs already: a move inside it is no new job there.
  v1::CancelJobResult moved = move_to_chem(*small);
  EXPECT_EQ(moved.code(), 0) << moved.message();
  refused = move_to_chem(*third);
  EXPECT_EQ(refused.code(), static_cast<int>(StatusCode::kResourceExhausted));
  EXPECT_NE(refused.message().find("account chem is at its limit (AssocGrpSubmitJobsLimit"),
            std::string::npos)
      << refused.message();
  // Nothing changed for the refused jobs: still in physics, bytes and all.
  EXPECT_EQ(Job(*third).account(), "physics");
  EXPECT_EQ(Job(*big).account(), "physics");
}

constexpr const char* kAllowances = R"(
[[qos]]
name = "bulk"
grp_stored_mb = 3

[[accounts]]
name = "big"
users = ["alice"]
max_stored_mb_per_user = 20

[[accounts]]
name = "plain"
users = ["alice"]
)";

// A move adds no bytes to the user's total, but it must not carry them past the allowance of
// where the job goes (big's 20 MiB let alice store more than the site's 10); a QoS is entered
// as an account is.
TEST_F(StoredBytesTest, AMoveFitsTheAllowanceAndTheQosWhereTheJobGoes) {
  UseSiteLimit(10, kAllowances);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto id = SubmitBig(4, Alice());  // big, alice's first account
    ASSERT_TRUE(id.ok()) << i << " " << id.status().ToString();
    ids.push_back(*id);
  }
  v1::CancelJobResult r = Move(ids[0], Alice(), "plain");
  EXPECT_EQ(r.code(), static_cast<int>(StatusCode::kResourceExhausted));
  EXPECT_NE(r.message().find("is at the site's limit (scheduling.max_stored_mb_per_user): 12.0 "
                             "MiB of job scripts and environments stored"),
            std::string::npos)
      << r.message();
  r = Move(ids[0], Alice(), "", "bulk");
  EXPECT_EQ(r.code(), static_cast<int>(StatusCode::kResourceExhausted));
  EXPECT_NE(r.message().find("qos bulk is at its limit (GrpStoredMB)"), std::string::npos)
      << r.message();
  EXPECT_EQ(Job(ids[0]).account(), "big");
  CancelAndArchive(ids[2]);  // 8 MiB left: within the site's 10
  r = Move(ids[0], Alice(), "plain");
  EXPECT_EQ(r.code(), 0) << r.message();
  EXPECT_EQ(Job(ids[0]).account(), "plain");
}

TEST(StoredLimitsFormat, LimitsPrintAndPatchLikeTheOthers) {
  v1::UsageLimits l;
  v1::UsageLimits patch;
  patch.set_grp_stored_mb(512);
  patch.set_max_stored_mb_per_user(64);
  ASSERT_TRUE(PatchLimits(patch, &l).ok());
  EXPECT_EQ(FormatLimits(l), "GrpStoredMB=512 MaxStoredMBPerUser=64");
  patch.Clear();
  patch.set_grp_stored_mb(kUnlimited);
  ASSERT_TRUE(PatchLimits(patch, &l).ok());
  EXPECT_FALSE(l.has_grp_stored_mb());
  EXPECT_EQ(l.max_stored_mb_per_user(), 64u);
}

}  // namespace
}  // namespace muster::controller
