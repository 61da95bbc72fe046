// AccountManager on its own (no engine): the account tree, users' associations and defaults,
// which account and QoS a job charges, and what a restart brings back.
#include <gtest/gtest.h>

#include "account_manager.h"
#include "manager_context.h"

namespace muster::controller {
namespace {

constexpr const char* kAccounts = R"(
[[qos]]
name = "high"

[[accounts]]
name = "science"
qos = ["normal", "high"]

[[accounts]]
name = "physics"
parent = "science"
users = ["alice"]
)";

class AccountManagerUnitTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  void Start() {
    accounts_.reset();
    ctx_ = world_.Restart();
    accounts_ = std::make_unique<AccountManager>(*ctx_);
    accounts_->SetQosExists([](const std::string& q) { return q == "normal" || q == "high"; });
    store::Mutation m;
    accounts_->Restore(world_.state().accounts, world_.state().users, m);
    ASSERT_TRUE(world_.store().Commit(m).ok());
  }
  static v1::UpdateAccountRequest Account(v1::AccountOp op, const std::string& name) {
    v1::UpdateAccountRequest r;
    r.set_op(op);
    r.set_name(name);
    return r;
  }
  static v1::UpdateUserRequest User(v1::AccountOp op, const std::string& user,
                                    const std::string& account) {
    v1::UpdateUserRequest r;
    r.set_op(op);
    r.set_user(user);
    r.set_account(account);
    return r;
  }
  const Caller root_ = ManagerContext::Root();
  const Caller alice_ = ManagerContext::Alice();
  const std::function<bool(const std::string&)> unused_ = [](const std::string&) { return false; };
  ManagerContext world_{kAccounts};
  std::unique_ptr<EngineContext> ctx_;
  std::unique_ptr<AccountManager> accounts_;
};

TEST_F(AccountManagerUnitTest, AJobChargesAnAccountOfItsUserAndAQosTheTreeAllows) {
  EXPECT_TRUE(accounts_->enforced());
  EXPECT_EQ(*accounts_->ResolveForJob("alice", ""), "physics") << "her only account, the default";
  EXPECT_EQ(*accounts_->ResolveForJob("alice", "physics"), "physics");
  auto foreign = accounts_->ResolveForJob("alice", "science");
  EXPECT_EQ(foreign.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(foreign.status().message().find("physics"), std::string::npos)
      << "the refusal names her accounts: " << foreign.status().message();
  EXPECT_FALSE(accounts_->ResolveForJob("bob", "").ok()) << "bob is in no account";
  // physics names no QoS: its parent's list holds.
  EXPECT_EQ(*accounts_->ResolveQos("physics", "high"), "high");
  EXPECT_FALSE(accounts_->ResolveQos("physics", "scavenger").ok());
  EXPECT_EQ(accounts_->AccountsAbove("alice"),
            (std::set<std::string>{"root", "science", "physics"}));
}

TEST_F(AccountManagerUnitTest, AdminsChangeTheTreeLiveAndARestartKeepsIt) {
  v1::UpdateAccountRequest chem = Account(v1::ACCOUNT_OP_ADD, "chem");
  chem.set_parent("science");
  EXPECT_EQ(accounts_->UpdateAccount(alice_, chem, unused_).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(accounts_->UpdateAccount(root_, chem, unused_).ok());
  EXPECT_EQ(accounts_->UpdateUser(alice_, User(v1::ACCOUNT_OP_ADD, "alice", "chem")).code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(accounts_->UpdateUser(root_, User(v1::ACCOUNT_OP_ADD, "bob", "chem")).ok());
  EXPECT_EQ(*accounts_->ResolveForJob("bob", ""), "chem");
  Start();
  ASSERT_TRUE(accounts_->Exists("chem")) << "a live account is kept in the store";
  EXPECT_EQ(*accounts_->ResolveForJob("bob", ""), "chem") << "and so is the association";
  // An account that jobs charge stays.
  const auto charged = [](const std::string& a) { return a == "chem"; };
  EXPECT_FALSE(
      accounts_->UpdateAccount(root_, Account(v1::ACCOUNT_OP_REMOVE, "chem"), charged).ok());
  EXPECT_TRUE(accounts_->Exists("chem"));
  // Nor while a user is associated with it.
  Status with_user =
      accounts_->UpdateAccount(root_, Account(v1::ACCOUNT_OP_REMOVE, "chem"), unused_);
  EXPECT_EQ(with_user.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(with_user.message().find("still has user bob"), std::string::npos);
  ASSERT_TRUE(accounts_->UpdateUser(root_, User(v1::ACCOUNT_OP_REMOVE, "bob", "chem")).ok());
  Status removed = accounts_->UpdateAccount(root_, Account(v1::ACCOUNT_OP_REMOVE, "chem"), unused_);
  ASSERT_TRUE(removed.ok()) << removed.ToString();
  EXPECT_FALSE(accounts_->Exists("chem"));
}

}  // namespace
}  // namespace muster::controller
