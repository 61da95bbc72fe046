// What muster-sim compares: policy names, the paper's sampled sequences, intervals, and a
// policy's runs summed up.
#include "muster/sim/experiment.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace muster::sim {
namespace {

TEST(ExperimentTest, PolicyNamesSetTheirPartsOfTheConfig) {
  auto p = ParsePolicy("sjf+strict/area@random");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Config c = WithPolicy(Config{}, *p);
  EXPECT_EQ(c.scheduling.order, "sjf");
  EXPECT_EQ(c.scheduling.backfill, "strict");
  EXPECT_EQ(c.scheduling.backfill_depth, 1u);
  EXPECT_EQ(c.scheduling.backfill_order, "area");
  EXPECT_EQ(c.scheduling.placement, "random");

  // "muster" with nothing else leaves the config as it is.
  Config mine;
  mine.scheduling.backfill_depth = 7;
  p = ParsePolicy("muster");
  ASSERT_TRUE(p.ok());
  c = WithPolicy(mine, *p);
  EXPECT_EQ(c.scheduling.order, "multifactor");
  EXPECT_EQ(c.scheduling.backfill_depth, 7u);
  const auto none = ParsePolicy("fcfs+none");
  const auto conservative = ParsePolicy("fcfs+conservative");
  ASSERT_TRUE(none.ok() && conservative.ok());
  EXPECT_EQ(WithPolicy(mine, *none).scheduling.backfill_depth, 0u);
  EXPECT_EQ(WithPolicy(mine, *conservative).scheduling.backfill_depth, 100'000u);

  // ~WAIT: protect_after.
  p = ParsePolicy("f1+easy@first_fit~36h");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  c = WithPolicy(Config{}, *p);
  EXPECT_EQ(c.scheduling.protect_after_ms, 36u * 3'600'000);
  EXPECT_EQ(c.scheduling.order, "f1");
  EXPECT_EQ(c.scheduling.placement, "first_fit");
  EXPECT_EQ(ParsePolicy("sjf~90m")->protect_after_ms, 90 * 60'000);
  EXPECT_EQ(ParsePolicy("sjf~3650d")->protect_after_ms, 3'650LL * 86'400'000);
  EXPECT_EQ(ParsePolicy("sjf~45")->protect_after_ms, 45'000) << "seconds, as in a config file";
  EXPECT_EQ(WithPolicy(Config{}, *ParsePolicy("sjf")).scheduling.protect_after_ms, 0u);

  for (const char* bad : {"fifo", "fcfs+lazy", "fcfs/biggest", "fcfs@best", "", "muster~1h", "f1~",
                          "f1~0h", "f1~1w", "f1~99999999h", "f1~3651d"}) {
    EXPECT_FALSE(ParsePolicy(bad).ok()) << bad;
  }
}

TEST(ExperimentTest, SequencesStartInsideThePapersRangeTheSameForASeed) {
  auto a = SampleStarts(10'000, 1024, 100, 5);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 100u);
  for (size_t s : *a) {
    EXPECT_GE(s, 1024u);
    EXPECT_LT(s, 10'000u - 1025u);
  }
  const auto again = SampleStarts(10'000, 1024, 100, 5);
  const auto other = SampleStarts(10'000, 1024, 100, 6);
  ASSERT_TRUE(again.ok() && other.ok());
  EXPECT_EQ(*a, *again);
  EXPECT_NE(*a, *other);
  // Drawn from the first 3,000 only.
  const auto first = SampleStarts(50'000, 1024, 50, 1, 3'000);
  ASSERT_TRUE(first.ok());
  for (size_t s : *first) EXPECT_LT(s, 3'000u - 1025u);
  EXPECT_FALSE(SampleStarts(2'000, 1024, 1, 0).ok()) << "too short for one sequence";
}

TEST(ExperimentTest, TheIntervalIsStudentsTAtNinetySevenAndAHalfPercent) {
  const Interval i = MeanInterval({1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(i.mean, 3);
  // sd = sqrt(2.5), t(4) = 2.776.
  EXPECT_NEAR(i.half_width, 2.776 * std::sqrt(2.5) / std::sqrt(5.0), 1e-9);
  EXPECT_DOUBLE_EQ(MeanInterval({4}).half_width, 0);
  EXPECT_EQ(MeanInterval({}).n, 0u);
}

TEST(ExperimentTest, APolicysRunsPoolTheirLargestWaitsAndWeighGangsByCount) {
  RunFigures a, b;
  a.metrics.bounded_slowdown = 10;
  b.metrics.bounded_slowdown = 20;
  a.metrics.gpu_cluster = true;
  a.metrics.gangs_with_leaf_room = 3;
  a.metrics.in_one_leaf = 1.0;
  b.metrics.gangs_with_leaf_room = 1;
  b.metrics.in_one_leaf = 0.0;
  a.largest_waits = {5, 100};
  b.largest_waits = {7};
  const PolicySummary s = Summarize("p", {&a, &b});
  EXPECT_DOUBLE_EQ(s.bounded_slowdown.mean, 15);
  EXPECT_EQ(s.bounded_slowdown_runs, (std::vector<double>{10, 20}));
  EXPECT_DOUBLE_EQ(s.large_max_s, 100);
  EXPECT_DOUBLE_EQ(s.large_p99_s, 100);
  EXPECT_EQ(s.gangs_with_leaf_room, 4u);
  EXPECT_DOUBLE_EQ(s.in_one_leaf, 0.75) << "3 of 4 gangs, not the mean of 1 and 0";
  EXPECT_TRUE(s.gpu_cluster);

  std::ostringstream out;
  SequenceDraw draw{2, 1024, 0, 9, {1500, 2500}};
  WriteComparisonJson({s}, 2, &draw, out);
  const std::string j = out.str();
  EXPECT_NE(j.find("\"starts\": [1500, 2500]"), std::string::npos) << j;
  EXPECT_NE(j.find("\"policy\": \"p\""), std::string::npos);
  EXPECT_NE(j.find("\"in_one_leaf\": 0.750000"), std::string::npos);
  EXPECT_NE(j.find("\"bounded_slowdown_runs\": [10.000000, 20.000000]"), std::string::npos);
}

}  // namespace
}  // namespace muster::sim
