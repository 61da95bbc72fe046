// GPU quotas in a pass: guaranteed GPUs always, borrowing only what the cohort lends and up to
// max, lending_limit, and jobs that accept several GPU types running on the next when the first
// type's quota has no room.
#include "muster/core/quota.h"

#include <gtest/gtest.h>

#include "cluster_builder.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

using testing::ClusterBuilder;
using testing::Gang;
using testing::NodeShape;

PendingJob Job(JobId id, uint32_t nodes, uint32_t gpus_per_node,
               std::vector<std::pair<std::string, int32_t>> choices) {
  PendingJob j;
  j.id = id;
  j.submit_time_ms = static_cast<TimeMs>(id);
  j.request = Gang(nodes, gpus_per_node);
  j.request.required_nodes.clear();
  j.request.gpu_type.clear();
  for (auto& [type, quota] : choices) j.choices.push_back({type, {}, quota});
  return j;
}

QuotaView Quota(std::string what, uint64_t guaranteed, uint64_t max, uint64_t lend,
                int32_t cohort) {
  QuotaView q;
  q.what = std::move(what);
  q.guaranteed = guaranteed;
  q.max = max;
  q.lending_limit = lend;
  q.cohort = cohort;
  return q;
}

const PendingReason* ReasonOf(const SchedulePass& pass, JobId id) {
  for (const PendingReason& p : pass.pending) {
    if (p.job == id) return &p;
  }
  return nullptr;
}

const JobStart* StartOf(const SchedulePass& pass, JobId id) {
  for (const JobStart& s : pass.starts) {
    if (s.job == id) return &s;
  }
  return nullptr;
}

class QuotaTest : public ::testing::Test {
 protected:
  // 8 nodes of 8 h100 GPUs: 64 GPUs. Accounts a and b, 32 guaranteed each, one cohort.
  void SetUp() override {
    view_ = ClusterBuilder().Nodes(8, NodeShape{}).Partition("gpu").Schedulable().Build();
    view_.quotas = {Quota("account a: h100 GPUs", 32, 64, 32, 0),
                    Quota("account b: h100 GPUs", 32, 64, 32, 0)};
    view_.cohorts = {{"science (h100)", {0, 1}}};
  }
  ClusterView view_;
};

TEST_F(QuotaTest, GuaranteedGpusStartUnborrowedAndBeyondThemBorrowed) {
  // a runs 3 one-node jobs of 8: the first 4 nodes stay within 32; the 5th borrows.
  std::vector<PendingJob> q = {Job(1, 4, 8, {{"h100", 0}}), Job(2, 1, 8, {{"h100", 0}})};
  SchedulePass pass = Schedule(view_, q, 0, {});
  ASSERT_NE(StartOf(pass, 1), nullptr);
  ASSERT_NE(StartOf(pass, 2), nullptr);
  EXPECT_FALSE(StartOf(pass, 1)->borrowed);
  EXPECT_TRUE(StartOf(pass, 2)->borrowed);
}

TEST_F(QuotaTest, BorrowingStopsWhereTheCohortStopsLending) {
  // b uses 16 of its 32: it lends 16. a at 32 may borrow 16 more, not 24.
  view_.quotas[0].used = 32;
  view_.quotas[1].used = 16;
  std::vector<PendingJob> q = {Job(1, 3, 8, {{"h100", 0}}), Job(2, 2, 8, {{"h100", 0}})};
  SchedulePass pass = Schedule(view_, q, 0, {});
  const PendingReason* r = ReasonOf(pass, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reason, JobReason::kQuotaBorrow);
  EXPECT_NE(r->detail.find("would borrow 24 more"), std::string::npos) << r->detail;
  EXPECT_NE(r->detail.find("lends 16"), std::string::npos) << r->detail;
  EXPECT_EQ(r->expected_start_ms, kNever);
  ASSERT_NE(StartOf(pass, 2), nullptr);
  EXPECT_TRUE(StartOf(pass, 2)->borrowed);
}

TEST_F(QuotaTest, LendingLimitCapsWhatAnAccountLends) {
  view_.quotas[1].lending_limit = 8;  // b keeps 24 of its 32 to itself
  view_.quotas[0].used = 32;
  std::vector<PendingJob> q = {Job(1, 2, 8, {{"h100", 0}}), Job(2, 1, 8, {{"h100", 0}})};
  SchedulePass pass = Schedule(view_, q, 0, {});
  ASSERT_NE(ReasonOf(pass, 1), nullptr);
  EXPECT_EQ(ReasonOf(pass, 1)->reason, JobReason::kQuotaBorrow);
  ASSERT_NE(StartOf(pass, 2), nullptr);  // 8 is what b lends
}

TEST_F(QuotaTest, MaxCapsBorrowingAndSaysSo) {
  view_.quotas[0].max = 40;
  view_.quotas[0].used = 32;
  std::vector<PendingJob> q = {Job(1, 2, 8, {{"h100", 0}})};
  SchedulePass pass = Schedule(view_, q, 0, {});
  const PendingReason* r = ReasonOf(pass, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reason, JobReason::kQuotaMax);
  EXPECT_NE(r->detail.find("32 in use of at most 40"), std::string::npos) << r->detail;
  EXPECT_NE(r->detail.find("starts when 8 more are free"), std::string::npos) << r->detail;
}

TEST_F(QuotaTest, WithoutACohortNothingIsBorrowed) {
  view_.quotas[0].cohort = -1;
  view_.quotas[0].used = 32;
  view_.cohorts[0].members = {1};
  std::vector<PendingJob> q = {Job(1, 1, 8, {{"h100", 0}})};
  SchedulePass pass = Schedule(view_, q, 0, {});
  ASSERT_NE(ReasonOf(pass, 1), nullptr);
  EXPECT_EQ(ReasonOf(pass, 1)->reason, JobReason::kQuotaBorrow);
  EXPECT_NE(ReasonOf(pass, 1)->detail.find("no cohort"), std::string::npos);
}

TEST_F(QuotaTest, AnOwnerWithinItsGuaranteeGoesBeforeAHigherPriorityBorrower) {
  // One node left. a is at its 32 (a job of it would borrow) with the higher priority; b has
  // room in its guarantee. b's job takes the node; without the order, a's would, and b would
  // reclaim it next pass.
  view_.quotas[0].used = 32;
  view_.quotas[1].used = 24;
  for (uint32_t n = 0; n < 7; ++n) view_.nodes[n].gpu_free.assign(8, false);
  PendingJob borrower = Job(1, 1, 8, {{"h100", 0}});
  borrower.priority.qos = 1.0;
  PendingJob owner = Job(2, 1, 8, {{"h100", 1}});
  std::vector<size_t> order = PriorityOrder(view_, {borrower, owner}, 0, {});
  EXPECT_EQ(order, (std::vector<size_t>{1, 0}));
  SchedulePass pass = Schedule(view_, {borrower, owner}, 0, {});
  ASSERT_NE(StartOf(pass, 2), nullptr);
  EXPECT_FALSE(StartOf(pass, 2)->borrowed);
  EXPECT_EQ(StartOf(pass, 1), nullptr);
  // Both within (or both beyond) their guarantees: priority decides as before.
  view_.quotas[0].used = 0;
  EXPECT_EQ(PriorityOrder(view_, {borrower, owner}, 0, {}), (std::vector<size_t>{0, 1}));
}

TEST_F(QuotaTest, StartsInOnePassChargeTheQuotaForTheNext) {
  // Six one-node jobs of a: 4 fit the guarantee, 4 more the loan of b's idle 32; each start
  // counts as the pass goes, and the first four are not borrowed.
  std::vector<PendingJob> q;
  for (JobId id = 1; id <= 6; ++id) q.push_back(Job(id, 1, 8, {{"h100", 0}}));
  view_.quotas[1].used = 16;  // b lends 16: two more nodes' worth
  SchedulePass pass = Schedule(view_, q, 0, {});
  ASSERT_EQ(pass.starts.size(), 6u);
  for (JobId id = 1; id <= 4; ++id) EXPECT_FALSE(StartOf(pass, id)->borrowed) << id;
  for (JobId id = 5; id <= 6; ++id) EXPECT_TRUE(StartOf(pass, id)->borrowed) << id;
  q.push_back(Job(7, 1, 8, {{"h100", 0}}));
  view_.quotas[0].used = 48;
  pass = Schedule(view_, {q.back()}, 0, {});
  ASSERT_NE(ReasonOf(pass, 7), nullptr);
  EXPECT_EQ(ReasonOf(pass, 7)->reason, JobReason::kQuotaBorrow);
}

TEST(QuotaChoices, AJobRunsOnItsNextGpuTypeWhenTheFirstHasNoQuotaLeft) {
  NodeShape a100;
  a100.gpu_type = "a100";
  ClusterView view = ClusterBuilder()
                         .Nodes(2, NodeShape{}, "h", 1)
                         .Nodes(2, a100, "a", 1)
                         .Partition("gpu")
                         .Schedulable()
                         .Build();
  view.quotas = {Quota("account a: h100 GPUs", 8, 8, 0, -1),
                 Quota("account a: a100 GPUs", 16, 16, 0, -1)};
  view.quotas[0].used = 8;  // its h100 quota is spent; h100 nodes are still free
  std::vector<PendingJob> q = {Job(1, 1, 8, {{"h100", 0}, {"a100", 1}})};
  SchedulePass pass = Schedule(view, q, 0, {});
  const JobStart* s = StartOf(pass, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(view.nodes[s->placement.nodes[0].node].gpu_type, "a100");
  EXPECT_FALSE(s->borrowed);

  // With room on both, the first type is taken.
  view.quotas[0].used = 0;
  pass = Schedule(view, q, 0, {});
  ASSERT_NE(StartOf(pass, 1), nullptr);
  EXPECT_EQ(view.nodes[StartOf(pass, 1)->placement.nodes[0].node].gpu_type, "h100");

  // Quota on both but every node busy: it waits for resources (with a reservation), not for a
  // quota.
  for (NodeIndex n = 0; n < 4; ++n) {
    NodePlacement np;
    np.node = n;
    np.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
    view.nodes[n].Take(np);
  }
  pass = Schedule(view, q, 0, {});
  ASSERT_NE(ReasonOf(pass, 1), nullptr);
  EXPECT_EQ(ReasonOf(pass, 1)->reason, JobReason::kResources);
}

TEST(QuotaChoices, EveryChoiceOverItsQuotaGivesTheFirstReason) {
  NodeShape a100;
  a100.gpu_type = "a100";
  ClusterView view = ClusterBuilder()
                         .Nodes(1, NodeShape{}, "h", 1)
                         .Nodes(1, a100, "a", 1)
                         .Partition("gpu")
                         .Schedulable()
                         .Build();
  view.quotas = {Quota("account a: h100 GPUs", 8, 8, 0, -1),
                 Quota("account a: a100 GPUs", 8, 8, 0, -1)};
  view.quotas[0].used = 8;
  view.quotas[1].used = 8;
  SchedulePass pass = Schedule(view, {Job(1, 1, 8, {{"h100", 0}, {"a100", 1}})}, 0, {});
  ASSERT_NE(ReasonOf(pass, 1), nullptr);
  EXPECT_EQ(ReasonOf(pass, 1)->reason, JobReason::kQuotaMax);
  EXPECT_NE(ReasonOf(pass, 1)->detail.find("h100"), std::string::npos);
}

}  // namespace
}  // namespace muster::core
