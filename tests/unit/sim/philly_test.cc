// The Philly job table reader: every field, the drop rules, malformed lines, sorting.
#include "muster/sim/philly.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace muster::sim {
namespace {

bool HasNote(const Trace& t, const std::string& text) {
  return std::any_of(t.notes.begin(), t.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

constexpr const char* kTable =
    ",run_time,wait_time,submit_time,gpu_num\n"  // line 1
    "0,100,5,1000,1\n"                           // 2
    "1,200,0,900,8\n"                            // 3: the earliest
    "2,0,0,1100,4\n"                             // 4: never ran
    "3,50,1,1200,-1\n"                           // 5: negative GPUs
    "4,60,2,1300\n"                              // 6: a column short
    "5,abc,0,1400,1\n"                           // 7: not a number
    "6,70,3,950,12\n"                            // 8: 12 GPUs on 8-GPU nodes
    "\n"                                         // 9: blank
    "7,80,4,900,0\n"                             // 10: no GPU, same submit as line 3
    "8,90,0,1000,16\r\n";                        // 11: two whole nodes (CRLF)

TEST(PhillyTest, MapsEveryFieldAndSortsBySubmitFromTheEarliest) {
  auto t = ReadPhilly(kTable);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->format, "philly");
  ASSERT_EQ(t->jobs.size(), 5u);
  // Submit order, stable among equals (1 and 7 both at 900), relative to 900.
  const int64_t ids[] = {1, 7, 6, 0, 8};
  const int64_t submits[] = {0, 0, 50, 100, 100};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(t->jobs[i].trace_id, ids[i]) << i;
    EXPECT_EQ(t->jobs[i].submit_s, submits[i]) << i;
  }
  const SimJob& eight = t->jobs[0];
  EXPECT_EQ(eight.run_s, 200);
  EXPECT_EQ(eight.req_time_s, 200) << "no requested time in the table: perfect estimates";
  EXPECT_EQ(eight.gpus, 8u);
  EXPECT_EQ(eight.procs, 8u) << "one task per GPU";
  EXPECT_EQ(eight.nodes, 1u);
  EXPECT_EQ(eight.user, "philly");
  EXPECT_EQ(eight.account, "");
  EXPECT_EQ(eight.traced_wait_s, 0);
  EXPECT_EQ(eight.mem_mb, 0u);
  EXPECT_TRUE(eight.gpu_types.empty());

  const SimJob& none = t->jobs[1];
  EXPECT_EQ(none.gpus, 0u);
  EXPECT_EQ(none.procs, 1u) << "a job without GPUs still runs a task";
  EXPECT_EQ(none.nodes, 1u);
  EXPECT_EQ(none.traced_wait_s, 4);

  const SimJob& twelve = t->jobs[2];
  EXPECT_EQ(twelve.gpus, 12u);
  EXPECT_EQ(twelve.procs, 12u);
  EXPECT_EQ(twelve.nodes, 2u) << "12 GPUs on 8-GPU nodes: rounded up";
  EXPECT_EQ(twelve.run_s, 70);
  EXPECT_EQ(twelve.traced_wait_s, 3);

  EXPECT_EQ(t->jobs[3].gpus, 1u);
  EXPECT_EQ(t->jobs[3].traced_wait_s, 5);
  EXPECT_EQ(t->jobs[4].gpus, 16u);
  EXPECT_EQ(t->jobs[4].nodes, 2u);

  EXPECT_TRUE(HasNote(*t, "perfect estimates"));
  EXPECT_TRUE(HasNote(*t, "user 'philly'"));
  EXPECT_TRUE(HasNote(*t, "1 jobs use more GPUs than a node has (8)"))
      << "12 is counted, 16 (a multiple) is not";
}

TEST(PhillyTest, DropsAndMalformedLinesAreCountedAndListedByLine) {
  auto t = ReadPhilly(kTable);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->skipped, 4u);
  EXPECT_TRUE(HasNote(*t, "line 4: run_time <= 0: dropped"));
  EXPECT_TRUE(HasNote(*t, "line 5: gpu_num < 0: dropped"));
  EXPECT_TRUE(HasNote(*t, "line 6: malformed: skipped (5 columns expected, 4 found)"));
  EXPECT_TRUE(HasNote(*t, "line 7: malformed: skipped (run_time is not an integer: 'abc')"));
  EXPECT_TRUE(HasNote(*t, "2 lines: malformed: skipped"));
  EXPECT_TRUE(HasNote(*t, "1 line: run_time <= 0: dropped"));
  EXPECT_TRUE(HasNote(*t, "1 line: gpu_num < 0: dropped"));
  EXPECT_FALSE(HasNote(*t, "line 9")) << "a blank line is no job and no error";
}

TEST(PhillyTest, GpusPerNodeDecidesTheNodeCount) {
  auto t = ReadPhilly(kTable, {.gpus_per_node = 4});
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->jobs.size(), 5u);
  EXPECT_EQ(t->jobs[0].nodes, 2u);  // 8 GPUs
  EXPECT_EQ(t->jobs[2].nodes, 3u);  // 12
  EXPECT_EQ(t->jobs[4].nodes, 4u);  // 16
  EXPECT_FALSE(HasNote(*t, "more GPUs than a node has")) << "every count is a multiple of 4";
}

TEST(PhillyTest, ColumnsAreFoundByName) {
  auto t = ReadPhilly(
      "index,gpu_num,submit_time,run_time\n"
      "41,2,500,30\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].trace_id, 41);
  EXPECT_EQ(t->jobs[0].gpus, 2u);
  EXPECT_EQ(t->jobs[0].run_s, 30);
  EXPECT_EQ(t->jobs[0].traced_wait_s, -1) << "no wait_time column: unknown";
}

TEST(PhillyTest, AtMostAHundredLinesAreListed) {
  std::string text = ",run_time,wait_time,submit_time,gpu_num\n0,10,0,5,1\n";
  for (int i = 0; i < 105; ++i) text += "x,1,2,3,4\n";
  auto t = ReadPhilly(text);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->skipped, 105u);
  EXPECT_TRUE(HasNote(*t, "line 3: malformed"));
  EXPECT_TRUE(HasNote(*t, "line 102: malformed"));
  EXPECT_FALSE(HasNote(*t, "line 103: malformed"));
  EXPECT_TRUE(HasNote(*t, "5 more lines skipped"));
  EXPECT_TRUE(HasNote(*t, "105 lines: malformed: skipped"));
}

TEST(PhillyTest, ATableItCannotReadIsAnError) {
  auto no_column = ReadPhilly(",run_time,wait_time,submit_time\n0,1,2,3\n");
  ASSERT_FALSE(no_column.ok());
  EXPECT_EQ(no_column.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_column.status().message().find("gpu_num"), std::string::npos);

  auto nothing = ReadPhilly(",run_time,wait_time,submit_time,gpu_num\na,b,c,d,e\n1,2\n");
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.status().message().find("line 2"), std::string::npos);

  EXPECT_FALSE(ReadPhilly("").ok());
  auto header_only = ReadPhilly(",run_time,wait_time,submit_time,gpu_num\n");
  ASSERT_TRUE(header_only.ok()) << "a table without jobs is empty, not wrong";
  EXPECT_TRUE(header_only->jobs.empty());
}

TEST(PhillyTest, ValuesPastTheBoundsAreSkippedAsOutOfRange) {
  auto t = ReadPhilly(
      ",run_time,wait_time,submit_time,gpu_num\n"        // line 1
      "0,10,0,5,9223372036854775807\n"                   // 2: ceil(gpus / 8) overflowed
      "1,10,0,9223372036854775807,1\n"                   // 3: rebasing against line 4 overflowed
      "2,10,0,-9223372036854775807,1\n"                  // 4
      "3,9223372036854775807,0,5,1\n"                    // 5: the replay's milliseconds overflowed
      "4,10,0,5,1000001\n"                               // 6
      "5,10,9223372036854775807,3155760000,1000000\n");  // 7: at the bounds; the wait unknown
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].trace_id, 5);
  EXPECT_EQ(t->jobs[0].gpus, kMaxTraceGpus);
  EXPECT_EQ(t->jobs[0].nodes, kMaxTraceGpus / 8);
  EXPECT_EQ(t->jobs[0].traced_wait_s, -1);
  EXPECT_EQ(t->skipped, 5u);
  EXPECT_TRUE(HasNote(
      *t, "line 2: out of range: skipped (gpu_num 9223372036854775807 is more than 1000000)"));
  EXPECT_TRUE(HasNote(*t,
                      "line 3: out of range: skipped (submit_time 9223372036854775807 s is not "
                      "within 0 and 100 years (3155760000 s))"));
  EXPECT_TRUE(HasNote(*t, "line 4: out of range: skipped (submit_time -9223372036854775807 s"));
  EXPECT_TRUE(HasNote(*t, "line 5: out of range: skipped (run_time 9223372036854775807 s"));
  EXPECT_TRUE(HasNote(*t, "line 6: out of range: skipped (gpu_num 1000001 is more than 1000000)"));
  EXPECT_TRUE(HasNote(*t, "5 lines: out of range: skipped"));
}

}  // namespace
}  // namespace muster::sim
