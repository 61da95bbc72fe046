// The replay through the real controller: jobs wait for what runs, run for their recorded time,
// are killed at their requested time, and the same trace gives the same figures every time.
#include "muster/sim/replay.h"

#include <gtest/gtest.h>

#include <sstream>

#include "muster/sim/cluster.h"
#include "muster/sim/metrics.h"

namespace muster::sim {
namespace {

Config Cluster(uint32_t nodes, uint32_t cpus = 1, uint32_t gpus = 0, uint32_t leaf = 0) {
  ClusterShape s;
  s.nodes = nodes;
  s.cpus_per_node = cpus;
  s.gpus_per_node = gpus;
  s.leaf_size = leaf;
  auto c = ShapeToConfig(s);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

SimJob Job(int64_t id, int64_t submit_s, int64_t run_s, int64_t req_s, uint32_t procs) {
  SimJob j;
  j.trace_id = id;
  j.submit_s = submit_s;
  j.run_s = run_s;
  j.req_time_s = req_s;
  j.procs = procs;
  j.user = "u1";
  j.account = "g1";
  return j;
}

// The controller logs a line per job otherwise.
const bool kQuiet = (QuietControllerLogs(), true);

TEST(ReplayTest, JobsWaitForWhatRunsAndAreKilledAtTheirRequestedTime) {
  const std::vector<SimJob> jobs = {
      Job(1, 0, 100, 200, 4),  // the whole cluster for 100 s
      Job(2, 1, 10, 20, 1),    // waits for job 1
      Job(3, 2, 80, 50, 2),    // asked for 50 s, would run 80: killed at 50
  };
  auto r = Replay(Cluster(4), jobs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->jobs.size(), 3u);
  const JobOutcome& a = r->jobs[0];
  const JobOutcome& b = r->jobs[1];
  const JobOutcome& c = r->jobs[2];
  for (const JobOutcome& o : r->jobs) {
    EXPECT_TRUE(o.refused.empty()) << o.refused;
    EXPECT_GE(o.start_ms, o.submit_ms);
  }
  EXPECT_LT(a.start_ms, 1000) << "an empty cluster starts the first job at once";
  EXPECT_EQ(a.end_ms - a.start_ms, 100'000);
  EXPECT_FALSE(a.killed_at_limit);
  EXPECT_GE(b.start_ms, a.end_ms) << "job 2 needs a CPU job 1 holds";
  EXPECT_GE(c.start_ms, a.end_ms);
  EXPECT_EQ(b.end_ms - b.start_ms, 10'000);
  EXPECT_TRUE(c.killed_at_limit);
  EXPECT_EQ(c.end_ms - c.start_ms, 50'000) << "killed at its requested time";
  EXPECT_EQ(a.procs, 4u);
  EXPECT_EQ(c.procs, 2u);
  EXPECT_GT(r->passes, 0u);

  const Metrics m = ComputeMetrics(*r);
  EXPECT_EQ(m.started, 3u);
  EXPECT_EQ(m.killed_at_limit, 1u);
  EXPECT_FALSE(m.gpu_cluster);
  // Job 1 used the whole cluster for 100 s of a makespan of about 150 s.
  EXPECT_NEAR(m.makespan_s, 150, 1);
  EXPECT_NEAR(m.utilization, (400.0 + 10 + 100) / (4 * m.makespan_s), 0.01);
}

TEST(ReplayTest, BackfillStartsAShortJobAroundABlockedWideOne) {
  // 4 nodes: job 1 holds 2 for 100 s; job 2 wants all 4 and waits; job 3 (1 node, 50 s) fits
  // beside job 1 and ends before job 2 could start: backfill starts it at once.
  const std::vector<SimJob> jobs = {Job(1, 0, 100, 100, 2), Job(2, 1, 10, 10, 4),
                                    Job(3, 2, 50, 50, 1)};
  auto r = Replay(Cluster(4), jobs);
  ASSERT_TRUE(r.ok());
  EXPECT_LT(r->jobs[2].start_ms, 3'000) << "backfilled";
  EXPECT_GE(r->jobs[1].start_ms, r->jobs[0].end_ms);
  EXPECT_LT(r->jobs[1].start_ms, r->jobs[0].end_ms + 1'000) << "and not delayed by it";
}

TEST(ReplayTest, WhatCanNeverRunIsReportedWithTheEnginesReasonAndTheReplayStillEnds) {
  // More nodes than the partition has waits (as in Slurm: PartitionNodeLimit); GPUs on a
  // cluster without any are refused at submission.
  SimJob gpus = Job(3, 0, 10, 10, 1);
  gpus.gpus = 1;
  auto r = Replay(Cluster(2), {Job(1, 0, 10, 10, 3), Job(2, 0, 10, 10, 1), gpus});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->jobs[0].refused.empty());
  EXPECT_EQ(r->jobs[0].start_ms, -1);
  EXPECT_NE(r->jobs[0].waiting.find("PartitionNodeLimit"), std::string::npos) << r->jobs[0].waiting;
  EXPECT_TRUE(r->jobs[1].refused.empty());
  EXPECT_FALSE(r->jobs[2].refused.empty());
  const Metrics m = ComputeMetrics(*r);
  EXPECT_EQ(m.refused, 1u);
  EXPECT_EQ(m.never_started, 1u);
  EXPECT_EQ(m.started, 1u);

  // The same as a table of outcomes: one line per job, its reason quoted where it has a comma.
  std::ostringstream csv;
  WriteOutcomesCsv(*r, csv);
  std::vector<std::string> lines;
  std::istringstream in(csv.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("trace_id,user,account,procs,gpus,nodes,submit_s,start_s,end_s,", 0),
            0u);
  EXPECT_EQ(lines[1].rfind("1,u1,g1,3,0,0,0,-1,-1,-1,0,0,0,0,PartitionNodeLimit", 0), 0u)
      << lines[1];
  // Started in the pass 5 ms after its submission, ran its 10 s, on no leaf (no topology).
  EXPECT_EQ(lines[2], "2,u1,g1,1,0,1,0,0.005000,10.005000,0.005000,0,0,0,0,");
  const std::string& refused = lines[3];
  EXPECT_EQ(refused.rfind("3,u1,g1,1,1,0,0,-1,-1,-1,0,0,0,0,", 0), 0u) << refused;
  if (r->jobs[2].refused.find(',') != std::string::npos) {
    EXPECT_EQ(refused.back(), '"') << "a reason with a comma is quoted: " << refused;
  }
}

TEST(ReplayTest, GangsOnAGpuClusterLandInsideOneLeafWhenOneHasRoom) {
  // 8 nodes of 8 GPUs in leaves of 4; two 2-node gangs and one 4-node gang.
  std::vector<SimJob> jobs;
  for (int i = 0; i < 3; ++i) {
    SimJob j = Job(i + 1, i, 100, 200, 16);
    j.gpus = i == 2 ? 32 : 16;
    j.nodes = i == 2 ? 4 : 2;
    j.procs = j.nodes;
    jobs.push_back(j);
  }
  auto r = Replay(Cluster(8, 4, 8, 4), jobs);
  ASSERT_TRUE(r.ok());
  const Metrics m = ComputeMetrics(*r);
  EXPECT_TRUE(m.gpu_cluster);
  EXPECT_EQ(m.started, 3u);
  EXPECT_EQ(m.gangs_with_leaf_room, 3u);
  EXPECT_DOUBLE_EQ(m.in_one_leaf, 1.0);
  EXPECT_EQ(r->jobs[2].leaves, 1u);
  EXPECT_EQ(r->jobs[2].gpus, 32u);
}

TEST(ReplayTest, JobsOutOfSubmissionOrderAreRefused) {
  auto r = Replay(Cluster(2), {Job(1, 50, 10, 10, 1), Job(2, 10, 10, 10, 1)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("submission order"), std::string::npos);
}

TEST(ReplayTest, AGpuJobWithoutANodeCountSpreadsOverAsManyNodesAsItsGpusNeed) {
  SimJob j = Job(1, 0, 100, 200, 2);
  j.gpus = 16;  // two 8-GPU nodes
  auto r = Replay(Cluster(4, 8, 8), {j});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->jobs[0].refused.empty()) << r->jobs[0].refused;
  EXPECT_GE(r->jobs[0].start_ms, 0) << r->jobs[0].waiting;
  EXPECT_EQ(r->jobs[0].nodes, 2u);
  EXPECT_EQ(r->jobs[0].gpus, 16u);
}

std::vector<SimJob> Busy(int n) {
  // A deterministic, busy mix: sizes 1..8 on 8 nodes, runs shorter than their requests.
  std::vector<SimJob> jobs;
  uint64_t x = 12345;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint32_t procs = 1 + static_cast<uint32_t>((x >> 33) % 8);
    const int64_t run = 10 + static_cast<int64_t>((x >> 17) % 500);
    SimJob j = Job(i + 1, i * 20, run, run * 2, procs);
    j.user = "u" + std::to_string((x >> 40) % 5);
    j.account = "g" + std::to_string((x >> 44) % 3);
    jobs.push_back(j);
  }
  return jobs;
}

TEST(ReplayTest, TheSameTraceGivesByteIdenticalMetrics) {
  const auto jobs = Busy(300);
  std::string first;
  for (int run = 0; run < 2; ++run) {
    auto r = Replay(Cluster(8), jobs);
    ASSERT_TRUE(r.ok());
    std::ostringstream out;
    WriteJson(ComputeMetrics(*r), out);
    if (run == 0) {
      first = out.str();
      EXPECT_NE(first.find("\"started\": 300"), std::string::npos) << first;
    } else {
      EXPECT_EQ(out.str(), first);
    }
  }
}

TEST(MetricsTest, BoundedSlowdownUsesTheTenSecondFloorAndPercentilesAreNearestRank) {
  ReplayResult r;
  r.total_cpus = 1;
  JobOutcome a;  // 1 s run after 9 s of waiting: (9 + 1) / max(1, 10) = 1
  a.submit_ms = 0;
  a.start_ms = 9'000;
  a.end_ms = 10'000;
  a.procs = 1;
  JobOutcome b;  // 100 s run after 100 s: (100 + 100) / 100 = 2
  b.submit_ms = 0;
  b.start_ms = 100'000;
  b.end_ms = 200'000;
  b.procs = 1;
  r.jobs = {a, b};
  const Metrics m = ComputeMetrics(r);
  EXPECT_DOUBLE_EQ(m.bounded_slowdown, 1.5);
  EXPECT_DOUBLE_EQ(m.wait.mean_s, 54.5);
  EXPECT_DOUBLE_EQ(m.wait.median_s, 9);
  EXPECT_DOUBLE_EQ(m.wait.max_s, 100);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 99), 4);
  EXPECT_DOUBLE_EQ(m.makespan_s, 200);
  EXPECT_DOUBLE_EQ(m.utilization, 101.0 / 200.0);
}

TEST(ClusterShapeTest, LeavesAndDomainsBecomeTopologyPaths) {
  ClusterShape s;
  s.nodes = 6;
  s.gpus_per_node = 8;
  s.leaf_size = 4;
  s.nvlink_domain = 2;
  auto c = ShapeToConfig(s);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->nodes.size(), 6u);
  EXPECT_EQ(c->nodes[0].topology, "spine1/leaf1");
  EXPECT_EQ(c->nodes[3].topology, "spine1/leaf1");
  EXPECT_EQ(c->nodes[4].topology, "spine1/leaf2");
  EXPECT_EQ(c->nodes[1].nvlink_domain, "nvl1");
  EXPECT_EQ(c->nodes[2].nvlink_domain, "nvl2");
  EXPECT_EQ(c->nodes[5].gpus, 8u);
  s.nodes = 0;
  EXPECT_FALSE(ShapeToConfig(s).ok());
  s.nodes = kMaxShapeNodes + 1;
  EXPECT_FALSE(ShapeToConfig(s).ok()) << "refused before a million-entry TOML is written";
}

TEST(ReplayTest, TimesPastTheBoundsAreHeldThereAndNeverOverflowTheMilliseconds) {
  // Readers never give these; a caller's own jobs might. 18446744073709552 s times 1000 is
  // 2^64 + 384: wrapped, the job arrived (ran, was killed) after 384 ms.
  constexpr int64_t kWraps = 18'446'744'073'709'552;
  const std::vector<SimJob> jobs = {
      Job(1, 0, kWraps, 0, 1),           // no limit: runs for 100 years
      Job(2, kWraps, 10, kWraps, 1),     // arrives after 100 years, its limit 100 years
      Job(3, kWraps, kWraps, kWraps, 1)  // runs into its limit, 100 years
  };
  ReplayOptions options;
  options.tick_ms = 4'000'000'000;  // 46 days: a century of ten-minute ticks takes too long
  auto r = Replay(Cluster(3), jobs, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  constexpr int64_t kCentury = kMaxTraceSeconds * 1000;
  const JobOutcome& a = r->jobs[0];
  const JobOutcome& b = r->jobs[1];
  const JobOutcome& c = r->jobs[2];
  for (const JobOutcome& o : r->jobs) EXPECT_TRUE(o.refused.empty()) << o.refused;
  EXPECT_EQ(a.end_ms - a.start_ms, kCentury);
  EXPECT_FALSE(a.killed_at_limit);
  EXPECT_EQ(b.submit_ms, kCentury);
  EXPECT_EQ(b.req_time_ms, kCentury);
  EXPECT_GE(b.start_ms, kCentury);
  EXPECT_EQ(b.end_ms - b.start_ms, 10'000);
  EXPECT_GE(c.start_ms, kCentury);
  EXPECT_EQ(c.end_ms - c.start_ms, kCentury) << "100 years, not 384 ms";
  EXPECT_FALSE(c.killed_at_limit) << "its run was held at the same bound";
}

}  // namespace
}  // namespace muster::sim
