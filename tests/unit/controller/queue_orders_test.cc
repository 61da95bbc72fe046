// The published queue orders (scheduling.order): their scores as the RLScheduler paper states
// them and an integer rank in the same order. Passes under them run through the engine in
// sim_test and the sim_golden test.
#include "queue_orders.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace muster::controller {
namespace {

using Kind = OrderedPassPolicy::Kind;

TEST(QueueOrdersTest, NamesParseAndTheDefaultIsNotOne) {
  EXPECT_EQ(OrderedPassPolicy::Parse("fcfs"), Kind::kFcfs);
  EXPECT_EQ(OrderedPassPolicy::Parse("sjf"), Kind::kSjf);
  EXPECT_EQ(OrderedPassPolicy::Parse("wfp3"), Kind::kWfp3);
  EXPECT_EQ(OrderedPassPolicy::Parse("unicep"), Kind::kUnicep);
  EXPECT_EQ(OrderedPassPolicy::Parse("f1"), Kind::kF1);
  EXPECT_EQ(OrderedPassPolicy::Parse("hrrn"), Kind::kHrrn);
  EXPECT_EQ(OrderedPassPolicy::ParseBackfillOrder("shortest"),
            OrderedPassPolicy::BackfillOrder::kShortest);
  EXPECT_EQ(OrderedPassPolicy::ParseBackfillOrder("area"), OrderedPassPolicy::BackfillOrder::kArea);
  EXPECT_FALSE(OrderedPassPolicy::ParseBackfillOrder("random"));
  EXPECT_FALSE(OrderedPassPolicy::Parse("multifactor"));
  EXPECT_FALSE(OrderedPassPolicy::Parse("FCFS"));
}

TEST(QueueOrdersTest, ScoresPutTheRightJobFirst) {
  auto score = OrderedPassPolicy::Score;
  // FCFS: the earlier submission.
  EXPECT_GT(score(Kind::kFcfs, 0, 100, 1, 10), score(Kind::kFcfs, 0, 100, 1, 20));
  // SJF: the shorter time limit, whatever the wait.
  EXPECT_GT(score(Kind::kSjf, 0, 60, 64, 50), score(Kind::kSjf, 1000, 3600, 1, 10));
  // WFP3: (wait/limit)^3 x procs.
  EXPECT_DOUBLE_EQ(score(Kind::kWfp3, 200, 100, 4, 0), 32.0);
  EXPECT_GT(score(Kind::kWfp3, 200, 100, 4, 0), score(Kind::kWfp3, 100, 100, 4, 0));
  // UNICEP: wait / (log2(procs) x limit); one processor is far ahead.
  EXPECT_NEAR(score(Kind::kUnicep, 400, 100, 4, 0), 2.0, 1e-9);
  EXPECT_GT(score(Kind::kUnicep, 1, 100, 1, 0), score(Kind::kUnicep, 400, 100, 4, 0));
  // F1: log10(limit) x procs + 870 log10(submit), smallest first.
  EXPECT_NEAR(score(Kind::kF1, 0, 1000, 2, 100), -(3 * 2 + 870 * 2), 1e-9);
  EXPECT_GT(score(Kind::kF1, 0, 1000, 2, 100), score(Kind::kF1, 0, 1000, 2, 1000));
  EXPECT_TRUE(std::isfinite(score(Kind::kF1, 0, 0, 1, 0))) << "0 counts as 0.1, as the paper";
  // HRRN: (wait + limit) / limit, the limit at least 10 s.
  EXPECT_DOUBLE_EQ(score(Kind::kHrrn, 100, 100, 8, 0), 2.0);
  EXPECT_DOUBLE_EQ(score(Kind::kHrrn, 10, 1, 8, 0), 2.0);
}

TEST(QueueOrdersTest, RanksKeepTheOrderOfScores) {
  std::vector<double> scores = {-1e300, -5.5, -1, -1e-300, 0, 1e-300, 0.25, 1, 3, 1e18, 1e300};
  for (size_t i = 1; i < scores.size(); ++i) {
    EXPECT_LT(OrderedPassPolicy::RankOf(scores[i - 1]), OrderedPassPolicy::RankOf(scores[i]))
        << scores[i - 1] << " vs " << scores[i];
  }
}

}  // namespace
}  // namespace muster::controller
