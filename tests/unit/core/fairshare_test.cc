// Fair Tree: siblings first, then down the tree; ranks become factors.
#include "muster/core/fairshare.h"

#include <gtest/gtest.h>

namespace muster::core {
namespace {

double Factor(const FairShareResult& r, const std::string& account, const std::string& user) {
  auto it = r.factor.find({account, user});
  return it == r.factor.end() ? -1 : it->second;
}

TEST(FairTreeTest, TheUnderServedSiblingComesFirst) {
  const std::vector<FairShareAccount> accounts = {{"a", "root", 1}, {"b", "root", 1}};
  auto r = ComputeFairTree(accounts, {{"a", "alice", 300}, {"b", "bob", 100}});
  EXPECT_DOUBLE_EQ(Factor(r, "b", "bob"), 1.0);
  EXPECT_DOUBLE_EQ(Factor(r, "a", "alice"), 0.5);
  // Shares weigh in: with 4 times b's shares, a's 3 times the usage is its fair due.
  auto weighted = ComputeFairTree({{"a", "root", 4}, {"b", "root", 1}},
                                  {{"a", "alice", 300}, {"b", "bob", 100}});
  EXPECT_DOUBLE_EQ(Factor(weighted, "a", "alice"), 1.0);
  EXPECT_DOUBLE_EQ(Factor(weighted, "b", "bob"), 0.5);
}

TEST(FairTreeTest, SiblingsAreComparedBeforeTheirChildren) {
  // org2 has used nothing: every one of its users ranks above every user of org1, however
  // little some of org1's have used themselves.
  const std::vector<FairShareAccount> accounts = {{"org1", "root", 1},
                                                  {"org2", "root", 1},
                                                  {"t1", "org1", 1},
                                                  {"t2", "org1", 1},
                                                  {"t3", "org2", 1}};
  auto r = ComputeFairTree(accounts,
                           {{"t1", "u1", 1000}, {"t2", "u2", 1}, {"t3", "u3", 0}, {"t3", "u4", 0}});
  EXPECT_DOUBLE_EQ(Factor(r, "t3", "u3"), 1.0);
  EXPECT_DOUBLE_EQ(Factor(r, "t3", "u4"), 1.0) << "equal usage, equal rank";
  EXPECT_DOUBLE_EQ(Factor(r, "t2", "u2"), 0.5);
  EXPECT_DOUBLE_EQ(Factor(r, "t1", "u1"), 0.25);
  // The rows walk the tree, the under-served first, with each line's numbers.
  ASSERT_GE(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].account, "org2");
  EXPECT_EQ(r.rows[0].depth, 0);
  EXPECT_DOUBLE_EQ(r.rows[0].norm_shares, 0.5);
  EXPECT_DOUBLE_EQ(r.rows[0].raw_usage, 0);
  bool saw_org1 = false;
  for (const FairShareRow& row : r.rows) {
    if (row.account != "org1" || !row.user.empty()) continue;
    saw_org1 = true;
    EXPECT_DOUBLE_EQ(row.raw_usage, 1001);
    EXPECT_DOUBLE_EQ(row.norm_usage, 1.0);
    EXPECT_DOUBLE_EQ(row.level_fs, 0.5);
  }
  EXPECT_TRUE(saw_org1);
}

TEST(FairTreeTest, NoUsageAtAllIsATieAndBrokenTreesStillRank) {
  auto r = ComputeFairTree({{"a", "root", 1}, {"b", "root", 3}}, {{"a", "x", 0}, {"b", "y", 0}});
  EXPECT_DOUBLE_EQ(Factor(r, "a", "x"), 1.0);
  EXPECT_DOUBLE_EQ(Factor(r, "b", "y"), 1.0);
  // A cycle and a missing parent make top-level accounts; an unknown account has no factor.
  auto broken = ComputeFairTree({{"a", "b", 1}, {"b", "a", 1}, {"c", "gone", 1}},
                                {{"a", "x", 5}, {"c", "y", 1}, {"nope", "z", 0}});
  EXPECT_GT(Factor(broken, "a", "x"), 0);
  EXPECT_GT(Factor(broken, "c", "y"), Factor(broken, "a", "x"));
  EXPECT_EQ(Factor(broken, "nope", "z"), -1);
}

TEST(DrfTest, TheDominantShareOrdersAssociationsWeightedByShares) {
  const std::vector<FairShareAccount> tree = {{"physics", "root", 1}, {"bio", "root", 1}};
  const std::map<std::string, double> capacity = {
      {"gpu:h100", 32}, {"cpu", 256}, {"mem", 1'000'000}};
  // physics holds half the GPUs and few CPUs; bio few GPUs but 60% of the CPUs: bio's dominant
  // share (CPUs, 0.6) is the larger, so physics ranks first.
  std::vector<DrfAssociation> as = {
      {"physics", "alice", {{"gpu:h100", 16}, {"cpu", 16}}},
      {"bio", "bob", {{"gpu:h100", 2}, {"cpu", 154}}},
  };
  FairShareResult r = ComputeDrf(tree, as, capacity);
  EXPECT_DOUBLE_EQ(r.factor.at({"physics", "alice"}), 1.0);
  EXPECT_DOUBLE_EQ(r.factor.at({"bio", "bob"}), 0.5);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].account, "physics");
  EXPECT_NEAR(r.rows[0].raw_usage, 0.5 / 0.5, 1e-9);  // dominant share over its weight
  // Shares weigh in: with three times bio's shares, physics' 0.5 counts as less than bio's 0.6.
  const std::vector<FairShareAccount> weighted = {{"physics", "root", 1}, {"bio", "root", 3}};
  r = ComputeDrf(weighted, as, capacity);
  EXPECT_DOUBLE_EQ(r.factor.at({"bio", "bob"}), 1.0);
  // Two users of one account split its weight; nothing held ties at the top; unknown accounts
  // are left out.
  as = {{"physics", "alice", {}}, {"physics", "carol", {}}, {"nosuch", "dave", {{"cpu", 1}}}};
  r = ComputeDrf(tree, as, capacity);
  EXPECT_DOUBLE_EQ(r.factor.at({"physics", "alice"}), 1.0);
  EXPECT_DOUBLE_EQ(r.factor.at({"physics", "carol"}), 1.0);
  EXPECT_FALSE(r.factor.count({"nosuch", "dave"}));
}

TEST(FairShareTest, AUsersSharesWeighItAmongItsAccountsUsers) {
  const std::vector<FairShareAccount> tree = {{"physics", "root", 1}};
  // Equal usage; alice has three times carol's shares, so the same usage is less of her due.
  std::vector<FairShareAssociation> fair = {{"physics", "alice", 100, 3},
                                            {"physics", "carol", 100, 1}};
  FairShareResult r = ComputeFairTree(tree, fair);
  EXPECT_DOUBLE_EQ(Factor(r, "physics", "alice"), 1.0);
  EXPECT_DOUBLE_EQ(Factor(r, "physics", "carol"), 0.5);
  fair[0].shares = 1;
  r = ComputeFairTree(tree, fair);
  EXPECT_DOUBLE_EQ(Factor(r, "physics", "carol"), 1.0) << "equal shares: a tie";
  EXPECT_DOUBLE_EQ(Factor(r, "physics", "alice"), 1.0);
  // DRF: the account's weight splits by shares; holding the same, alice's dominant share over
  // her larger weight is the smaller.
  const std::map<std::string, double> capacity = {{"cpu", 100}};
  const std::vector<DrfAssociation> drf = {{"physics", "alice", {{"cpu", 30}}, 3},
                                           {"physics", "carol", {{"cpu", 30}}, 1}};
  r = ComputeDrf(tree, drf, capacity);
  EXPECT_DOUBLE_EQ(r.factor.at({"physics", "alice"}), 1.0);
  EXPECT_DOUBLE_EQ(r.factor.at({"physics", "carol"}), 0.5);
}

}  // namespace
}  // namespace muster::core
