// Backfill, reservations, expected start times and pending reasons: golden cases.
#include <gtest/gtest.h>

#include "cluster_builder.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

constexpr TimeMs kMin = 60'000;
constexpr TimeMs kHour = 60 * kMin;
constexpr TimeMs kNow = 1'000 * kHour;

// Two 8-GPU nodes under one leaf; node 0 is fully used by job 500 until now + 1h.
ClusterView Busy() {
  ClusterView v = testing::ClusterBuilder()
                      .Nodes(2, {}, "n", 1, testing::Under("spine1/leaf1"))
                      .Partition("gpu")
                      .Build();
  Placement running{"gpu",
                    0,
                    {{0,
                      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                      0,
                      {0, 1, 2, 3, 4, 5, 6, 7},
                      1}}};
  Allocate(running, v);
  v.running.push_back({500, 0, kNow + kHour, 16, 8, 0});
  return v;
}

JobRequest Req(uint32_t nodes, uint32_t gpus, TimeMs limit) {
  JobRequest r = testing::Gang(nodes, gpus);
  r.time_limit_ms = limit;
  return r;
}

PendingJob Job(JobId id, int64_t prio, JobRequest r) {
  return testing::Job(id, prio, kNow - static_cast<TimeMs>(id), std::move(r));
}

const PendingReason* ReasonFor(const SchedulePass& pass, JobId id) {
  for (const auto& p : pass.pending) {
    if (p.job == id) return &p;
  }
  return nullptr;
}

bool Started(const SchedulePass& pass, JobId id) {
  for (const auto& s : pass.starts) {
    if (s.job == id) return true;
  }
  return false;
}

TEST(BackfillTest, ShortJobBackfillsLongJobWaits) {
  ClusterView v = Busy();
  std::vector<PendingJob> q = {
      Job(1, 100, Req(2, 8, 2 * kHour)),  // needs both nodes: node 0 frees at +1h
      Job(2, 50, Req(1, 4, 30 * kMin)),   // ends before +1h on node 1: backfills
      Job(3, 40, Req(1, 4, 2 * kHour)),   // fits now too, but would still run at +1h: waits
  };
  SchedulePass pass = Schedule(v, q, kNow, {});
  ASSERT_EQ(pass.reservations.size(), 2u);
  EXPECT_EQ(pass.reservations[0].job, 1u);
  EXPECT_EQ(pass.reservations[0].start_ms, kNow + kHour);
  EXPECT_EQ(pass.reservations[0].end_ms, kNow + 3 * kHour);
  EXPECT_EQ(pass.reservations[0].nodes, (std::vector<NodeIndex>{0, 1}));
  EXPECT_TRUE(Started(pass, 2));
  EXPECT_EQ(pass.stats.backfilled, 1u);

  const PendingReason* r1 = ReasonFor(pass, 1);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->reason, JobReason::kResources);
  EXPECT_EQ(r1->expected_start_ms, kNow + kHour);
  EXPECT_EQ(r1->detail,
            "needs 2 nodes x (8 GPUs, 1 CPUs); 2 nodes under spine1/leaf1 reserved for this job, "
            "starting in 1:00:00, when job 500 ends");

  // Job 3 would fit on node 1 now but would still hold it when job 1's reservation starts; it
  // gets the next slot, after job 1.
  const PendingReason* r3 = ReasonFor(pass, 3);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->reason, JobReason::kPriority);
  EXPECT_EQ(r3->expected_start_ms, kNow + 3 * kHour);
  EXPECT_NE(r3->detail.find("what is free now is reserved for job 1"), std::string::npos)
      << r3->detail;
}

TEST(BackfillTest, EasyBackfillReservesOnlyTheFirstBlockedJob) {
  ClusterView v = Busy();
  std::vector<PendingJob> q = {Job(1, 100, Req(2, 8, 2 * kHour)), Job(3, 40, Req(2, 8, kHour))};
  SchedulerConfig easy;
  easy.backfill_depth = 1;
  SchedulePass pass = Schedule(v, q, kNow, easy);
  ASSERT_EQ(pass.reservations.size(), 1u);
  const PendingReason* r3 = ReasonFor(pass, 3);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->reason, JobReason::kPriority);
  // Its estimate comes after job 1's reservation.
  EXPECT_EQ(r3->expected_start_ms, kNow + 3 * kHour);
}

TEST(BackfillTest, AJobThatTakesNoReservationHoldsNothingForLaterJobs) {
  // As ShortJobBackfillsLongJobWaits, but job 1 takes no reservation (selective reservations):
  // job 3 (2 h) now starts on node 1, and job 1 waits for resources with nothing reserved.
  ClusterView v = Busy();
  std::vector<PendingJob> q = {Job(1, 100, Req(2, 8, 2 * kHour)), Job(3, 40, Req(1, 4, 2 * kHour))};
  q[0].reserve = false;
  SchedulePass pass = Schedule(v, q, kNow, {});
  EXPECT_TRUE(pass.reservations.empty());
  EXPECT_TRUE(Started(pass, 3));
  const PendingReason* r1 = ReasonFor(pass, 1);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->reason, JobReason::kResources);
  EXPECT_NE(r1->detail.find("reserves nothing for it"), std::string::npos) << r1->detail;
  // With its reservation it keeps node 1 from job 3.
  q[0].reserve = true;
  pass = Schedule(v, q, kNow, {});
  EXPECT_FALSE(Started(pass, 3));
}

// Nodes 0 and 1 (of partition `partition`) wholly used by jobs 500 and 501 until now + 1h.
void FirstTwoBusyForAnHour(ClusterView& v, const std::string& partition) {
  for (NodeIndex n : {0u, 1u}) {
    Placement running{partition,
                      0,
                      {{n,
                        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                        0,
                        {0, 1, 2, 3, 4, 5, 6, 7},
                        1}}};
    Allocate(running, v);
    v.running.push_back({500 + n, n, kNow + kHour, 16, 8, 0});
  }
}

// Four 8-GPU nodes; nodes 0 and 1 are busy until now + 1h.
ClusterView HalfBusy() {
  ClusterView v = testing::ClusterBuilder()
                      .Nodes(4, {}, "n", 1, testing::Under("spine1/leaf1"))
                      .Partition("gpu")
                      .Build();
  FirstTwoBusyForAnHour(v, "gpu");
  return v;
}

TEST(BackfillTest, StrictBackfillStartsOnlyJobsThatEndBeforeTheFirstReservedStart) {
  // Job 1 needs three whole nodes: reserved from +1h on three of the four. Job 2 (3 h) fits on
  // the fourth, beside the reservation: standard backfill starts it, strict does not (it would
  // still run when job 1 starts). Job 3 (30 min) ends before: both start it.
  std::vector<PendingJob> q = {Job(1, 100, Req(3, 8, 2 * kHour)), Job(2, 50, Req(1, 8, 3 * kHour)),
                               Job(3, 40, Req(1, 8, 30 * kMin))};
  SchedulerConfig standard;
  standard.backfill_depth = 1;
  SchedulePass loose = Schedule(HalfBusy(), q, kNow, standard);
  ASSERT_EQ(loose.reservations.size(), 1u);
  EXPECT_EQ(loose.reservations[0].start_ms, kNow + kHour);
  EXPECT_TRUE(Started(loose, 2));
  EXPECT_TRUE(Started(loose, 3));

  SchedulerConfig strict = standard;
  strict.strict_backfill = true;
  SchedulePass pass = Schedule(HalfBusy(), q, kNow, strict);
  ASSERT_EQ(pass.reservations.size(), 1u);
  EXPECT_EQ(pass.reservations[0].job, 1u);
  EXPECT_FALSE(Started(pass, 2));
  EXPECT_TRUE(Started(pass, 3));
  const PendingReason* r2 = ReasonFor(pass, 2);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->reason, JobReason::kPriority);
  EXPECT_NE(r2->detail.find("reserved for job 1"), std::string::npos) << r2->detail;
}

TEST(BackfillTest, StrictBackfillMeasuresAJobOnlyAgainstItsOwnPartitionsReservations) {
  // Partition a (nodes 0, 1) is busy and job 1 holds a reservation there from +1h; a 3 h job in
  // partition b (nodes 2, 3) passes nobody by running now.
  ClusterView v = testing::ClusterBuilder()
                      .Nodes(4, {}, "n", 1, testing::Under("spine1/leaf1"))
                      .Partition("a", {0, 1})
                      .Partition("b", {2, 3})
                      .Build();
  FirstTwoBusyForAnHour(v, "a");
  JobRequest wide = testing::Gang(2, 8, 1, "a");
  wide.time_limit_ms = 2 * kHour;
  JobRequest other = testing::Gang(1, 8, 1, "b");
  other.time_limit_ms = 3 * kHour;
  SchedulerConfig strict;
  strict.backfill_depth = 1;
  strict.strict_backfill = true;
  SchedulePass pass = Schedule(v, {Job(1, 100, wide), Job(2, 50, other)}, kNow, strict);
  ASSERT_EQ(pass.reservations.size(), 1u);
  EXPECT_TRUE(Started(pass, 2));
}

TEST(BackfillTest, FillingByRankKeepsJobsThatPreemptedAhead) {
  // Once job 1's reservation is made, the rest go by backfill rank, but job 2, which preempted
  // to make room, still goes before job 3 (ranked higher): the one free node is its.
  SchedulerConfig c;
  c.backfill_depth = 1;
  c.backfill_by_rank = true;
  PendingJob wide = Job(1, 100, Req(2, 8, 2 * kHour));
  wide.preempting = true;
  PendingJob preemptor = Job(2, 50, Req(1, 8, 30 * kMin));
  preemptor.preempting = true;
  preemptor.backfill_rank = 1;
  PendingJob shorter = Job(3, 40, Req(1, 8, 30 * kMin));
  shorter.backfill_rank = 100;
  SchedulePass pass = Schedule(Busy(), {wide, preemptor, shorter}, kNow, c);
  ASSERT_EQ(pass.reservations.size(), 1u);
  EXPECT_EQ(pass.reservations[0].job, 1u);
  EXPECT_TRUE(Started(pass, 2));
  EXPECT_FALSE(Started(pass, 3));
  // Without the preemptor, the rank decides between equals: job 3 goes before job 4.
  PendingJob low = Job(4, 50, Req(1, 8, 30 * kMin));
  low.backfill_rank = 1;
  PendingJob plain_wide = Job(1, 100, Req(2, 8, 2 * kHour));
  pass = Schedule(Busy(), {plain_wide, low, shorter}, kNow, c);
  EXPECT_TRUE(Started(pass, 3));
  EXPECT_FALSE(Started(pass, 4));
}

TEST(BackfillTest, APolicysOwnOrderReplacesTheWeightedSum) {
  // Job 2 was submitted first (it would go first on equal priorities), but the policy's order
  // puts job 1 first; one node is free, for one of them.
  ClusterView v = Busy();
  PendingJob a = Job(1, 0, Req(1, 8, kHour));
  PendingJob b = Job(2, 0, Req(1, 8, kHour));
  a.priority.by_policy = true;
  a.priority.policy_priority = 7;
  b.priority.by_policy = true;
  b.priority.policy_priority = 3;
  SchedulePass pass = Schedule(v, {b, a}, kNow, {});
  ASSERT_EQ(pass.starts.size(), 1u);
  EXPECT_EQ(pass.starts[0].job, 1u);
}

TEST(BackfillTest, AJobWithAReservationKeepsItAgainstNewHigherPriorityJobs) {
  ClusterView v = Busy();
  PendingJob old = Job(1, 10, Req(2, 8, 2 * kHour));
  old.had_reservation = true;
  std::vector<PendingJob> q = {Job(9, 1000, Req(2, 8, 2 * kHour)), old};
  SchedulePass pass = Schedule(v, q, kNow, {});
  ASSERT_EQ(pass.reservations.size(), 2u);
  EXPECT_EQ(pass.reservations[0].job, 1u) << "the reserved job must not be pushed back";
  EXPECT_EQ(pass.reservations[0].start_ms, kNow + kHour);
  EXPECT_EQ(pass.reservations[1].job, 9u);
  EXPECT_EQ(pass.reservations[1].start_ms, kNow + 3 * kHour);
}

TEST(BackfillTest, NoForecastWhenRunningJobsHaveNoTimeLimit) {
  ClusterView v = Busy();
  v.running[0].end_ms = kNever;
  SchedulePass pass = Schedule(v, {Job(1, 1, Req(2, 8, kHour))}, kNow, {});
  ASSERT_EQ(pass.pending.size(), 1u);
  EXPECT_EQ(pass.pending[0].reason, JobReason::kResources);
  EXPECT_EQ(pass.pending[0].expected_start_ms, kNever);
  EXPECT_NE(pass.pending[0].detail.find("no start time can be forecast"), std::string::npos);
}

TEST(BackfillTest, UnlimitedJobNeverBackfillsIntoAReservation) {
  ClusterView v = Busy();
  SchedulePass pass =
      Schedule(v, {Job(1, 100, Req(2, 8, kHour)), Job(2, 1, Req(1, 1, 0))}, kNow, {});
  EXPECT_FALSE(Started(pass, 2));
  EXPECT_EQ(ReasonFor(pass, 2)->reason, JobReason::kPriority);
}

TEST(PlaceWhenTest, ForecastsTheEarliestStart) {
  ClusterView v = Busy();
  auto now = Place(Req(1, 8, kHour), v, PlaceMode::kWhen, kNow);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->start_ms, kNow);  // node 1 is free
  auto later = Place(Req(2, 4, kHour), v, PlaceMode::kWhen, kNow);
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ(later->start_ms, kNow + kHour);
  EXPECT_EQ(later->nodes.size(), 2u);
  auto never = Place(Req(3, 1, kHour), v, PlaceMode::kWhen, kNow);
  ASSERT_FALSE(never.ok());
  EXPECT_NE(never.status().message().find("PartitionNodeLimit"), std::string::npos);
}

TEST(PassStatsTest, IdenticalRequestsShareOneSearch) {
  ClusterView v = Busy();
  std::vector<PendingJob> q;
  q.push_back(Job(1, 100, Req(2, 8, kHour)));
  for (JobId id = 10; id < 60; ++id) q.push_back(Job(id, 1, Req(2, 8, kHour)));
  SchedulerConfig c;
  c.backfill_depth = 1;
  SchedulePass pass = Schedule(v, q, kNow, c);
  EXPECT_EQ(pass.stats.classes, 1u);
  EXPECT_EQ(pass.stats.skipped_by_class, 50u);  // only the first of them searched the nodes
  EXPECT_LE(pass.stats.forecasts, 2u);
}

}  // namespace
}  // namespace muster::core
