// Accounts and associations through the engine: what a job charges, who may change the tree, and
// what survives a restart or a config change.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

constexpr const char* kAccounts = R"(
[[accounts]]
name = "science"
shares = 3
[[accounts]]
name = "physics"
parent = "science"
shares = 2
users = ["alice"]
[[accounts]]
name = "chem"
parent = "science"
users = ["alice", "bob"]
)";

class AccountTest : public EngineTest {
 protected:
  void UseConfig(const std::string& extra) {
    auto c = ParseConfig(std::string(kConfig) + extra, "test.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    Restart();
  }

  Result<uint64_t> SubmitAs(const Caller& who, const std::string& account) {
    v1::JobSpec spec = Gang(1, 1);
    spec.set_account(account);
    return Submit(spec, who);
  }

  Status Account(const Caller& who, v1::AccountOp op, const std::string& name,
                 const std::string& parent = "") {
    v1::UpdateAccountRequest r;
    r.set_op(op);
    r.set_name(name);
    if (!parent.empty()) r.set_parent(parent);
    return engine_->UpdateAccount(who, r, now_).status();
  }

  Status User(const Caller& who, v1::AccountOp op, const std::string& user,
              const std::string& account, bool make_default = false) {
    v1::UpdateUserRequest r;
    r.set_op(op);
    r.set_user(user);
    r.set_account(account);
    r.set_make_default(make_default);
    return engine_->UpdateUser(who, r, now_).status();
  }

  std::vector<std::string> AccountNames() {
    std::vector<std::string> names;
    auto list = engine_->ListAccounts(Root());
    if (!list.ok()) return names;
    for (const auto& a : list->accounts()) names.push_back(a.name());
    return names;
  }
};

TEST_F(AccountTest, WithoutAccountsAJobRecordsWhatItNames) {
  auto id = SubmitAs(Alice(), "anything");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(Job(*id).account(), "anything");
  EXPECT_EQ(Job(*Submit(Gang(1, 1), Alice())).account(), "");
  EXPECT_EQ(SubmitAs(Alice(), "bad name!").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(AccountTest, AJobChargesAnAccountOfItsUser) {
  UseConfig(kAccounts);
  // alice's default is the first account that names her; -A picks another of hers.
  EXPECT_EQ(Job(*SubmitAs(Alice(), "")).account(), "physics");
  EXPECT_EQ(Job(*SubmitAs(Alice(), "chem")).account(), "chem");
  EXPECT_EQ(Job(*SubmitAs(Bob(), "")).account(), "chem");
  Status st = SubmitAs(Bob(), "physics").status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("is not in account 'physics' (its accounts: chem)"),
            std::string::npos)
      << st.message();
  // A user in no account cannot run jobs; nor may alice charge an account she is not in,
  // its parent included.
  Caller carol{1002, 1002, "carol", false};
  st = SubmitAs(carol, "").status();
  EXPECT_NE(st.message().find("carol is in no account"), std::string::npos) << st.message();
  EXPECT_EQ(SubmitAs(Alice(), "science").status().code(), StatusCode::kInvalidArgument);
  // The job's views carry it.
  v1::ListJobsRequest all;
  auto list = engine_->ListJobs(Root(), all);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->jobs(0).account(), "physics");
}

TEST_F(AccountTest, AdminsChangeTheTreeAndUsersDoNot) {
  UseConfig(kAccounts);
  EXPECT_EQ(Account(Alice(), v1::ACCOUNT_OP_ADD, "ml", "science").code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(Account(Root(), v1::ACCOUNT_OP_ADD, "ml", "science").ok());
  EXPECT_EQ(Account(Root(), v1::ACCOUNT_OP_ADD, "ml").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Account(Root(), v1::ACCOUNT_OP_ADD, "vision", "nowhere").code(), StatusCode::kNotFound);
  ASSERT_TRUE(Account(Root(), v1::ACCOUNT_OP_ADD, "vision", "ml").ok());
  // A cycle is refused; so is changing what the config defines.
  Status st = Account(Root(), v1::ACCOUNT_OP_MODIFY, "ml", "vision");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("cycle"), std::string::npos) << st.message();
  st = Account(Root(), v1::ACCOUNT_OP_REMOVE, "physics");
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("defined in test.toml"), std::string::npos) << st.message();
  // Parents come before their children in the listing.
  EXPECT_EQ(AccountNames(),
            (std::vector<std::string>{"root", "science", "chem", "ml", "vision", "physics"}));
  // Users: bob joins ml and makes it his default.
  EXPECT_EQ(User(Bob(), v1::ACCOUNT_OP_ADD, "bob", "ml").code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(User(Root(), v1::ACCOUNT_OP_ADD, "bob", "ml", /*make_default=*/true).ok());
  EXPECT_EQ(Job(*SubmitAs(Bob(), "")).account(), "ml");
  EXPECT_EQ(User(Root(), v1::ACCOUNT_OP_REMOVE, "bob", "chem").code(),
            StatusCode::kFailedPrecondition)
      << "the config put bob in chem";
  // An account with users, sub-accounts or unfinished jobs stays.
  EXPECT_EQ(Account(Root(), v1::ACCOUNT_OP_REMOVE, "ml").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Account(Root(), v1::ACCOUNT_OP_REMOVE, "vision").ok());
  ASSERT_TRUE(User(Root(), v1::ACCOUNT_OP_REMOVE, "bob", "ml").ok());
  st = Account(Root(), v1::ACCOUNT_OP_REMOVE, "ml");
  EXPECT_NE(st.message().find("jobs that have not finished"), std::string::npos) << st.message();
  EXPECT_EQ(Job(*SubmitAs(Bob(), "")).account(), "chem") << "his default went with ml";
}

TEST_F(AccountTest, LiveChangesSurviveRestartsAndTheConfigWins) {
  UseConfig(kAccounts);
  ASSERT_TRUE(Account(Root(), v1::ACCOUNT_OP_ADD, "ml", "science").ok());
  ASSERT_TRUE(User(Root(), v1::ACCOUNT_OP_ADD, "carol", "ml").ok());
  Restart();
  Caller carol{1002, 1002, "carol", false};
  EXPECT_EQ(Job(*SubmitAs(carol, "")).account(), "ml");
  // physics leaves the config: it goes, and alice with it (chem is hers still).
  UseConfig(R"(
[[accounts]]
name = "science"
[[accounts]]
name = "chem"
parent = "science"
users = ["alice", "bob"]
)");
  EXPECT_EQ(AccountNames(), (std::vector<std::string>{"root", "science", "chem", "ml"}));
  EXPECT_EQ(Job(*SubmitAs(Alice(), "")).account(), "chem");
  EXPECT_EQ(Job(*SubmitAs(carol, "")).account(), "ml");
  // A config without science: ml, a live account under it, hangs under root instead.
  UseConfig(R"(
[[accounts]]
name = "chem"
users = ["alice"]
)");
  auto list = engine_->ListAccounts(Root());
  ASSERT_TRUE(list.ok());
  bool found = false;
  for (const auto& a : list->accounts()) {
    if (a.name() != "ml") continue;
    found = true;
    EXPECT_EQ(a.parent(), "root");
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace muster::controller
