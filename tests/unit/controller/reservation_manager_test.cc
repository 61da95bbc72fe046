// ReservationManager on its own (no engine): admins' reservations kept in the store, the clashes
// and busy nodes that refuse one, who may use one (accounts listed cover their sub-accounts),
// the clock ending a one-off reservation and moving a daily one on, and a restart that drops
// nodes the config no longer has.
#include "reservation_manager.h"

#include <gtest/gtest.h>

#include "account_manager.h"
#include "manager_context.h"

namespace muster::controller {
namespace {

constexpr TimeMs kNow = 1'700'000'000'000;
constexpr TimeMs kHour = 3'600'000;
constexpr TimeMs kDay = 24 * kHour;

constexpr const char* kReservations = R"(
[[nodes]]
names = "node2"
cpus = 4
memory_mb = 1000

[[partition]]
name = "q"
nodes = "node2"

[[accounts]]
name = "science"
users = ["bob"]

[[accounts]]
name = "physics"
parent = "science"
users = ["alice"]
)";

class ReservationManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  // A fresh manager over the same store, as after a restart.
  void Start() {
    reservations_.reset();
    accounts_.reset();
    ctx_ = world_.Restart();
    accounts_ = std::make_unique<AccountManager>(*ctx_);
    accounts_->SetQosExists([](const std::string& q) { return q == "normal"; });
    store::Mutation m;
    accounts_->Restore(world_.state().accounts, world_.state().users, m);
    reservations_ = std::make_unique<ReservationManager>(*ctx_, *accounts_);
    reservations_->Restore(world_.state().reservations, m);
    ASSERT_TRUE(world_.store().Commit(m).ok());
  }
  // The nodes as the scheduler sees them: all up, with running_ on them.
  core::ClusterView Live() const {
    core::ClusterView v;
    for (const NodeConfig& n : ctx_->config().nodes) {
      core::NodeView node;
      node.name = n.name;
      node.cpus = n.cpus;
      node.memory_mb = n.memory_mb;
      node.schedulable = true;
      v.nodes.push_back(node);
    }
    v.running = running_;
    return v;
  }
  Status Update(const Caller& who, const v1::UpdateReservationRequest& req,
                const std::string& in_use = "") {
    std::string name;
    return reservations_->Update(
        who, req, now_, Live(), [&](const std::string&) { return in_use; }, &name);
  }
  // Alice's, on `nodes` from `start` for `duration`.
  static v1::UpdateReservationRequest Add(const std::string& name, const std::string& nodes,
                                          TimeMs start, TimeMs duration) {
    v1::UpdateReservationRequest r;
    r.set_op(v1::ACCOUNT_OP_ADD);
    r.set_name(name);
    r.set_nodes(nodes);
    r.set_start_ms(start);
    r.set_duration_ms(duration);
    r.set_users("alice");
    return r;
  }
  static v1::UpdateReservationRequest Op(v1::AccountOp op, const std::string& name) {
    v1::UpdateReservationRequest r;
    r.set_op(op);
    r.set_name(name);
    return r;
  }
  const Caller root_ = ManagerContext::Root();
  const Caller alice_ = ManagerContext::Alice();
  TimeMs now_ = kNow;
  std::vector<core::RunningUse> running_;
  ManagerContext world_{kReservations};
  std::unique_ptr<EngineContext> ctx_;
  std::unique_ptr<AccountManager> accounts_;
  std::unique_ptr<ReservationManager> reservations_;
};

TEST_F(ReservationManagerTest, OnlyAdminsMakeReservationsAndARestartBringsThemBack) {
  EXPECT_EQ(Update(alice_, Add("train", "node1", kNow, kHour)).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(reservations_->Find("train"), nullptr);
  ASSERT_TRUE(Update(root_, Add("train", "node1", kNow, kHour)).ok());
  EXPECT_EQ(Update(root_, Add("train", "node2", kNow, kHour)).code(), StatusCode::kAlreadyExists);
  Start();
  const v1::ReservationRecord* r = reservations_->Find("train");
  ASSERT_NE(r, nullptr) << "kept in the store";
  EXPECT_EQ(std::vector<std::string>(r->nodes().begin(), r->nodes().end()),
            std::vector<std::string>{"node1"});
  EXPECT_EQ(r->start_ms(), kNow);
  EXPECT_EQ(r->end_ms(), kNow + kHour);
  EXPECT_EQ(r->created_by(), "root");
  // Not removed while a job uses it.
  Status refused = Update(root_, Op(v1::ACCOUNT_OP_REMOVE, "train"), "job 7");
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("in use by job 7"), std::string::npos) << refused.message();
  EXPECT_NE(reservations_->Find("train"), nullptr);
  ASSERT_TRUE(Update(root_, Op(v1::ACCOUNT_OP_REMOVE, "train")).ok());
  Start();
  EXPECT_EQ(reservations_->Find("train"), nullptr) << "removed from the store too";
}

TEST_F(ReservationManagerTest, NodesHeldByAnotherReservationOrAJobThenAreRefused) {
  ASSERT_TRUE(Update(root_, Add("a", "node1", kNow, 2 * kHour)).ok());
  Status clash = Update(root_, Add("b", "node1", kNow + kHour, 2 * kHour));
  EXPECT_EQ(clash.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(clash.message().find("reservation a already holds node node1"), std::string::npos)
      << clash.message();
  EXPECT_EQ(reservations_->Find("b"), nullptr);
  EXPECT_TRUE(Update(root_, Add("b", "node1", kNow + 2 * kHour, kHour)).ok()) << "after a ends";
  v1::UpdateReservationRequest overlap = Add("c", "node1", kNow, kHour);
  overlap.set_flags("overlap");
  EXPECT_TRUE(Update(root_, overlap).ok());

  // A job running on node2 past the start keeps it, unless the reservation ignores jobs.
  running_.push_back({.job = 7,
                      .node = static_cast<core::NodeIndex>(*ctx_->NodeIndex("node2")),
                      .end_ms = kNow + 3 * kHour,
                      .cpus = 1});
  Status busy = Update(root_, Add("d", "node2", kNow + kHour, kHour));
  EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(busy.message().find("busy with job 7"), std::string::npos) << busy.message();
  v1::UpdateReservationRequest over_jobs = Add("d", "node2", kNow + kHour, kHour);
  over_jobs.set_flags("ignore_jobs");
  EXPECT_TRUE(Update(root_, over_jobs).ok());
}

TEST_F(ReservationManagerTest, ItsUsersAndTheAccountsBelowThoseListedMayUseIt) {
  v1::UpdateReservationRequest req = Add("lab", "node1", kNow, kHour);
  req.set_users("carol");
  req.set_accounts("nosuch");
  EXPECT_EQ(Update(root_, req).code(), StatusCode::kNotFound) << "accounts must exist";
  req.set_accounts("science");
  ASSERT_TRUE(Update(root_, req).ok());
  EXPECT_TRUE(reservations_->CheckUse(alice_, "lab", "carol", "").ok());
  EXPECT_TRUE(reservations_->CheckUse(alice_, "lab", "alice", "physics").ok())
      << "physics lies under science";
  Status denied = reservations_->CheckUse(alice_, "lab", "alice", "chem");
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("it is for users carol and accounts science"), std::string::npos)
      << denied.message();
  EXPECT_TRUE(reservations_->CheckUse(root_, "lab", "root", "chem").ok()) << "admins may";
  EXPECT_EQ(reservations_->CheckUse(root_, "nolab", "root", "").code(), StatusCode::kNotFound);
}

TEST_F(ReservationManagerTest, TheClockEndsAOneOffReservationAndMovesADailyOneOn) {
  ASSERT_TRUE(Update(root_, Add("once", "node1", kNow, kHour)).ok());
  v1::UpdateReservationRequest daily = Add("daily", "node2", kNow, kHour);
  daily.set_flags("daily");
  ASSERT_TRUE(Update(root_, daily).ok());
  EXPECT_EQ(reservations_->EndOfRunIn("once", kNow + 10), kNow + kHour);
  core::ClusterView view;
  reservations_->AddWindows(view, kNow);
  size_t daily_windows = 0;
  for (const core::AdvanceReservation& a : view.advance) {
    if (a.name != "daily") continue;
    EXPECT_EQ(a.start_ms, kNow + static_cast<TimeMs>(daily_windows) * kDay);
    ++daily_windows;
  }
  EXPECT_GT(daily_windows, 1u) << "its coming occurrences, a day apart";

  EXPECT_FALSE(reservations_->Tick(kNow + kHour - 1)) << "nothing is over yet";
  EXPECT_TRUE(reservations_->Tick(kNow + kHour));
  EXPECT_EQ(reservations_->Find("once"), nullptr);
  EXPECT_EQ(reservations_->EndOfRunIn("once", kNow + kHour), core::kNever);
  Start();
  EXPECT_EQ(reservations_->Find("once"), nullptr) << "deleted from the store";
  const v1::ReservationRecord* next = reservations_->Find("daily");
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->start_ms(), kNow + kDay) << "the next occurrence was stored";
  EXPECT_EQ(next->end_ms(), kNow + kDay + kHour);
  const auto active = reservations_->ActiveByNode(kNow + kDay + 10);
  EXPECT_EQ(active.at(*ctx_->NodeIndex("node2")), next);
  EXPECT_EQ(active.at(*ctx_->NodeIndex("node1")), nullptr);
  // A flex reservation's jobs may run past its end.
  now_ = kNow + kDay;
  v1::UpdateReservationRequest flex = Op(v1::ACCOUNT_OP_MODIFY, "daily");
  flex.set_flags("+flex");
  ASSERT_TRUE(Update(root_, flex).ok());
  EXPECT_TRUE(reservations_->Find("daily")->daily()) << "+flex adds, keeps the rest";
  EXPECT_EQ(reservations_->EndOfRunIn("daily", kNow + kDay + 10), core::kNever);
}

TEST_F(ReservationManagerTest, ARestartDropsNodesTheConfigNoLongerHas) {
  v1::ReservationRecord old;
  old.set_name("old");
  old.set_start_ms(kNow);
  old.set_end_ms(kNow + kHour);
  old.add_nodes("node1");
  old.add_nodes("gone");
  old.add_users("alice");
  store::Mutation m;
  m.PutReservation(old);
  ASSERT_TRUE(world_.store().Commit(m).ok());
  Start();
  ASSERT_NE(reservations_->Find("old"), nullptr);
  EXPECT_EQ(reservations_->Find("old")->nodes_size(), 1);
  EXPECT_EQ(reservations_->Find("old")->nodes(0), "node1");
  Start();
  ASSERT_EQ(world_.state().reservations.size(), 1u);
  EXPECT_EQ(world_.state().reservations[0].nodes_size(), 1) << "the store was told too";
}

}  // namespace
}  // namespace muster::controller
