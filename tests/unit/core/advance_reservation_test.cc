// Advance reservations in the pass: what they keep from other jobs (and what a maintenance window
// keeps from a job whose time limit would run into it), what their own jobs may use, and a
// randomized check that no job outside a reservation ever overlaps it, pass after pass.
#include "muster/core/advance_reservation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "cluster_builder.h"
#include "muster/core/explain.h"
#include "muster/core/scheduler.h"

namespace muster::core {
namespace {

constexpr TimeMs kMin = 60'000;
constexpr TimeMs kHour = 60 * kMin;
constexpr TimeMs kNow = 1'000 * kHour;

ClusterView TwoNodes() {
  return testing::ClusterBuilder().Nodes(2, {}, "n").Partition("gpu").Schedulable().Build();
}

AdvanceReservation Window(std::string name, TimeMs start, TimeMs end, std::vector<NodeIndex> nodes,
                          bool maint = false) {
  AdvanceReservation a;
  a.name = std::move(name);
  a.start_ms = start;
  a.end_ms = end;
  a.nodes = std::move(nodes);
  a.maint = maint;
  return a;
}

PendingJob Job(JobId id, uint32_t nodes, uint32_t gpus, TimeMs limit, std::string resv = "") {
  JobRequest r = testing::Gang(nodes, gpus);
  r.time_limit_ms = limit;
  r.reservation = std::move(resv);
  return testing::Job(id, static_cast<int64_t>(1000 - id), kNow - static_cast<TimeMs>(id),
                      std::move(r));
}

const JobStart* StartOf(const SchedulePass& pass, JobId id) {
  for (const auto& s : pass.starts) {
    if (s.job == id) return &s;
  }
  return nullptr;
}

const PendingReason* ReasonFor(const SchedulePass& pass, JobId id) {
  for (const auto& p : pass.pending) {
    if (p.job == id) return &p;
  }
  return nullptr;
}

TEST(AdvanceReservationTest, AJobWhoseLimitWouldCrossAMaintenanceWindowWaitsSayingSo) {
  ClusterView v = TwoNodes();
  v.advance.push_back(Window("m1", kNow + kHour, kNow + 3 * kHour, {0, 1}, true));
  SchedulePass pass =
      Schedule(v, {Job(1, 1, 8, 2 * kHour), Job(2, 1, 8, 30 * kMin), Job(3, 1, 8, 0)}, kNow, {});
  ASSERT_NE(StartOf(pass, 2), nullptr) << "it ends before the window";
  const PendingReason* r1 = ReasonFor(pass, 1);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->reason, JobReason::kReqNodeNotAvail);
  EXPECT_NE(r1->detail.find("maintenance reservation m1 (from in 1:00:00 to in 3:00:00)"),
            std::string::npos)
      << r1->detail;
  EXPECT_EQ(r1->expected_start_ms, kNow + 3 * kHour) << "right after the window";
  const PendingReason* r3 = ReasonFor(pass, 3);
  ASSERT_NE(r3, nullptr) << "a job without a time limit crosses every window";
  EXPECT_EQ(r3->reason, JobReason::kReqNodeNotAvail);
}

TEST(AdvanceReservationTest, ExplainNamesTheReservationThatKeepsEachNode) {
  ClusterView v = TwoNodes();
  v.advance.push_back(Window("m1", kNow + kHour, kNow + 3 * kHour, {0}, true));
  auto e = ExplainPlacement(Job(1, 2, 8, 2 * kHour).request, v, kNow);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].fit_now, 1u);
  bool seen = false;
  for (const NodeGroup& g : e[0].groups) {
    if (g.verdict != NodeVerdict::kReserved) continue;
    seen = true;
    EXPECT_EQ(g.nodes, std::vector<std::string>{"n1"});
    EXPECT_EQ(g.cause,
              "reserved: maintenance reservation m1 from in 1:00:00 to in 3:00:00, which the "
              "job's time limit would run into");
  }
  EXPECT_TRUE(seen);
  // Short enough to end first: nothing keeps it.
  EXPECT_EQ(ExplainPlacement(Job(1, 2, 8, 30 * kMin).request, v, kNow)[0].fit_now, 2u);
  // A job of the reservation: the other node is outside it.
  auto own = ExplainPlacement(Job(1, 1, 8, kHour, "m1").request, v, kNow);
  bool outside = false;
  for (const NodeGroup& g : own[0].groups) {
    outside |= g.verdict == NodeVerdict::kExcluded && g.cause == "outside reservation m1";
  }
  EXPECT_TRUE(outside);
}

TEST(AdvanceReservationTest, ItsJobsRunOnlyOnItsNodesWhileOthersKeepOff) {
  ClusterView v = TwoNodes();
  v.advance.push_back(Window("team", kNow - kHour, kNow + 2 * kHour, {0}));
  SchedulePass pass = Schedule(v,
                               {Job(1, 1, 8, kHour), Job(2, 1, 8, kHour),
                                Job(3, 1, 4, kHour, "team"), Job(4, 2, 1, kHour, "team")},
                               kNow, {});
  const JobStart* s1 = StartOf(pass, 1);
  ASSERT_NE(s1, nullptr);
  EXPECT_EQ(s1->placement.nodes[0].node, 1u) << "node 0 is reserved";
  const PendingReason* r2 = ReasonFor(pass, 2);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->reason, JobReason::kReqNodeNotAvail) << r2->detail;
  EXPECT_NE(r2->detail.find("reservation team (until in 2:00:00)"), std::string::npos)
      << r2->detail;
  const JobStart* s3 = StartOf(pass, 3);
  ASSERT_NE(s3, nullptr);
  EXPECT_EQ(s3->placement.nodes[0].node, 0u);
  const PendingReason* r4 = ReasonFor(pass, 4);
  ASSERT_NE(r4, nullptr) << "the reservation has one node";
  EXPECT_EQ(r4->reason, JobReason::kBadConstraints) << r4->detail;
}

TEST(AdvanceReservationTest, ItsJobsWaitForItToBeginAndEndWithIt) {
  ClusterView v = TwoNodes();
  v.advance.push_back(Window("later", kNow + 2 * kHour, kNow + 4 * kHour, {0}));
  SchedulePass pass = Schedule(v, {Job(1, 1, 8, kHour, "later")}, kNow, {});
  const PendingReason* r1 = ReasonFor(pass, 1);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->reason, JobReason::kReservation);
  EXPECT_EQ(r1->expected_start_ms, kNow + 2 * kHour);
  EXPECT_EQ(r1->detail, "waiting for reservation later, which begins in 2:00:00");

  // Active now and ending in an hour: its 5-hour job plans to end with it, so a job waiting for
  // node 0 behind it is forecast at the reservation's end, not at the job's time limit.
  v.advance[0] = Window("now", kNow - kHour, kNow + kHour, {0});
  pass = Schedule(v, {Job(1, 1, 8, 5 * kHour, "now"), Job(2, 2, 8, kHour)}, kNow, {});
  ASSERT_NE(StartOf(pass, 1), nullptr);
  const PendingReason* r2 = ReasonFor(pass, 2);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->expected_start_ms, kNow + kHour);
}

TEST(AdvanceReservationTest, AGpuCountKeepsOnlyThoseGpus) {
  ClusterView v = TwoNodes();
  AdvanceReservation w = Window("gpus", kNow, kNow + 4 * kHour, {0});
  w.gpus = {4};
  v.advance.push_back(w);
  v.nodes[1].schedulable = false;
  SchedulePass pass = Schedule(
      v, {Job(1, 1, 8, kHour), Job(2, 1, 4, kHour), Job(3, 1, 4, kHour, "gpus")}, kNow, {});
  EXPECT_EQ(StartOf(pass, 1), nullptr) << "8 GPUs would take reserved ones";
  EXPECT_NE(StartOf(pass, 2), nullptr) << "the 4 unreserved GPUs";
  EXPECT_NE(StartOf(pass, 3), nullptr) << "the 4 reserved GPUs, for its own job";
}

TEST(AdvanceReservationTest, FlexJobsMayStartEarlyAndElsewhere) {
  ClusterView v = TwoNodes();
  AdvanceReservation w = Window("flex", kNow + 2 * kHour, kNow + 4 * kHour, {0});
  w.flex = true;
  v.advance.push_back(w);
  SchedulePass pass = Schedule(v, {Job(1, 2, 8, kHour, "flex")}, kNow, {});
  EXPECT_NE(StartOf(pass, 1), nullptr);
}

TEST(AdvanceReservationTest, AFlexJobsForecastTellsItsWindowFromAnotherJobsReservation) {
  // Both nodes are full until 2h. Window "flex" holds n0 from 2h to 4h; job 1 (whole node, 2h)
  // is planned on n1 for the same hours. The two nodes now look alike (same release, a hold of
  // the same size and hours), but to a job of the window only n1's hold counts: its 2-node
  // gang can start at 4h, not at 2h.
  ClusterView v = TwoNodes();
  for (NodeIndex n = 0; n < 2; ++n) {
    NodePlacement np{n, {}, 0, {}, 1, {}};
    for (uint32_t c = 0; c < 16; ++c) np.cpus.push_back(c);
    for (uint32_t g = 0; g < 8; ++g) np.gpus.push_back(g);
    v.nodes[n].Take(np);
    v.running.push_back({70 + n, n, kNow + 2 * kHour, 16, 8, 0});
  }
  AdvanceReservation w = Window("flex", kNow + 2 * kHour, kNow + 4 * kHour, {0});
  w.flex = true;
  v.advance.push_back(w);
  PendingJob whole = Job(1, 1, 8, 2 * kHour);
  whole.request.exclusive = true;
  SchedulePass pass = Schedule(v, {whole, Job(2, 2, 8, kHour, "flex")}, kNow, {});
  ASSERT_EQ(pass.reservations.size(), 2u);
  EXPECT_EQ(pass.reservations[0].start_ms, kNow + 2 * kHour);
  EXPECT_EQ(pass.reservations[0].nodes, std::vector<NodeIndex>{1});
  EXPECT_EQ(pass.reservations[1].start_ms, kNow + 4 * kHour);
}

TEST(AdvanceReservationTest, AJobOfAVanishedReservationSaysSo) {
  ClusterView v = TwoNodes();
  v.advance.push_back(Window("old", kNow - 3 * kHour, kNow - kHour, {0}));
  SchedulePass pass = Schedule(v, {Job(1, 1, 8, kHour, "old")}, kNow, {});
  const PendingReason* r1 = ReasonFor(pass, 1);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->reason, JobReason::kReservationDeleted);
  auto ever = Place(Job(1, 1, 8, kHour, "gone").request, v, PlaceMode::kEver);
  EXPECT_EQ(ever.status().code(), StatusCode::kNotFound);
}

TEST(AdvanceReservationTest, PlanningRefusesBusyNodesAndChoosesCounts) {
  ClusterView v =
      testing::ClusterBuilder().Nodes(3, {}, "n").Partition("gpu").Schedulable().Build();
  v.running.push_back({77, 0, kNow + 2 * kHour, 4, 4, 0});
  ReservationAsk ask;
  ask.name = "r";
  ask.start_ms = kNow + kHour;
  ask.end_ms = kNow + 3 * kHour;
  ask.nodes = {0};
  auto busy = PlanReservation(v, ask, kNow);
  ASSERT_EQ(busy.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(busy.status().message().find("node n1 is busy with job 77"), std::string::npos)
      << busy.status().message();
  ask.ignore_jobs = true;
  EXPECT_TRUE(PlanReservation(v, ask, kNow).ok());
  ask.ignore_jobs = false;
  ask.start_ms = kNow + 2 * kHour;  // the job ends by then
  EXPECT_TRUE(PlanReservation(v, ask, kNow).ok());

  // GPUs: the nodes with the most room first; node 0 has 4 left during the window, node 2 is
  // another reservation's.
  ask.start_ms = kNow + kHour;
  ask.nodes.clear();
  ask.gpus = 13;
  ask.candidates = {0, 1, 2};
  v.advance.push_back(Window("other", kNow, kNow + 10 * kHour, {2}));
  auto plan = PlanReservation(v, ask, kNow);
  ASSERT_FALSE(plan.ok()) << "only 4 + 8 are free";
  EXPECT_NE(plan.status().message().find("only 12 of the 13 GPUs"), std::string::npos)
      << plan.status().message();
  ask.gpus = 10;
  plan = PlanReservation(v, ask, kNow);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->nodes, (std::vector<NodeIndex>{0, 1}));
  EXPECT_EQ(plan->gpus, (std::vector<uint32_t>{2, 8}));
  ask.gpus = 0;
  ask.node_count = 2;
  EXPECT_EQ(PlanReservation(v, ask, kNow).status().code(), StatusCode::kFailedPrecondition)
      << "only node 1 is clear";
  ask.node_count = 1;
  plan = PlanReservation(v, ask, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->nodes, (std::vector<NodeIndex>{1}));
}

// Pass after pass on a changing clock, with windows (some maintenance, some with GPU counts)
// and jobs in and outside them: a job outside a window never holds its resources during it,
// and a job inside a non-flex window runs only on its nodes and starts inside it.
TEST(AdvanceReservationTest, RandomWorldsNeverOverlapAReservation) {
  std::mt19937 rng(20261124);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int world = 0; world < 150; ++world) {
    const uint32_t n = static_cast<uint32_t>(pick(2, 6));
    ClusterView v =
        testing::ClusterBuilder().Nodes(n, {}, "n").Partition("gpu").Schedulable().Build();
    TimeMs now = kNow;
    const int windows = pick(1, 3);
    for (int k = 0; k < windows; ++k) {
      std::vector<NodeIndex> nodes;
      for (NodeIndex i = 0; i < n; ++i) {
        if (pick(0, 2) == 0) nodes.push_back(i);
      }
      if (nodes.empty()) nodes.push_back(static_cast<NodeIndex>(pick(0, static_cast<int>(n) - 1)));
      const TimeMs start = now + pick(-2, 8) * 30 * kMin;
      AdvanceReservation w = Window("w" + std::to_string(k), start, start + pick(1, 6) * 30 * kMin,
                                    nodes, pick(0, 1) == 1);
      if (pick(0, 2) == 0) w.gpus.assign(nodes.size(), static_cast<uint32_t>(pick(1, 8)));
      v.advance.push_back(w);
    }
    std::vector<PendingJob> queue;
    for (JobId id = 1; id <= 12; ++id) {
      std::string resv = pick(0, 3) == 0 ? "w" + std::to_string(pick(0, windows - 1)) : "";
      queue.push_back(Job(id, static_cast<uint32_t>(pick(1, 2)), static_cast<uint32_t>(pick(0, 8)),
                          pick(1, 8) * 30 * kMin, resv));
    }
    struct Ran {
      JobId id;
      std::string resv;
      TimeMs start, end;
      Placement placement;
    };
    std::vector<Ran> ran;
    for (int step = 0; step < 12 && !queue.empty(); ++step) {
      // Jobs past their end leave.
      for (auto it = v.running.begin(); it != v.running.end();) {
        if (it->end_ms <= now) {
          for (const Ran& r : ran) {
            if (r.id == it->job) {
              for (const NodePlacement& np : r.placement.nodes) {
                if (np.node == it->node) v.nodes[np.node].Give(np);
              }
            }
          }
          it = v.running.erase(it);
        } else {
          ++it;
        }
      }
      SchedulePass pass = Schedule(v, queue, now, {});
      for (const JobStart& s : pass.starts) {
        auto q = std::find_if(queue.begin(), queue.end(),
                              [&](const PendingJob& j) { return j.id == s.job; });
        ASSERT_NE(q, queue.end());
        TimeMs end = now + q->request.time_limit_ms;
        const std::string resv = q->request.reservation;
        for (const AdvanceReservation& w : v.advance) {
          if (w.name == resv && w.start_ms <= now && now < w.end_ms) end = std::min(end, w.end_ms);
        }
        ran.push_back({s.job, resv, now, end, s.placement});
        Allocate(s.placement, v);
        for (const NodePlacement& np : s.placement.nodes) {
          v.running.push_back({s.job, np.node, end, static_cast<uint32_t>(np.cpus.size()),
                               static_cast<uint32_t>(np.gpus.size()), np.mem_mb});
        }
        queue.erase(q);
      }
      now += pick(1, 4) * 15 * kMin;
    }
    // Check every window against every job that ran.
    for (const AdvanceReservation& w : v.advance) {
      for (size_t k = 0; k < w.nodes.size(); ++k) {
        const NodeIndex node = w.nodes[k];
        const uint32_t kept = w.gpus.empty() ? v.nodes[node].gpus : w.gpus[k];
        // Sample the window at each start inside it and at its start.
        std::vector<TimeMs> points = {w.start_ms};
        for (const Ran& r : ran) {
          if (r.start > w.start_ms && r.start < w.end_ms) points.push_back(r.start);
        }
        for (TimeMs t : points) {
          uint32_t others_gpus = 0;
          bool others_here = false;
          for (const Ran& r : ran) {
            if (r.resv == w.name || !(r.start <= t && t < r.end)) continue;
            for (const NodePlacement& np : r.placement.nodes) {
              if (np.node != node) continue;
              others_here = true;
              others_gpus += static_cast<uint32_t>(np.gpus.size());
            }
          }
          if (w.gpus.empty()) {
            EXPECT_FALSE(others_here) << "world " << world << ": a job outside " << w.name
                                      << " runs on its node " << node;
          } else {
            EXPECT_LE(others_gpus + kept, v.nodes[node].gpus)
                << "world " << world << ": jobs outside " << w.name << " hold its GPUs";
          }
        }
      }
    }
    for (const Ran& r : ran) {
      if (r.resv.empty()) continue;
      bool inside = false;
      for (const AdvanceReservation& w : v.advance) {
        if (w.name != r.resv || !(w.start_ms <= r.start && r.start < w.end_ms)) continue;
        inside = true;
        for (const NodePlacement& np : r.placement.nodes) {
          EXPECT_TRUE(std::binary_search(w.nodes.begin(), w.nodes.end(), np.node))
              << "world " << world << ": job " << r.id << " of " << w.name << " outside it";
        }
        EXPECT_LE(r.end, w.end_ms);
      }
      EXPECT_TRUE(inside) << "world " << world << ": job " << r.id << " started outside " << r.resv;
    }
  }
}

}  // namespace
}  // namespace muster::core
