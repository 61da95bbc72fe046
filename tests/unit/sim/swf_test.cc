// The Standard Workload Format reader: header, jobs, and what it skips or fills in.
#include "muster/sim/swf.h"

#include <gtest/gtest.h>

#include <sstream>

namespace muster::sim {
namespace {

SwfTrace Read(const std::string& text) {
  std::istringstream in(text);
  return ReadSwf(in);
}

TEST(SwfTest, ReadsTheHeaderAndEveryField) {
  const SwfTrace t = Read(
      "; Version: 2.2\n"
      "; UnixStartTime: 893466664\n"
      ";  MaxNodes: 128\n"
      "; MaxProcs: 128\n"
      ";\n"
      "   11   566129      5  28826    1  27758    -1    1  28800    -1  5 153  75 18180  3 -1 -1 "
      "-1\n"
      "\n"
      "   12   566290    532  26171    1  24666    -1    1  28800    -1  1 153  75 18184  3 -1 -1 "
      "-1\n");
  EXPECT_EQ(t.max_procs, 128);
  EXPECT_EQ(t.max_nodes, 128);
  EXPECT_EQ(t.unix_start_time, 893466664);
  ASSERT_EQ(t.jobs.size(), 2u);
  const SwfJob& j = t.jobs[0];
  EXPECT_EQ(j.id, 11);
  EXPECT_EQ(j.submit_s, 566129);
  EXPECT_EQ(j.wait_s, 5);
  EXPECT_EQ(j.run_s, 28826);
  EXPECT_EQ(j.procs, 1);
  EXPECT_EQ(j.avg_cpu_s, 27758);
  EXPECT_EQ(j.used_mem_kb, -1);
  EXPECT_EQ(j.req_procs, 1);
  EXPECT_EQ(j.req_time_s, 28800);
  EXPECT_EQ(j.status, 5);
  EXPECT_EQ(j.user, 153);
  EXPECT_EQ(j.group, 75);
  EXPECT_EQ(j.app, 18180);
  EXPECT_EQ(j.queue, 3);
  EXPECT_EQ(j.think_time_s, -1);
  EXPECT_EQ(t.jobs[1].id, 12);
  EXPECT_EQ(t.skipped_count, 0u);
  EXPECT_EQ(t.time_filled, 0u);
}

TEST(SwfTest, ARequestedTimeOfMinusOneTakesTheRunTimeAndIsCounted) {
  const SwfTrace t = Read(
      "1 0 0 100 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "2 5 0 -1 4 -1 -1 4 -1 -1 0 1 1 -1 -1 -1 -1 -1\n");
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.jobs[0].req_time_s, 100);
  EXPECT_EQ(t.jobs[1].req_time_s, -1) << "no run time either: nothing to fill in";
  EXPECT_EQ(t.time_filled, 1u);
  EXPECT_FALSE(t.max_procs.has_value());
}

TEST(SwfTest, MalformedLinesAreSkippedWithTheirNumbersAndNeverStopTheRead) {
  const SwfTrace t = Read(
      "; MaxProcs: lots\n"
      "1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "2 0 0 10 1\n"
      "3 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1 99\n"
      "4 0 0 ten 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "5 -7 0 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "6 9 0 10.00 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "7 9 0 10.5 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "8 9 0 10 1 7.38 552.21 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "9 9 0 10 1 7.x -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n");
  EXPECT_FALSE(t.max_procs.has_value()) << "a header value that is no number is left unset";
  ASSERT_EQ(t.jobs.size(), 3u);
  EXPECT_EQ(t.jobs[0].id, 1);
  EXPECT_EQ(t.jobs[1].id, 6) << "12.00-style whole numbers are integers";
  EXPECT_EQ(t.jobs[1].run_s, 10);
  EXPECT_EQ(t.jobs[2].avg_cpu_s, 7) << "measured fields keep their whole part";
  EXPECT_EQ(t.jobs[2].used_mem_kb, 552);
  EXPECT_EQ(t.skipped_count, 6u);
  ASSERT_EQ(t.skipped.size(), 6u);
  EXPECT_EQ(t.skipped[0].line, 3u);
  EXPECT_EQ(t.skipped[0].why, "18 fields expected, 5 found");
  EXPECT_EQ(t.skipped[1].line, 4u);
  EXPECT_EQ(t.skipped[1].why, "more than 18 fields");
  EXPECT_EQ(t.skipped[2].line, 5u);
  EXPECT_EQ(t.skipped[2].why, "field 4 is not an integer: 'ten'");
  EXPECT_EQ(t.skipped[3].line, 6u);
  EXPECT_EQ(t.skipped[3].why, "a negative submit time");
  EXPECT_EQ(t.skipped[4].line, 8u);
  EXPECT_EQ(t.skipped[5].line, 10u);
  EXPECT_EQ(t.skipped[5].why, "field 6 is not an integer: '7.x'");
}

TEST(SwfTest, OnlyTheFirstHundredSkippedLinesAreListedButAllAreCounted) {
  std::string text;
  for (int i = 0; i < 250; ++i) text += "garbage\n";
  const SwfTrace t = Read(text);
  EXPECT_TRUE(t.jobs.empty());
  EXPECT_EQ(t.skipped_count, 250u);
  EXPECT_EQ(t.skipped.size(), kMaxSkippedKept);
  EXPECT_EQ(t.skipped.back().line, kMaxSkippedKept);
}

TEST(SwfTest, ValuesPastTheBoundsAreSkippedByLineAndAHugeMachineIsNotKept) {
  // INT64_MAX seconds times 1000 overflows the replay's milliseconds; MaxProcs becomes the
  // number of nodes muster-sim builds when no cluster is given (5,000,000 of them with
  // --leaf-size 1 took 7 GB before the config refused them).
  const SwfTrace t = Read(
      "; MaxProcs: 9223372036854775807\n"
      "; MaxNodes: 1000001\n"
      "1 9223372036854775807 0 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "2 0 0 3155760001 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "3 0 0 10 10000001 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "4 0 0 10 1 -1 -1 4294967296 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "5 0 0 10 1 -1 -1 1 9223372036854775807 -1 1 1 1 -1 -1 -1 -1 -1\n"
      "6 3155760000 9223372036854775807 3155760000 10000000 -1 -1 1 3155760000 -1 1 1 1 -1 -1 "
      "-1 -1 -1\n");
  EXPECT_FALSE(t.max_procs.has_value());
  EXPECT_FALSE(t.max_nodes.has_value());
  ASSERT_EQ(t.jobs.size(), 1u) << "the bounds themselves are kept";
  EXPECT_EQ(t.jobs[0].id, 6);
  EXPECT_EQ(t.skipped_count, 7u);
  ASSERT_EQ(t.skipped.size(), 7u);
  EXPECT_EQ(t.skipped[0].line, 1u);
  EXPECT_EQ(t.skipped[0].why, "MaxProcs 9223372036854775807 is more than 1000000: not kept");
  EXPECT_EQ(t.skipped[1].why, "MaxNodes 1000001 is more than 1000000: not kept");
  EXPECT_EQ(t.skipped[2].line, 3u);
  EXPECT_EQ(t.skipped[2].why,
            "field 2 (submit time) 9223372036854775807 is more than 3155760000 (100 years)");
  EXPECT_EQ(t.skipped[3].why, "field 4 (run time) 3155760001 is more than 3155760000 (100 years)");
  EXPECT_EQ(t.skipped[4].why, "field 5 (processors) 10000001 is more than 10000000");
  EXPECT_EQ(t.skipped[5].why, "field 8 (requested processors) 4294967296 is more than 10000000");
  EXPECT_EQ(t.skipped[6].line, 7u);

  const Trace trace = SwfToTrace(t);
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.jobs[0].procs, kMaxTraceProcs);
  EXPECT_EQ(trace.jobs[0].traced_wait_s, -1) << "a wait past the bounds is unknown";
  EXPECT_EQ(trace.skipped, 7u);
}

TEST(SwfTest, AByteOrderMarkBeforeTheFirstLineIsPassedOver) {
  const SwfTrace t = Read(
      "\xEF\xBB\xBF; MaxProcs: 64\n"
      "1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n");
  EXPECT_EQ(t.max_procs, 64);
  EXPECT_EQ(t.skipped_count, 0u);
  EXPECT_EQ(t.jobs.size(), 1u);
  const SwfTrace job_first = Read(
      "\xEF\xBB\xBF"
      "7 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n");
  ASSERT_EQ(job_first.jobs.size(), 1u);
  EXPECT_EQ(job_first.jobs[0].id, 7);
}

}  // namespace
}  // namespace muster::sim
