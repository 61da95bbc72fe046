// QosManager on its own (no engine): the config's QoS and "normal", admins' live changes, the
// one-way preempt graph, what a QoS in use keeps, and a restart that brings the live ones back.
#include "qos_manager.h"

#include <gtest/gtest.h>

#include "manager_context.h"

namespace muster::controller {
namespace {

constexpr const char* kQos = R"(
[[qos]]
name = "low"

[[qos]]
name = "high"
priority = 100
preempt = ["low"]
)";

class QosManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  // A fresh manager over the same store, as after a restart.
  void Start() {
    qos_.reset();
    ctx_ = world_.Restart();
    qos_ = std::make_unique<QosManager>(*ctx_);
    store::Mutation m;
    qos_->Restore(world_.state().qos, m);
    ASSERT_TRUE(world_.store().Commit(m).ok());
  }
  Status Update(const Caller& who, v1::UpdateQosRequest req, std::string in_use = "") {
    return qos_->Update(who, req, [&](const std::string&) { return in_use; });
  }
  static v1::UpdateQosRequest Req(v1::AccountOp op, const std::string& name) {
    v1::UpdateQosRequest r;
    r.set_op(op);
    r.set_name(name);
    return r;
  }
  const Caller root_ = ManagerContext::Root();
  const Caller alice_ = ManagerContext::Alice();
  ManagerContext world_{kQos};
  std::unique_ptr<EngineContext> ctx_;
  std::unique_ptr<QosManager> qos_;
};

TEST_F(QosManagerTest, TheConfigsQosAndNormalExistAndPriorityIsRelativeToTheHighest) {
  EXPECT_TRUE(qos_->Exists("normal"));
  EXPECT_TRUE(qos_->Exists("low"));
  EXPECT_TRUE(qos_->Exists("high"));
  EXPECT_FALSE(qos_->Exists("gold"));
  EXPECT_DOUBLE_EQ(qos_->PriorityFactor("high"), 1.0);
  EXPECT_DOUBLE_EQ(qos_->PriorityFactor("low"), 0.0);
  EXPECT_TRUE(qos_->Preempts("high", "low"));
  EXPECT_FALSE(qos_->Preempts("low", "high"));
  EXPECT_TRUE(qos_->AnyPreemption());
}

TEST_F(QosManagerTest, AdminsChangeQosLiveAndTheChangesOutliveARestart) {
  v1::UpdateQosRequest gold = Req(v1::ACCOUNT_OP_ADD, "gold");
  gold.set_priority(400);
  gold.set_preempt("high");
  EXPECT_EQ(Update(alice_, gold).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(Update(root_, gold).ok());
  EXPECT_DOUBLE_EQ(qos_->PriorityFactor("high"), 0.25) << "relative to the new highest";
  EXPECT_TRUE(qos_->Preempts("gold", "high"));
  // One way only: a QoS that would preempt its preemptor is refused, and nothing changes.
  v1::UpdateQosRequest circle = Req(v1::ACCOUNT_OP_MODIFY, "low");
  circle.set_preempt("gold");
  EXPECT_FALSE(Update(root_, circle).ok());
  EXPECT_FALSE(qos_->Preempts("low", "gold"));
  Start();
  ASSERT_TRUE(qos_->Exists("gold")) << "a live QoS is kept in the store";
  EXPECT_EQ(qos_->Find("gold")->priority(), 400u);
  EXPECT_TRUE(qos_->Preempts("gold", "high"));
}

TEST_F(QosManagerTest, AQosInUseIsNotRemoved) {
  ASSERT_TRUE(Update(root_, Req(v1::ACCOUNT_OP_ADD, "gold")).ok());
  Status refused = Update(root_, Req(v1::ACCOUNT_OP_REMOVE, "gold"), "job 12");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("job 12"), std::string::npos) << refused.message();
  EXPECT_TRUE(qos_->Exists("gold"));
  ASSERT_TRUE(Update(root_, Req(v1::ACCOUNT_OP_REMOVE, "gold")).ok());
  EXPECT_FALSE(qos_->Exists("gold"));
  Start();
  EXPECT_FALSE(qos_->Exists("gold")) << "removed from the store too";
}

}  // namespace
}  // namespace muster::controller
