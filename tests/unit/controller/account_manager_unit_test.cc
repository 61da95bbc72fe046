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
  EXPECT_EQ(*accounts_->ResolveQos("alice", "physics", "high"), "high");
  EXPECT_FALSE(accounts_->ResolveQos("alice", "physics", "scavenger").ok());
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

TEST_F(AccountManagerUnitTest, AUsersOwnQosListAndDefaultComeBeforeTheAccounts) {
  EXPECT_EQ(*accounts_->ResolveQos("alice", "physics", ""), "normal") << "science's first";
  // qos-=normal edits the list she inherits from science (normal, high).
  v1::UpdateUserRequest only_high = User(v1::ACCOUNT_OP_MODIFY, "alice", "physics");
  only_high.set_qos("-normal");
  only_high.set_default_qos("high");
  Status st = accounts_->UpdateUser(root_, only_high);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(*accounts_->ResolveQos("alice", "physics", ""), "high") << "her own default";
  auto refused = accounts_->ResolveQos("alice", "physics", "normal");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("user alice in account physics may not use qos "
                                            "'normal' (its QoS: high)"),
            std::string::npos)
      << refused.status().message();
  // Others in physics keep the account's.
  ASSERT_TRUE(accounts_->UpdateUser(root_, User(v1::ACCOUNT_OP_ADD, "bob", "physics")).ok());
  EXPECT_EQ(*accounts_->ResolveQos("bob", "physics", "normal"), "normal");
  // A default outside her list is refused; the change is not made.
  v1::UpdateUserRequest bad = User(v1::ACCOUNT_OP_MODIFY, "alice", "physics");
  bad.set_default_qos("normal");
  EXPECT_EQ(accounts_->UpdateUser(root_, bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*accounts_->ResolveQos("alice", "physics", ""), "high");
  // A restart keeps it; qos= (empty) and defaultqos= clear it back to the account's.
  Start();
  EXPECT_EQ(*accounts_->ResolveQos("alice", "physics", ""), "high");
  v1::UpdateUserRequest clear = User(v1::ACCOUNT_OP_MODIFY, "alice", "physics");
  clear.set_qos("");
  clear.set_default_qos("");
  ASSERT_TRUE(accounts_->UpdateUser(root_, clear).ok());
  EXPECT_EQ(*accounts_->ResolveQos("alice", "physics", "normal"), "normal");
  EXPECT_EQ(accounts_->AssociationOf("alice", "physics"), nullptr) << "nothing of its own left";
}

TEST_F(AccountManagerUnitTest, ACoordinatorManagesWhatLiesUnderItsAccountAndNoMore) {
  v1::UpdateAccountRequest chem = Account(v1::ACCOUNT_OP_ADD, "chem");
  chem.set_parent("science");
  chem.mutable_limits()->set_max_jobs_per_user(4);
  ASSERT_TRUE(accounts_->UpdateAccount(root_, chem, unused_).ok());
  v1::UpdateAccountRequest coord = Account(v1::ACCOUNT_OP_MODIFY, "chem");
  coord.add_add_coordinators("alice");
  EXPECT_EQ(accounts_->UpdateAccount(alice_, coord, unused_).code(), StatusCode::kPermissionDenied)
      << "only admins make coordinators";
  ASSERT_TRUE(accounts_->UpdateAccount(root_, coord, unused_).ok());
  EXPECT_TRUE(accounts_->Coordinates("alice", "chem"));
  EXPECT_FALSE(accounts_->Coordinates("alice", "science"));

  // Under chem: sub-accounts and users are hers to manage.
  v1::UpdateAccountRequest organic = Account(v1::ACCOUNT_OP_ADD, "organic");
  organic.set_parent("chem");
  Status st = accounts_->UpdateAccount(alice_, organic, unused_);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(accounts_->Coordinates("alice", "organic")) << "coordinating chem covers it";
  ASSERT_TRUE(accounts_->UpdateUser(alice_, User(v1::ACCOUNT_OP_ADD, "bob", "organic")).ok());
  v1::UpdateUserRequest two = User(v1::ACCOUNT_OP_MODIFY, "bob", "organic");
  two.mutable_limits()->set_max_jobs_per_user(2);
  ASSERT_TRUE(accounts_->UpdateUser(alice_, two).ok()) << "tighter than chem's 4";
  // But not loosen chem's limits, nor reach past chem, nor its own record.
  v1::UpdateUserRequest ten = User(v1::ACCOUNT_OP_MODIFY, "bob", "organic");
  ten.mutable_limits()->set_max_jobs_per_user(10);
  st = accounts_->UpdateUser(alice_, ten);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("MaxJobs=10 (the accounts allow 4)"), std::string::npos)
      << st.message();
  EXPECT_EQ(accounts_->AssociationOf("bob", "organic")->limits().max_jobs_per_user(), 2u);
  ASSERT_TRUE(accounts_->UpdateUser(root_, ten).ok()) << "an admin may raise it";
  EXPECT_EQ(accounts_->UpdateUser(alice_, User(v1::ACCOUNT_OP_ADD, "bob", "science")).code(),
            StatusCode::kPermissionDenied);
  // bob's default (organic, his first) is hers; carol's is physics, which is not.
  ASSERT_TRUE(accounts_->UpdateUser(root_, User(v1::ACCOUNT_OP_ADD, "carol", "physics")).ok());
  ASSERT_TRUE(accounts_->UpdateUser(alice_, User(v1::ACCOUNT_OP_ADD, "carol", "organic")).ok());
  v1::UpdateUserRequest take = User(v1::ACCOUNT_OP_MODIFY, "carol", "organic");
  take.set_make_default(true);
  EXPECT_EQ(accounts_->UpdateUser(alice_, take).code(), StatusCode::kPermissionDenied)
      << "a coordinator does not move a user's jobs out of an account it does not coordinate";
  EXPECT_EQ(*accounts_->ResolveForJob("carol", ""), "physics");
  v1::UpdateAccountRequest sibling = Account(v1::ACCOUNT_OP_ADD, "biology");
  sibling.set_parent("science");
  st = accounts_->UpdateAccount(alice_, sibling, unused_);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("coordinator of account science"), std::string::npos) << st.message();
  v1::UpdateAccountRequest own = Account(v1::ACCOUNT_OP_MODIFY, "chem");
  own.set_shares(100);
  EXPECT_EQ(accounts_->UpdateAccount(alice_, own, unused_).code(), StatusCode::kPermissionDenied)
      << "chem itself is its parent's to change";
  v1::UpdateAccountRequest quota = Account(v1::ACCOUNT_OP_MODIFY, "organic");
  (*quota.mutable_quotas())["h100"].set_guaranteed(8);
  EXPECT_EQ(accounts_->UpdateAccount(alice_, quota, unused_).code(), StatusCode::kPermissionDenied)
      << "GPU quotas stay with admins";
  v1::UpdateAccountRequest move = Account(v1::ACCOUNT_OP_MODIFY, "organic");
  move.set_parent("physics");
  EXPECT_EQ(accounts_->UpdateAccount(alice_, move, unused_).code(), StatusCode::kPermissionDenied)
      << "not out from under chem";
  // QoS: within what chem allows (science's normal, high).
  v1::UpdateAccountRequest chem_normal = Account(v1::ACCOUNT_OP_MODIFY, "chem");
  chem_normal.set_qos("normal");
  ASSERT_TRUE(accounts_->UpdateAccount(root_, chem_normal, unused_).ok());
  v1::UpdateUserRequest high = User(v1::ACCOUNT_OP_MODIFY, "bob", "organic");
  high.set_qos("high");
  EXPECT_EQ(accounts_->UpdateUser(alice_, high).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(accounts_->UpdateUser(root_, high).ok());

  // A restart keeps coordinators and associations; removing bob from organic drops his.
  Start();
  EXPECT_TRUE(accounts_->Coordinates("alice", "organic"));
  ASSERT_NE(accounts_->AssociationOf("bob", "organic"), nullptr);
  EXPECT_EQ(accounts_->AssociationOf("bob", "organic")->limits().max_jobs_per_user(), 10u);
  ASSERT_TRUE(accounts_->UpdateUser(alice_, User(v1::ACCOUNT_OP_REMOVE, "bob", "organic")).ok());
  EXPECT_EQ(accounts_->AssociationOf("bob", "organic"), nullptr);
}

}  // namespace
}  // namespace muster::controller
