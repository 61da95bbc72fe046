// A site's own history: the documented CSV and sacct's output.
#include "muster/sim/csv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace muster::sim {
namespace {

bool HasNote(const Trace& t, const std::string& text) {
  return std::any_of(t.notes.begin(), t.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

TEST(CsvTraceTest, ColumnsInAnyOrderWithIsoTimesAndSlurmDurations) {
  auto t = ReadCsvTrace(
      "User,procs,run,submit,id,req_time,gpus,nodes,account,partition\n"
      "alice,64,01:30:00,2024-03-01T12:00:00,17,2:00:00,8,1,physics,gpu\n"
      "bob,4,1-00:00:00,2024-02-29T23:59:30,18,UNLIMITED,,,,cpu\n"
      "carol,1,05:30,2024-03-01 12:00:00Z,19,,0,0,chem,cpu\n"
      "dave,2,90,2024-03-01,20,Partition_Limit,1,2,chem,gpu\n"
      "erin,2,2-03,2024-03-01T00:00:10,21,3-00:00,0,1,,cpu\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->format, "csv");
  ASSERT_EQ(t->jobs.size(), 5u);
  // 2024-02-29T23:59:30 (a leap day) is the earliest; 2024-03-01 is 30 s later.
  const int64_t ids[] = {18, 20, 21, 17, 19};
  const int64_t submits[] = {0, 30, 40, 43'230, 43'230};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(t->jobs[i].trace_id, ids[i]) << i;
    EXPECT_EQ(t->jobs[i].submit_s, submits[i]) << i;
  }
  const SimJob& bob = t->jobs[0];
  EXPECT_EQ(bob.run_s, 86'400);
  EXPECT_EQ(bob.req_time_s, 0) << "UNLIMITED: no limit";
  EXPECT_EQ(bob.procs, 4u);
  EXPECT_EQ(bob.gpus, 0u) << "empty: none";
  EXPECT_EQ(bob.nodes, 0u) << "empty: as many as needed";
  EXPECT_EQ(bob.user, "bob");
  EXPECT_EQ(bob.account, "");
  EXPECT_EQ(bob.traced_wait_s, -1);

  const SimJob& dave = t->jobs[1];
  EXPECT_EQ(dave.run_s, 90) << "a plain number is seconds";
  EXPECT_EQ(dave.req_time_s, 0) << "Partition_Limit: none";
  EXPECT_EQ(dave.gpus, 1u);
  EXPECT_EQ(dave.nodes, 2u);

  const SimJob& erin = t->jobs[2];
  EXPECT_EQ(erin.run_s, 2 * 86'400 + 3 * 3600) << "D-HH";
  EXPECT_EQ(erin.req_time_s, 3 * 86'400) << "D-HH:MM";

  const SimJob& alice = t->jobs[3];
  EXPECT_EQ(alice.run_s, 5400);
  EXPECT_EQ(alice.req_time_s, 7200);
  EXPECT_EQ(alice.procs, 64u);
  EXPECT_EQ(alice.gpus, 8u);
  EXPECT_EQ(alice.nodes, 1u);
  EXPECT_EQ(alice.user, "alice");
  EXPECT_EQ(alice.account, "physics");

  const SimJob& carol = t->jobs[4];
  EXPECT_EQ(carol.run_s, 330) << "MM:SS";
  EXPECT_EQ(carol.req_time_s, 0) << "empty: no limit";
  EXPECT_EQ(carol.account, "chem");

  EXPECT_EQ(t->skipped, 0u);
  EXPECT_TRUE(HasNote(*t, "columns ignored: partition"));
  EXPECT_TRUE(HasNote(*t, "3 jobs have no time limit"));
}

TEST(CsvTraceTest, SecondsForSubmitAndTheOptionalColumnsLeftOut) {
  auto t = ReadCsvTrace(
      "id,submit,run,procs\n"
      "1,1000,60,2\n"
      "2,400,30,1\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].trace_id, 2);
  EXPECT_EQ(t->jobs[0].submit_s, 0);
  EXPECT_EQ(t->jobs[1].submit_s, 600);
  EXPECT_EQ(t->jobs[1].req_time_s, 60) << "no req_time column: perfect estimates";
  EXPECT_EQ(t->jobs[1].user, "csv");
  EXPECT_EQ(t->jobs[1].gpus, 0u);
  EXPECT_TRUE(HasNote(*t, "no req_time column"));
  EXPECT_TRUE(HasNote(*t, "no user column"));
}

TEST(CsvTraceTest, IsoTimesAreUtcSecondsSinceTheEpoch) {
  auto t = ReadCsvTrace(
      "id,submit,run,procs\n"
      "1,0,60,1\n"
      "2,2024-01-05T10:11:12,60,1\n"
      "3,2000-03-01T00:00:00,60,1\n"
      "4,1970-01-02T00:00:01,60,1\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 4u);
  EXPECT_EQ(t->jobs[1].submit_s, 86'401);
  EXPECT_EQ(t->jobs[2].submit_s, 951'868'800);
  EXPECT_EQ(t->jobs[3].submit_s, 1'704'449'472);
}

TEST(CsvTraceTest, DropsAndMalformedLinesAreCountedAndListedByLine) {
  auto t = ReadCsvTrace(
      "id,submit,run,procs,gpus\n"      // 1
      "1,0,60,1,0\n"                    // 2
      "2,5,0,1,0\n"                     // 3: never ran
      "3,5,60,0,0\n"                    // 4: no CPU
      "4,5,12:xx,1,0\n"                 // 5: not a duration
      "5,2024-13-01T00:00:00,60,1,0\n"  // 6: no 13th month
      "6,5,60,1\n"                      // 7: a column short
      "7,5,60,1,-2\n"                   // 8: negative GPUs
      "x8,5,60,1,0\n"                   // 9: not an id
      "9,2024-02-30,60,1,0\n");         // 10: no February 30th
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->skipped, 8u);
  EXPECT_TRUE(HasNote(*t, "line 3: run <= 0: dropped"));
  EXPECT_TRUE(HasNote(*t, "line 4: no CPU: dropped"));
  EXPECT_TRUE(
      HasNote(*t, "line 5: malformed: skipped (run is not seconds or [D-]HH:MM:SS: '12:xx')"));
  EXPECT_TRUE(HasNote(*t, "line 6: malformed: skipped (submit is not"));
  EXPECT_TRUE(HasNote(*t, "line 7: malformed: skipped (5 columns expected, 4 found)"));
  EXPECT_TRUE(HasNote(*t, "line 8: malformed: skipped (gpus is not a non-negative integer"));
  EXPECT_TRUE(HasNote(*t, "line 9: malformed: skipped (id is not an integer: 'x8')"));
  EXPECT_TRUE(HasNote(*t, "line 10: malformed"));
  EXPECT_TRUE(HasNote(*t, "6 lines: malformed: skipped"));
  EXPECT_TRUE(HasNote(*t, "1 line: run <= 0: dropped"));
  EXPECT_TRUE(HasNote(*t, "1 line: no CPU: dropped"));
}

TEST(CsvTraceTest, AMissingRequiredColumnIsAnErrorNamingIt) {
  for (const char* column : {"id", "submit", "run", "procs"}) {
    std::string header;
    for (const char* c : {"id", "submit", "run", "procs", "gpus"}) {
      if (std::string(c) == column) continue;
      header += std::string(header.empty() ? "" : ",") + c;
    }
    auto t = ReadCsvTrace(header + "\n1,2,3,4\n");
    ASSERT_FALSE(t.ok()) << column;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(std::string("'") + column + "'"), std::string::npos)
        << t.status().message();
  }
  EXPECT_FALSE(ReadCsvTrace("id,submit,run,procs,run\n").ok()) << "a column named twice";
  EXPECT_FALSE(ReadCsvTrace("").ok()) << "no header";
  EXPECT_FALSE(ReadCsvTrace("id,submit,run,procs\nno,no,no,no\n").ok()) << "nothing readable";
}

// As `sacct -a -X -P -n --format=JobID,Submit,Start,End,Timelimit,NCPUS,NNodes,AllocTRES,User,
// Account,State` prints them.
constexpr const char* kSacct =
    "JobID|Submit|Start|End|Timelimit|NCPUS|NNodes|AllocTRES|User|Account|State\n"  // 1
    "1001|2024-01-05T10:11:12|2024-01-05T10:12:00|2024-01-05T11:12:00|01:30:00|8|1|"
    "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=32G,node=1|alice|physics|COMPLETED\n"  // 2
    "1002_5|2024-01-05T10:00:00|2024-01-05T10:00:30|2024-01-05T10:05:30|UNLIMITED|16|2|"
    "billing=16,cpu=16,mem=64G,node=2|bob|chem|FAILED\n"  // 3
    "1003+0|2024-01-05T10:20:00|2024-01-05T10:20:00|2024-01-06T10:20:00|1-00:00:00|4|1|"
    "cpu=4,node=1||chem|TIMEOUT\n"                                                 // 4
    "1004|2024-01-05T10:30:00|Unknown|Unknown|00:30:00|0|0||carol|chem|PENDING\n"  // 5
    "1005|2024-01-05T10:31:00|None|2024-01-05T10:40:00|Partition_Limit|1|0||carol|chem|"
    "CANCELLED by 1000\n"  // 6
    "1006|2024-01-05T10:32:00|2024-01-05T10:33:00|Unknown|00:30:00|2|1|cpu=2,node=1|carol|chem|"
    "RUNNING\n"  // 7
    "1007|2024-01-05T10:34:00|2024-01-05T10:35:00|2024-01-05T10:35:00|00:30:00|2|1|cpu=2|carol|"
    "chem|CANCELLED\n"                                                                 // 8
    "1008|2024-01-05T10:36:00|2024-01-05T10:37:00|2024-01-05T10:38:00|00:30:00|2|1\n"  // 9
    "1009|yesterday|2024-01-05T10:37:00|2024-01-05T10:38:00|00:30:00|2|1|cpu=2|x|y|COMPLETED\n"  // 10
    "1010|2024-01-05T10:36:00|2024-01-05T10:37:00|2024-01-05T10:38:00|soon|2|1|cpu=2|x|y|"
    "COMPLETED\n";  // 11

TEST(SacctTest, MapsEveryField) {
  auto t = ReadSacct(kSacct);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->format, "sacct");
  ASSERT_EQ(t->jobs.size(), 3u);
  const SimJob& array_task = t->jobs[0];  // submitted first, at 10:00:00
  EXPECT_EQ(array_task.trace_id, 3) << "1002_5 is no number: its line";
  EXPECT_EQ(array_task.submit_s, 0);
  EXPECT_EQ(array_task.run_s, 300);
  EXPECT_EQ(array_task.req_time_s, 0) << "UNLIMITED";
  EXPECT_EQ(array_task.procs, 16u);
  EXPECT_EQ(array_task.nodes, 2u);
  EXPECT_EQ(array_task.gpus, 0u) << "no gres/gpu in AllocTRES";
  EXPECT_EQ(array_task.user, "bob");
  EXPECT_EQ(array_task.account, "chem");
  EXPECT_EQ(array_task.traced_wait_s, 30);

  const SimJob& gpu = t->jobs[1];
  EXPECT_EQ(gpu.trace_id, 1001);
  EXPECT_EQ(gpu.submit_s, 11 * 60 + 12);
  EXPECT_EQ(gpu.run_s, 3600);
  EXPECT_EQ(gpu.req_time_s, 5400);
  EXPECT_EQ(gpu.procs, 8u);
  EXPECT_EQ(gpu.nodes, 1u);
  EXPECT_EQ(gpu.gpus, 2u) << "gres/gpu=2, not counted again by type";
  EXPECT_EQ(gpu.user, "alice");
  EXPECT_EQ(gpu.account, "physics");
  EXPECT_EQ(gpu.traced_wait_s, 48);

  const SimJob& het = t->jobs[2];
  EXPECT_EQ(het.trace_id, 4);
  EXPECT_EQ(het.submit_s, 1200);
  EXPECT_EQ(het.run_s, 86'400) << "across midnight";
  EXPECT_EQ(het.req_time_s, 86'400);
  EXPECT_EQ(het.user, "sacct") << "an empty User";
  EXPECT_EQ(het.traced_wait_s, 0);

  EXPECT_TRUE(HasNote(*t, "line 3: job 1002_5 is replayed as job 3"));
  EXPECT_TRUE(HasNote(*t, "line 4: job 1003+0 is replayed as job 4"));
  EXPECT_TRUE(HasNote(*t, "2 job ids are not numbers"));
  EXPECT_TRUE(HasNote(*t, "1 jobs have no time limit"));
}

TEST(SacctTest, JobsThatNeverRanAndMalformedLinesAreCountedAndListedByLine) {
  auto t = ReadSacct(kSacct);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->skipped, 7u) << "the header line is no job and no error";
  EXPECT_FALSE(HasNote(*t, "line 1:"));
  EXPECT_TRUE(
      HasNote(*t, "line 5: never started (Start Unknown or None): dropped (State PENDING)"));
  EXPECT_TRUE(HasNote(*t, "line 6: never started"));
  EXPECT_TRUE(HasNote(*t, "2 lines: never started"));
  EXPECT_TRUE(HasNote(*t, "line 7: not ended (End Unknown): dropped (State RUNNING)"));
  EXPECT_TRUE(HasNote(*t, "line 8: run <= 0: dropped"));
  EXPECT_TRUE(
      HasNote(*t, "line 9: malformed: skipped (11 '|'-separated fields expected, 7 found)"));
  EXPECT_TRUE(HasNote(*t, "line 10: malformed: skipped (Submit is not a time"));
  EXPECT_TRUE(HasNote(*t, "line 11: malformed: skipped (Timelimit is not a time limit"));
}

TEST(SacctTest, TextThatIsNotSacctOutputIsAnError) {
  auto t = ReadSacct("id,submit,run,procs\n1,2,3,4\n");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("line 1"), std::string::npos);
}

TEST(CsvTraceTest, AByteOrderMarkBeforeTheHeaderIsPassedOver) {
  // As spreadsheets save "CSV UTF-8": without this the first column was '\xEF\xBB\xBFid'.
  auto t = ReadCsvTrace("\xEF\xBB\xBFid,submit,run,procs\r\n1,0,10,1\r\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].trace_id, 1);
  EXPECT_EQ(t->jobs[0].run_s, 10);
}

TEST(CsvTraceTest, ValuesPastTheBoundsAreSkippedAsOutOfRange) {
  auto t = ReadCsvTrace(
      "id,submit,run,req_time,procs,gpus,nodes,wait\n"  // line 1
      "1,9223372036854775807,10,10,1,0,0,0\n"           // 2: rebasing against 3 overflowed
      "2,-9223372036854775807,10,10,1,0,0,0\n"          // 3
      "3,1969-12-31T23:59:59,10,10,1,0,0,0\n"           // 4: before the epoch
      "4,0,9223372036854775807,10,1,0,0,0\n"            // 5: the replay's milliseconds
      "5,0,10,9223372036854775807,1,0,0,0\n"            // 6
      "6,0,10,10,10000001,0,0,0\n"                      // 7
      "7,0,10,10,1,1000001,0,0\n"                       // 8
      "8,0,10,10,1,0,1000001,0\n"                       // 9
      "9,2070-01-01T00:00:00,3155760000,3155760000,10000000,1000000,1000000,"
      "9223372036854775807\n");  // 10: at the bounds (1970 + 36,525 days); the wait unknown
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 1u);
  const SimJob& j = t->jobs[0];
  EXPECT_EQ(j.trace_id, 9);
  EXPECT_EQ(j.run_s, kMaxTraceSeconds);
  EXPECT_EQ(j.procs, kMaxTraceProcs);
  EXPECT_EQ(j.gpus, kMaxTraceGpus);
  EXPECT_EQ(j.nodes, kMaxTraceNodes);
  EXPECT_EQ(j.traced_wait_s, -1);
  EXPECT_EQ(t->skipped, 8u);
  EXPECT_TRUE(HasNote(*t, "line 2: out of range: skipped (submit 9223372036854775807 s"));
  EXPECT_TRUE(HasNote(*t, "line 3: out of range: skipped (submit -9223372036854775807 s"));
  EXPECT_TRUE(HasNote(*t, "line 4: out of range: skipped (submit -1 s"));
  EXPECT_TRUE(HasNote(*t, "line 5: out of range: skipped (run 9223372036854775807 s"));
  EXPECT_TRUE(HasNote(*t, "line 6: out of range: skipped (time limit 9223372036854775807 s"));
  EXPECT_TRUE(HasNote(*t, "line 7: out of range: skipped (CPUs 10000001 is more than 10000000)"));
  EXPECT_TRUE(HasNote(*t, "line 8: out of range: skipped (GPUs 1000001 is more than 1000000)"));
  EXPECT_TRUE(HasNote(*t, "line 9: out of range: skipped (nodes 1000001 is more than 1000000)"));
  EXPECT_TRUE(HasNote(*t, "8 lines: out of range: skipped"));
}

TEST(SacctTest, ValuesPastTheBoundsAreSkippedAsOutOfRange) {
  auto t = ReadSacct(
      "1|1969-12-31T00:00:00|1970-01-01T00:00:00|1970-01-01T00:01:00|1:00:00|1|1||u|a|"
      "COMPLETED\n"
      "2|2024-01-01T00:00:00|2099-01-01T00:00:00|2099-01-01T00:01:00|1:00:00|1|1||u|a|"
      "COMPLETED\n"
      "3|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:00|99999999999|1|1||u|a|"
      "COMPLETED\n"
      "4|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:00|1:00:00|10000001|1||u|a|"
      "COMPLETED\n"
      "5|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:00|1:00:00|1|1000001||u|a|"
      "COMPLETED\n"
      "6|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:00|1:00:00|1|1|"
      "gres/gpu=4294967297|u|a|COMPLETED\n"
      "7|2024-01-01T00:00:00|2024-01-01T00:00:10|2024-01-01T00:01:00|1:00:00|1|1|gres/gpu=2|u|a|"
      "COMPLETED\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].trace_id, 7);
  EXPECT_EQ(t->jobs[0].gpus, 2u);
  EXPECT_EQ(t->skipped, 6u);
  EXPECT_TRUE(HasNote(*t, "line 1: out of range: skipped (submit -86400 s"));
  EXPECT_TRUE(HasNote(*t, "line 2: out of range: skipped (Start 4070908800 s"));
  EXPECT_TRUE(HasNote(*t, "line 3: out of range: skipped (time limit 99999999999 s"));
  EXPECT_TRUE(HasNote(*t, "line 4: out of range: skipped (CPUs 10000001 is more than 10000000)"));
  EXPECT_TRUE(HasNote(*t, "line 5: out of range: skipped (nodes 1000001 is more than 1000000)"));
  EXPECT_TRUE(HasNote(*t, "line 6: out of range: skipped (GPUs 4294967297 is more than 1000000)"));
}

}  // namespace
}  // namespace muster::sim
