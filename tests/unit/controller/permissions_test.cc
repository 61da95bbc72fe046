// Who may do what (docs/admin-guide.md, "Permissions"): one test per row of the table, each
// trying the action as the job's owner, another user, an operator and an admin. And the audit
// log those actions leave.
#include <fstream>
#include <set>

#include "engine_fixture.h"
#include "muster/controller/access.h"

namespace muster::controller {
namespace {

class PermissionsTest : public EngineTest {
 protected:
  static Caller Operator() {
    Caller c{2000, 2000, "opal", false};
    c.is_operator = true;
    c.origin = "10.0.0.7";
    return c;
  }
  static Caller Mallory() {
    Caller c = Bob();
    c.origin = "10.0.0.66";
    return c;
  }

  StatusCode Cancel(const Caller& who, uint64_t id, int signal = 0) {
    v1::CancelJobRequest r;
    r.add_job_ids(id);
    r.set_signal(signal);
    auto resp = engine_->CancelJob(who, r, now_);
    EXPECT_TRUE(resp.ok());
    return static_cast<StatusCode>(resp->results(0).code());
  }
  StatusCode Update(const Caller& who, uint64_t id, v1::UpdateJobRequest::Action action) {
    v1::UpdateJobRequest r;
    r.add_job_ids(id);
    r.set_action(action);
    auto resp = engine_->UpdateJob(who, r, now_);
    EXPECT_TRUE(resp.ok());
    return resp->results_size() ? static_cast<StatusCode>(resp->results(0).code())
                                : StatusCode::kOk;
  }
  StatusCode Drain(const Caller& who, v1::UpdateNodeRequest::Action action) {
    v1::UpdateNodeRequest r;
    r.set_nodes("node4");
    r.set_action(action);
    r.set_reason("bad fan");
    return engine_->UpdateNode(who, r, now_).status().code();
  }
  std::vector<v1::AuditEntry> Audit() {  // in the order things happened
    v1::ListAuditRequest req;
    req.set_oldest_first(true);
    auto r = engine_->ListAudit(Root(), req, now_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::vector<v1::AuditEntry>(r->entries().begin(), r->entries().end())
                  : std::vector<v1::AuditEntry>{};
  }
  uint64_t Pending(const Caller& owner) {
    v1::JobSpec s = Gang(1, 1);
    s.set_hold(false);
    auto id = Submit(s, owner);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return *id;
  }
};

TEST_F(PermissionsTest, EveryoneSubmitsAndSeesTheQueueAndTheNodes) {
  for (const Caller& who : {Alice(), Mallory(), Operator(), Root()}) {
    ASSERT_TRUE(Submit(Gang(1, 1), who).ok()) << who.user;
    auto jobs = engine_->ListJobs(Root(), v1::ListJobsRequest());
    ASSERT_TRUE(jobs.ok());
    EXPECT_GE(jobs->jobs_size(), 1);
    EXPECT_TRUE(engine_->ListNodes(who, v1::ListNodesRequest(), now_).ok());
  }
  EXPECT_TRUE(Audit().empty()) << "nothing privileged happened";
}

TEST_F(PermissionsTest, CancelAndSignalOnlyOwnJobsOrAsAdmin) {
  const uint64_t job = Pending(Alice());
  EXPECT_EQ(Cancel(Mallory(), job), StatusCode::kPermissionDenied);
  EXPECT_EQ(Cancel(Operator(), job), StatusCode::kPermissionDenied);
  EXPECT_EQ(Job(job).state(), v1::PENDING);
  EXPECT_EQ(Cancel(Alice(), job), StatusCode::kOk);
  EXPECT_EQ(Cancel(Root(), Pending(Alice())), StatusCode::kOk);
  // A signal is a cancel's kin: the same rule (a pending job cannot take one, whoever asks).
  const uint64_t other = Pending(Alice());
  EXPECT_EQ(Cancel(Mallory(), other, 10), StatusCode::kPermissionDenied);
  EXPECT_EQ(Cancel(Alice(), other, 10), StatusCode::kFailedPrecondition);

  // The audit log: the refusals and the admin's cancel, not the owner's own.
  std::vector<v1::AuditEntry> log = Audit();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].user(), "bob");
  EXPECT_EQ(log[0].origin(), "10.0.0.66");
  EXPECT_EQ(log[0].role(), "user");
  EXPECT_EQ(log[0].action(), "cancel");
  EXPECT_EQ(log[0].target(), "job " + std::to_string(job));
  EXPECT_FALSE(log[0].allowed());
  EXPECT_NE(log[0].result().find("belongs to alice"), std::string::npos) << log[0].result();
  EXPECT_EQ(log[1].role(), "operator");
  EXPECT_FALSE(log[1].allowed());
  EXPECT_EQ(log[2].user(), "root");
  EXPECT_TRUE(log[2].allowed());
  EXPECT_EQ(log[2].result(), "OK");
  EXPECT_EQ(log[3].action(), "signal");
  EXPECT_EQ(log[3].detail(), "signal 10");
  EXPECT_EQ(log[3].time_ms(), now_);
}

TEST_F(PermissionsTest, HoldReleaseAndRequeueOnlyOwnJobsOrAsAdmin) {
  const uint64_t job = Pending(Alice());
  EXPECT_EQ(Update(Mallory(), job, v1::UpdateJobRequest::HOLD), StatusCode::kPermissionDenied);
  EXPECT_EQ(Update(Operator(), job, v1::UpdateJobRequest::HOLD), StatusCode::kPermissionDenied);
  EXPECT_EQ(Update(Alice(), job, v1::UpdateJobRequest::HOLD), StatusCode::kOk);
  EXPECT_EQ(Update(Mallory(), job, v1::UpdateJobRequest::RELEASE), StatusCode::kPermissionDenied);
  EXPECT_EQ(Update(Root(), job, v1::UpdateJobRequest::RELEASE), StatusCode::kOk);
  // An admin's hold is released only by an admin, even for the job's owner.
  EXPECT_EQ(Update(Root(), job, v1::UpdateJobRequest::HOLD), StatusCode::kOk);
  EXPECT_EQ(Update(Alice(), job, v1::UpdateJobRequest::RELEASE), StatusCode::kPermissionDenied);
  EXPECT_EQ(Update(Root(), job, v1::UpdateJobRequest::RELEASE), StatusCode::kOk);
  AllUp();
  Pass();
  ASSERT_EQ(Job(job).state(), v1::RUNNING);
  EXPECT_EQ(Update(Mallory(), job, v1::UpdateJobRequest::REQUEUE), StatusCode::kPermissionDenied);
  EXPECT_EQ(Update(Alice(), job, v1::UpdateJobRequest::REQUEUE), StatusCode::kOk);
  std::vector<std::string> actions;
  for (const auto& e : Audit()) actions.push_back(e.user() + " " + e.action());
  EXPECT_EQ(actions,
            (std::vector<std::string>{"bob hold", "opal hold", "bob release", "root release",
                                      "root hold", "root release", "bob requeue"}));
}

TEST_F(PermissionsTest, StepsAndAllocationsOnlyForTheOwnerOrAnAdmin) {
  AllUp();
  v1::JobSpec spec = Gang(1, 1);
  spec.set_interactive(true);
  const uint64_t alloc = *Submit(spec, Alice());
  v1::AttachAllocationRequest at;
  at.set_job_id(alloc);
  EXPECT_EQ(engine_->AttachAllocation(Mallory(), at, now_).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(engine_->AttachAllocation(Operator(), at, now_).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(engine_->AttachAllocation(Alice(), at, now_).ok());
  const uint64_t batch = *Submit(Gang(1, 1), Alice());
  Pass();
  Started(batch, Job(batch).nodes(0));
  v1::CreateStepRequest step;
  step.set_job_id(batch);
  step.set_overlap(true);
  EXPECT_EQ(engine_->CreateStep(Mallory(), step, now_).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(engine_->CreateStep(Operator(), step, now_).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(engine_->CreateStep(Alice(), step, now_).ok());
  EXPECT_TRUE(engine_->CreateStep(Root(), step, now_).ok());
  std::vector<std::string> actions;
  for (const auto& e : Audit()) {
    actions.push_back(e.user() + " " + e.action() + (e.allowed() ? "" : " refused"));
  }
  EXPECT_EQ(actions,
            (std::vector<std::string>{"bob attach refused", "opal attach refused",
                                      "bob step refused", "opal step refused", "root step"}));
}

TEST_F(PermissionsTest, DrainAndResumeForOperatorsAndAdmins) {
  AllUp();
  EXPECT_EQ(Drain(Alice(), v1::UpdateNodeRequest::DRAIN), StatusCode::kPermissionDenied);
  EXPECT_FALSE(Node("node4").drain());
  EXPECT_EQ(Drain(Operator(), v1::UpdateNodeRequest::DRAIN), StatusCode::kOk);
  EXPECT_TRUE(Node("node4").drain());
  EXPECT_EQ(Drain(Mallory(), v1::UpdateNodeRequest::RESUME), StatusCode::kPermissionDenied);
  EXPECT_EQ(Drain(Root(), v1::UpdateNodeRequest::RESUME), StatusCode::kOk);
  EXPECT_FALSE(Node("node4").drain());
  std::vector<v1::AuditEntry> log = Audit();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[1].user(), "opal");
  EXPECT_EQ(log[1].action(), "drain");
  EXPECT_EQ(log[1].target(), "nodes node4");
  EXPECT_EQ(log[1].detail(), "bad fan");
  EXPECT_TRUE(log[1].allowed());
  EXPECT_FALSE(log[0].allowed());
  EXPECT_EQ(log[3].action(), "resume");
  EXPECT_TRUE(log[3].allowed());
}

TEST_F(PermissionsTest, TheAuditLogIsForOperatorsAndAdmins) {
  AllUp();
  ASSERT_EQ(Drain(Operator(), v1::UpdateNodeRequest::DRAIN), StatusCode::kOk);
  EXPECT_EQ(engine_->ListAudit(Alice(), v1::ListAuditRequest(), now_).status().code(),
            StatusCode::kPermissionDenied);
  auto op = engine_->ListAudit(Operator(), v1::ListAuditRequest(), now_);
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->entries_size(), 1);
  // Filters: by user, by time, and a limit that says it cut the list.
  v1::ListAuditRequest by_user;
  by_user.set_user("bob");
  EXPECT_EQ(engine_->ListAudit(Root(), by_user, now_)->entries_size(), 0);
  now_ += 10'000;
  ASSERT_EQ(Drain(Root(), v1::UpdateNodeRequest::RESUME), StatusCode::kOk);
  v1::ListAuditRequest recent;
  recent.set_since_ms(now_ - 5'000);
  EXPECT_EQ(engine_->ListAudit(Root(), recent, now_)->entries_size(), 1);
  v1::ListAuditRequest one;
  one.set_limit(1);
  auto cut = engine_->ListAudit(Root(), one, now_);
  EXPECT_EQ(cut->entries_size(), 1);
  EXPECT_TRUE(cut->truncated());
  // Newest first: what happened last is not pushed past the limit by what came before (a
  // flood of refusals, say); each next page goes on from where the last one stopped.
  EXPECT_EQ(cut->entries(0).action(), "resume");
  std::vector<std::string> newest_first;
  for (int n = 0; n < 10; ++n) {
    auto page = engine_->ListAudit(Root(), one, now_);
    ASSERT_TRUE(page.ok());
    for (const auto& e : page->entries()) newest_first.push_back(e.action() + " " + e.user());
    if (!page->truncated()) break;
    one.set_resume_key(page->next_key());
  }
  std::vector<std::string> chronological;
  auto all = engine_->ListAudit(Root(), Chronological(), now_);
  ASSERT_TRUE(all.ok());
  for (const auto& e : all->entries()) chronological.push_back(e.action() + " " + e.user());
  ASSERT_GE(chronological.size(), 2u);
  EXPECT_EQ(newest_first, std::vector<std::string>(chronological.rbegin(), chronological.rend()));
  // Oldest first, paged the same way.
  v1::ListAuditRequest first;
  first.set_limit(1);
  first.set_oldest_first(true);
  auto earliest = engine_->ListAudit(Root(), first, now_);
  ASSERT_EQ(earliest->entries_size(), 1);
  EXPECT_EQ(earliest->entries(0).action(), "drain");
  first.set_resume_key(earliest->next_key());
  auto then = engine_->ListAudit(Root(), first, now_);
  ASSERT_EQ(then->entries_size(), 1);
  EXPECT_EQ(then->entries(0).action() + " " + then->entries(0).user(), chronological[1]);
}

TEST_F(PermissionsTest, OnlyAdminsChangeAccountsAndEveryoneMayListThem) {
  v1::UpdateAccountRequest add;
  add.set_op(v1::ACCOUNT_OP_ADD);
  add.set_name("team");
  v1::UpdateUserRequest join;
  join.set_op(v1::ACCOUNT_OP_ADD);
  join.set_user("alice");
  join.set_account("team");
  for (const Caller& who : {Alice(), Bob(), Operator()}) {
    EXPECT_EQ(engine_->UpdateAccount(who, add, now_).status().code(),
              StatusCode::kPermissionDenied);
  }
  ASSERT_TRUE(engine_->UpdateAccount(Root(), add, now_).ok());
  for (const Caller& who : {Alice(), Bob(), Operator()}) {
    EXPECT_EQ(engine_->UpdateUser(who, join, now_).status().code(), StatusCode::kPermissionDenied);
  }
  ASSERT_TRUE(engine_->UpdateUser(Root(), join, now_).ok());
  EXPECT_EQ(engine_->ListAccounts(Root())->accounts_size(), 2);
  // Each change, and each refusal, is in the audit log.
  auto log = engine_->ListAudit(Root(), Chronological(), now_);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->entries_size(), 8);
  EXPECT_EQ(log->entries(3).action(), "account add");
  EXPECT_TRUE(log->entries(3).allowed());
}

TEST_F(PermissionsTest, OnlyAdminsChangeQosAndEveryoneMayListThem) {
  v1::UpdateQosRequest add;
  add.set_op(v1::ACCOUNT_OP_ADD);
  add.set_name("gold");
  add.set_priority(10);
  for (const Caller& who : {Alice(), Bob(), Operator()}) {
    EXPECT_EQ(engine_->UpdateQos(who, add, now_).status().code(), StatusCode::kPermissionDenied);
  }
  ASSERT_TRUE(engine_->UpdateQos(Root(), add, now_).ok());
  EXPECT_EQ(engine_->ListAccounts(Root())->qos_size(), 2);  // normal and gold
  auto log = engine_->ListAudit(Root(), Chronological(), now_);
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->entries_size(), 4);
  EXPECT_EQ(log->entries(0).action(), "qos add");
  EXPECT_FALSE(log->entries(0).allowed());
  EXPECT_TRUE(log->entries(3).allowed());
}

TEST_F(PermissionsTest, TheAuditLogOutlivesARestartAndExpiresWithItsRetention) {
  config_.scheduling.audit_retention_days = 2;
  Restart();
  AllUp();
  ASSERT_EQ(Drain(Operator(), v1::UpdateNodeRequest::DRAIN), StatusCode::kOk);
  Restart();
  EXPECT_EQ(Audit().size(), 1u) << "kept in the store";
  AllUp();
  now_ += 86'400'000;
  ASSERT_EQ(Drain(Root(), v1::UpdateNodeRequest::RESUME), StatusCode::kOk);
  now_ += 86'400'000 + 1;
  engine_->Tick(now_);
  v1::ListAuditRequest all;
  all.set_since_ms(1);
  auto left = engine_->ListAudit(Root(), all, now_);
  ASSERT_EQ(left->entries_size(), 1) << "the entry older than 2 days is gone";
  EXPECT_EQ(left->entries(0).action(), "resume");
}

TEST_F(PermissionsTest, PartitionsAdmitOnlyTheirUsers) {
  PartitionConfig restricted;
  restricted.name = "restricted";
  restricted.nodes = {"node1", "node2"};
  restricted.allowed_uids = {"alice", "2000"};
  config_.partitions.push_back(restricted);
  config_.partitions[0].denied_uids = {"1001"};  // gpu: everyone but bob
  Restart();
  v1::JobSpec in_restricted = Gang(1, 1);
  in_restricted.add_partitions("restricted");
  EXPECT_TRUE(Submit(in_restricted, Alice()).ok());
  EXPECT_TRUE(Submit(in_restricted, Operator()).ok()) << "listed by uid";
  auto refused = Submit(in_restricted, Mallory());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("partition 'restricted'"), std::string::npos)
      << refused.status().message();
  // Bob is denied the default partition, and a list that names it is refused as a whole.
  EXPECT_EQ(Submit(Gang(1, 1), Mallory()).status().code(), StatusCode::kPermissionDenied);
  v1::JobSpec both = in_restricted;
  both.add_partitions("gpu");
  EXPECT_EQ(Submit(both, Mallory()).status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Submit(Gang(1, 1), Alice()).ok());
  EXPECT_TRUE(Submit(in_restricted, Root()).ok()) << "admins always may";
}

TEST_F(PermissionsTest, OneUserCannotFillTheQueue) {
  config_.scheduling.max_pending_jobs_per_user = 3;
  Restart();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Submit(Gang(1, 1), Alice()).ok());
  auto fourth = Submit(Gang(1, 1), Alice());
  EXPECT_EQ(fourth.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(fourth.status().message().find("3 pending jobs"), std::string::npos)
      << fourth.status().message();
  // sbatch --test-only says so too, rather than forecasting a start the real one cannot get.
  v1::SubmitJobRequest test_only;
  *test_only.mutable_spec() = Gang(1, 1);
  test_only.mutable_spec()->set_script("#!/bin/sh\ntrue\n");
  test_only.mutable_spec()->set_work_dir("/tmp");
  test_only.set_test_only(true);
  EXPECT_EQ(engine_->SubmitJob(Alice(), test_only, now_).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(engine_->SubmitJob(Mallory(), test_only, now_).ok());
  EXPECT_TRUE(Submit(Gang(1, 1), Mallory()).ok()) << "another user is not affected";
  EXPECT_TRUE(Submit(Gang(1, 1), Root()).ok()) << "root is not limited";
  // Jobs that start make room; an array counts each task.
  AllUp();
  Pass();
  v1::JobSpec array = Gang(1, 1);
  array.set_array("1-3");
  EXPECT_TRUE(Submit(array, Alice()).ok());
  EXPECT_EQ(Submit(array, Alice()).status().code(), StatusCode::kResourceExhausted);
  // The count survives a restart (rebuilt from the records).
  Restart();
  EXPECT_EQ(Submit(Gang(1, 1), Alice()).status().code(), StatusCode::kResourceExhausted);
}

TEST_F(PermissionsTest, AJobRunsAsRootOnlyWhenRootSubmittedIt) {
  v1::JobSpec spec = Gang(1, 1);
  spec.set_uid(0);
  spec.set_gid(0);
  spec.set_user("root");
  // Asking to run as someone else (sbatch/srun/salloc --uid/--gid) is refused, not quietly
  // turned into the caller's own job, as Slurm's front ends refuse --uid to anyone but root.
  auto claimed = Submit(spec, Alice());
  ASSERT_EQ(claimed.status().code(), StatusCode::kPermissionDenied) << claimed.status().ToString();
  EXPECT_NE(claimed.status().message().find("only root may submit a job as another user"),
            std::string::npos);
  spec.set_uid(1000);
  spec.set_gid(0);
  spec.set_user("alice");
  EXPECT_EQ(Submit(spec, Alice()).status().code(), StatusCode::kPermissionDenied)
      << "nor as another group";
  spec.set_gid(1000);
  spec.set_uid(1001);
  spec.clear_user();
  EXPECT_EQ(Submit(spec, Alice()).status().code(), StatusCode::kPermissionDenied)
      << "nor by uid alone";
  spec.clear_uid();
  spec.clear_gid();
  spec.clear_user();
  auto id = Submit(spec, Alice());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(Job(*id).user(), "alice") << "the credentials decide";
  EXPECT_EQ(Job(*id).uid(), 1000u);
  spec.set_uid(1000);
  spec.set_user("alice");
  auto for_alice = Submit(spec, Root());
  ASSERT_TRUE(for_alice.ok());
  EXPECT_EQ(Job(*for_alice).uid(), 1000u) << "root may submit on a user's behalf";
}

// private_data = ["usage"], ["accounts"], ["users"]: a user's fair-share lines, accounts, users
// and quota use shrink to their own and the accounts above them; operators and admins see all.
class PrivateDataTest : public PermissionsTest {
 protected:
  void Use(Config::PrivateData hidden) {
    UseConfig(R"(
[[accounts]]
name = "org"
[[accounts]]
name = "a"
parent = "org"
users = ["alice"]
quota = { h100 = 8 }
[[accounts]]
name = "b"
parent = "org"
users = ["bob"]
quota = { h100 = 8 }
coordinators = ["carol"]
[[accounts]]
name = "c"
users = ["carol"]
)");
    config_.private_data = hidden;  // top-level keys go before the tables: set here
    config_.operators = {"opal"};
    Restart();
    AllUp();
  }
  // "account/user" for every fair-share line `who` is shown.
  std::set<std::string> Shares(const Caller& who) {
    auto r = engine_->ListShares(who, v1::ListSharesRequest(), now_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::set<std::string> out;
    for (const auto& row : r->rows()) out.insert(row.account() + "/" + row.user());
    return out;
  }
  struct Listing {
    std::set<std::string> accounts, users, quota_use;
  };
  Listing Accounts(const Caller& who) {
    auto r = engine_->ListAccounts(who);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    Listing l;
    for (const auto& a : r->accounts()) l.accounts.insert(a.name());
    for (const auto& u : r->users()) l.users.insert(u.name());
    for (const auto& q : r->quota_use()) l.quota_use.insert(q.account());
    EXPECT_EQ(r->qos_size(), 1) << "QoS are never private";
    return l;
  }
  const std::set<std::string> all_shares_ = {"org/",  "a/", "a/alice", "b/",
                                             "b/bob", "c/", "c/carol"};
  const std::set<std::string> all_accounts_ = {"root", "org", "a", "b", "c"};
  const std::set<std::string> all_users_ = {"alice", "bob", "carol"};
};

TEST_F(PrivateDataTest, NothingPrivateShowsEveryoneEverything) {
  Use({});
  EXPECT_EQ(Shares(Alice()), all_shares_);
  EXPECT_EQ(Accounts(Bob()).accounts, all_accounts_);
  EXPECT_EQ(Accounts(Bob()).users, all_users_);
  EXPECT_EQ(Accounts(Bob()).quota_use, (std::set<std::string>{"a", "b"}));
}

TEST_F(PrivateDataTest, UsageLeavesAUserTheirOwnLinesAndTheAccountsAboveThem) {
  Use({.usage = true});
  EXPECT_EQ(Shares(Alice()), (std::set<std::string>{"org/", "a/", "a/alice"}));
  EXPECT_EQ(Shares(Bob()), (std::set<std::string>{"org/", "b/", "b/bob"}));
  EXPECT_EQ(Shares(Caller{1002, 1002, "carol", false}), (std::set<std::string>{"c/", "c/carol"}));
  EXPECT_TRUE(Shares(Caller{1003, 1003, "dave", false}).empty()) << "a user in no account";
  EXPECT_EQ(Shares(Operator()), all_shares_);
  EXPECT_EQ(Shares(Root()), all_shares_);
  // The account definitions stay public; the quota use is usage.
  const Listing alice = Accounts(Alice());
  EXPECT_EQ(alice.accounts, all_accounts_);
  EXPECT_EQ(alice.users, all_users_);
  EXPECT_EQ(alice.quota_use, std::set<std::string>{"a"});
  EXPECT_EQ(Accounts(Operator()).quota_use, (std::set<std::string>{"a", "b"}));
}

TEST_F(PrivateDataTest, AccountsLeaveAUserTheirOwnAccounts) {
  Use({.accounts = true});
  const Listing bob = Accounts(Bob());
  EXPECT_EQ(bob.accounts, (std::set<std::string>{"root", "org", "b"}));
  EXPECT_EQ(bob.users, all_users_);
  EXPECT_EQ(bob.quota_use, std::set<std::string>{"b"});
  EXPECT_EQ(Shares(Bob()), (std::set<std::string>{"org/", "b/", "b/bob"}));
  EXPECT_EQ(Accounts(Root()).accounts, all_accounts_);
  EXPECT_EQ(Accounts(Operator()).accounts, all_accounts_);
}

TEST_F(PrivateDataTest, ACoordinatorSeesTheAccountsItCoordinatesAndTheirUsers) {
  Use({.accounts = true, .users = true});
  // carol is in c and coordinates b: she sees both (not org above b, nor a beside it), and b's
  // users; bob, b's user, sees his own line only.
  const Listing carol = Accounts(Caller{1002, 1002, "carol", false});
  EXPECT_EQ(carol.accounts, (std::set<std::string>{"root", "b", "c"}));
  EXPECT_EQ(carol.users, (std::set<std::string>{"bob", "carol"}));
  EXPECT_EQ(carol.quota_use, std::set<std::string>{"b"});
  const Listing bob = Accounts(Bob());
  EXPECT_EQ(bob.accounts, (std::set<std::string>{"root", "org", "b"}));
  EXPECT_EQ(bob.users, std::set<std::string>{"bob"});
  // alice joins b too: carol sees her association there, and nothing of hers in a.
  v1::UpdateUserRequest join;
  join.set_op(v1::ACCOUNT_OP_ADD);
  join.set_user("alice");
  join.set_account("b");
  join.mutable_limits()->set_grp_jobs(3);
  ASSERT_TRUE(engine_->UpdateUser(Root(), join, now_).ok());
  auto r = engine_->ListAccounts(Caller{1002, 1002, "carol", false});
  ASSERT_TRUE(r.ok());
  bool saw_alice = false;
  for (const v1::UserRecord& u : r->users()) {
    if (u.name() != "alice") continue;
    saw_alice = true;
    EXPECT_EQ(std::vector<std::string>(u.accounts().begin(), u.accounts().end()),
              std::vector<std::string>{"b"});
    EXPECT_EQ(u.default_account(), "") << "her default is a, which carol does not coordinate";
    EXPECT_EQ(u.associations().count("a"), 0u);
    EXPECT_EQ(u.associations().count("b"), 1u);
  }
  EXPECT_TRUE(saw_alice);
}

TEST_F(PrivateDataTest, UsersLeaveAUserTheirOwnAssociations) {
  Use({.users = true});
  const Listing alice = Accounts(Alice());
  EXPECT_EQ(alice.users, std::set<std::string>{"alice"});
  EXPECT_EQ(alice.accounts, all_accounts_);
  EXPECT_EQ(Shares(Alice()), (std::set<std::string>{"org/", "a/", "a/alice"}));
  EXPECT_EQ(Accounts(Root()).users, all_users_);
}

// private_data = ["jobs"]: which jobs run on a node shows a user only their own; ["users"] and
// ["accounts"]: a reservation's users and accounts shrink to the caller and their accounts.
TEST_F(PrivateDataTest, NodesAndReservationsShowOnlyTheCallersOwnWhereThatIsPrivate) {
  Use({.jobs = true, .accounts = true, .users = true});
  auto mine = Submit(Gang(1, 1), Alice());
  auto theirs = Submit(Gang(1, 1), Bob());
  ASSERT_TRUE(mine.ok() && theirs.ok());
  Pass();
  ASSERT_EQ(Job(*mine).state(), v1::RUNNING);
  ASSERT_EQ(Job(*theirs).state(), v1::RUNNING);
  auto jobs_seen = [&](const Caller& who) {
    auto r = engine_->ListNodes(who, v1::ListNodesRequest(), now_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::set<uint64_t> ids;
    for (const auto& n : r->nodes()) ids.insert(n.job_ids().begin(), n.job_ids().end());
    return ids;
  };
  EXPECT_EQ(jobs_seen(Alice()), std::set<uint64_t>{*mine});
  EXPECT_EQ(jobs_seen(Operator()), (std::set<uint64_t>{*mine, *theirs}));
  EXPECT_EQ(jobs_seen(Root()), (std::set<uint64_t>{*mine, *theirs}));
  // Refused, and not told whose the job is.
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(*theirs);
  auto refused = engine_->CancelJob(Alice(), cancel, now_);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->results(0).code(), static_cast<int>(StatusCode::kPermissionDenied));
  EXPECT_EQ(refused->results(0).message().find("bob"), std::string::npos)
      << refused->results(0).message();

  v1::UpdateReservationRequest req;
  req.set_op(v1::ACCOUNT_OP_ADD);
  req.set_name("shared");
  req.set_nodes("node4");
  req.set_start_ms(now_ + 3'600'000);
  req.set_duration_ms(3'600'000);
  req.set_users("alice,bob");
  req.set_accounts("a,b");
  ASSERT_TRUE(engine_->UpdateReservation(Root(), req, now_).ok());
  auto listed = [&](const Caller& who) {
    auto r = engine_->ListReservations(who, v1::ListReservationsRequest(), now_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->reservations_size(), 1);
    const auto& res = r->reservations(0);
    std::set<std::string> out(res.users().begin(), res.users().end());
    for (const auto& a : res.accounts()) out.insert("account " + a);
    return out;
  };
  EXPECT_EQ(listed(Alice()), (std::set<std::string>{"alice", "account a"}));
  EXPECT_EQ(listed(Root()), (std::set<std::string>{"alice", "bob", "account a", "account b"}));
}

// The access rules are the admin guide's: every privileged action, in order, with who may
// take it; and each refuses a plain user, admits an admin, and admits an operator only where
// the rule says.
TEST(PrivilegedActionsTest, TheAdminGuideListsEveryRule) {
  std::ifstream in(std::string(MUSTER_SOURCE_DIR) + "/docs/admin-guide.md");
  ASSERT_TRUE(in) << "docs/admin-guide.md";
  std::vector<std::pair<std::string, std::string>> documented;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("privileged-actions: begin") != std::string::npos) inside = true;
    if (line.find("privileged-actions: end") != std::string::npos) inside = false;
    if (!inside || line.rfind("| ", 0) != 0 || line.rfind("| privileged action", 0) == 0) continue;
    const size_t bar = line.find(" | ", 2);
    ASSERT_NE(bar, std::string::npos) << line;
    documented.emplace_back(line.substr(2, bar - 2), line.substr(bar + 3, line.size() - bar - 5));
  }
  std::vector<std::pair<std::string, std::string>> rules;
  const Caller user{1000, 1000, "alice", false};
  const Caller admin{0, 0, "root", true};
  Caller op{2000, 2000, "opal", false};
  op.is_operator = true;
  for (size_t i = 0; i < PrivilegedActions().size(); ++i) {
    const PrivilegedAction& r = PrivilegedActions()[i];
    EXPECT_EQ(static_cast<size_t>(r.action), i) << r.what << ": the table is out of Action's order";
    rules.emplace_back(r.what, r.operators ? "operators and admins" : "admins");
    EXPECT_EQ(Authorize(user, r.action).code(), StatusCode::kPermissionDenied) << r.what;
    EXPECT_NE(Authorize(user, r.action).message().find(r.what), std::string::npos);
    EXPECT_TRUE(May(admin, r.action)) << r.what;
    EXPECT_EQ(May(op, r.action), r.operators) << r.what;
  }
  EXPECT_EQ(documented, rules);
}

}  // namespace
}  // namespace muster::controller
