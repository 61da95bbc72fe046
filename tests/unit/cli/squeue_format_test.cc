// squeue's fields over a job's row, -O names, a job array's collapsed row, -S sort keys and
// the rows of -s/--steps.
#include "squeue_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "muster/common/duration.h"
#include "output.h"

namespace muster::cli {
namespace {

v1::JobInfo Pending() {
  v1::JobInfo j;
  j.set_id(12);
  j.set_name("train");
  j.set_user("alice");
  j.set_state(v1::PENDING);
  j.set_reason("Resources");
  j.set_partition("gpu");
  j.set_num_nodes(2);
  j.set_num_tasks(16);
  j.set_cpus_per_task(4);
  j.set_gpus_per_node(8);
  j.set_gpu_type("h100");
  return j;
}

TEST(SqueueFormatTest, PendingAndRunningRows) {
  v1::JobInfo j = Pending();
  const RowId row = RowIdOf(j);
  EXPECT_EQ(SqueueField('i', j, row, 0), "12");
  EXPECT_EQ(SqueueField('t', j, row, 0), "PD");
  EXPECT_EQ(SqueueField('R', j, row, 0), "(Resources)") << "a pending job shows its reason";
  EXPECT_EQ(SqueueField('D', j, row, 0), "2");
  EXPECT_EQ(SqueueField('C', j, row, 0), "64") << "tasks x CPUs per task before it runs";
  EXPECT_EQ(SqueueField('b', j, row, 0), "gres:gpu:h100:8");
  EXPECT_EQ(SqueueField('K', j, row, 0), "N/A");
  EXPECT_EQ(SqueueField('M', j, row, 0), "0:00");

  j.set_state(v1::RUNNING);
  j.add_nodes("node1");
  j.add_nodes("node2");
  j.set_start_time_ms(1'000'000);
  EXPECT_EQ(SqueueField('R', j, row, 0), "node[1-2]") << "a running job shows its nodes";
  EXPECT_EQ(SqueueField('M', j, row, 1'000'000 + 65'000), "1:05");
  EXPECT_EQ(SqueueField('l', j, row, 0), "UNLIMITED");
}

TEST(SqueueFormatTest, ArrayTasksAndTheirCollapsedRow) {
  v1::JobInfo j = Pending();
  j.mutable_array()->set_array_job_id(7);
  j.mutable_array()->set_task_id(4);
  EXPECT_EQ(RowIdOf(j).id, "7_4");
  EXPECT_EQ(SqueueField('F', j, RowIdOf(j), 0), "7");
  EXPECT_EQ(SqueueField('K', j, RowIdOf(j), 0), "4");

  RowId row = CollapsedRowId(j, {4, 5, 6, 9});
  EXPECT_EQ(row.id, "7_[4-6,9]");
  EXPECT_EQ(row.tasks, "4-6,9");
  j.mutable_array()->set_max_running(2);
  EXPECT_EQ(CollapsedRowId(j, {4}).id, "7_[4%2]") << "a throttle shows even on one task";
  j.mutable_array()->set_max_running(0);
  EXPECT_EQ(CollapsedRowId(j, {4}).id, "7_4");
}

TEST(SqueueFormatTest, LongFormatNamesAndWidths) {
  auto items = ParseSqueueLongFormat("JobID,name:.6,State:3,ReasonList");
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  ASSERT_EQ(items->size(), 4u);
  EXPECT_EQ((*items)[0].letter, 'A') << "-O JobID is the job's own id (%A); JobArrayID is %i";
  EXPECT_EQ((*items)[0].width, 20u) << "-O's default width";
  EXPECT_TRUE((*items)[1].right);
  EXPECT_EQ((*items)[1].width, 6u);
  EXPECT_EQ((*items)[2].letter, 'T');
  std::string out;
  RenderSqueue(*items, nullptr, {}, 0, out);
  EXPECT_EQ(out.substr(0, 26), "JOBID                 NAME");

  EXPECT_FALSE(ParseSqueueLongFormat("JobID,Colour").ok());
  EXPECT_FALSE(ParseSqueueLongFormat("JobID:0").ok());
  EXPECT_FALSE(ParseSqueueLongFormat("").ok());
}

TEST(SqueueFormatTest, LongFormatSuffixesAndSlurmsNames) {
  auto items = ParseSqueueLongFormat("JobArrayID:.6x,Priority,PriorityLong,NumTasks,Cluster");
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  ASSERT_EQ(items->size(), 6u);
  EXPECT_EQ((*items)[0].letter, 'i');
  EXPECT_EQ((*items)[1].literal, "x") << "text after the width is printed after the field";
  EXPECT_EQ((*items)[2].letter, 'p') << "Priority is the normalised one, as Slurm's";
  EXPECT_EQ((*items)[3].letter, 'Q');
  v1::JobInfo j = Pending();
  j.set_priority(2147483648);
  SqueueContext ctx;
  ctx.cluster = "c1";
  std::string out;
  RenderSqueue(*items, &j, RowIdOf(j), ctx, out);
  EXPECT_EQ(out.substr(0, 7), "    12x");
  EXPECT_NE(out.find("0.50000000011642"), std::string::npos) << out;
  EXPECT_NE(out.find("2147483648"), std::string::npos) << out;
  EXPECT_NE(out.find("16"), std::string::npos) << "NumTasks: " << out;
  EXPECT_NE(out.find("c1"), std::string::npos) << "Cluster: " << out;
}

TEST(SqueueFormatTest, MoreLettersAndWhichNeedTheFullListing) {
  v1::JobInfo j = Pending();
  const RowId row = RowIdOf(j);
  EXPECT_EQ(SqueueField('c', j, row, 0), "4");
  EXPECT_EQ(SqueueField('B', j, row, 0), "n/a");
  EXPECT_EQ(SqueueField('E', j, row, 0), "");
  EXPECT_EQ(SqueueField('f', j, row, 0), "(null)");
  EXPECT_EQ(SqueueField('e', j, row, 0), "N/A") << "no expected start, so no expected end";
  EXPECT_EQ(SqueueField('L', j, row, 0), "UNLIMITED");
  j.set_time_limit_ms(3'600'000);
  EXPECT_EQ(SqueueField('L', j, row, 0), "1:00:00");
  j.set_state(v1::RUNNING);
  j.add_nodes("node3");
  j.set_start_time_ms(1'000'000);
  EXPECT_EQ(SqueueField('L', j, row, 1'000'000 + 600'000), "50:00");
  EXPECT_EQ(SqueueField('e', j, row, 0), FormatTimestamp(1'000'000 + 3'600'000));
  EXPECT_EQ(SqueueField('B', j, row, 0), "node3") << "a batch job's first node";
  j.set_time_limit_ms(0);
  EXPECT_EQ(SqueueField('e', j, row, 0), "NONE") << "running without a limit";

  auto brief = ParseSqueueFormat("%i %j %t %e %L %c %p");
  auto full = ParseSqueueFormat("%i %m");
  ASSERT_TRUE(brief.ok() && full.ok());
  EXPECT_FALSE(NeedsFullListing(*brief));
  EXPECT_TRUE(NeedsFullListing(*full));
  EXPECT_FALSE(ParseSqueueFormat("%i %k").ok()) << "the comment is not kept: refused";
}

TEST(SqueueFormatTest, MemoryAsSqueueConvertsIt) {
  EXPECT_EQ(MemoryText(0, false), "0");
  EXPECT_EQ(MemoryText(4096, false), "4G");
  EXPECT_EQ(MemoryText(1536, false), "1.50G") << "halves are exact enough";
  EXPECT_EQ(MemoryText(1000, false), "1000M");
  EXPECT_EQ(MemoryText(4096, true), "4096M") << "--noconvert";
  EXPECT_EQ(MemoryText(2u * 1024 * 1024, false), "2T");
  v1::JobInfo j = Pending();
  j.set_mem_per_node_mb(8192);
  SqueueContext ctx;
  EXPECT_EQ(SqueueField('m', j, RowIdOf(j), ctx), "8G");
  ctx.noconvert = true;
  EXPECT_EQ(SqueueField('m', j, RowIdOf(j), ctx), "8192M");
}

TEST(SqueueFormatTest, AllFieldsWithBars) {
  auto items = ParseSqueueFormat("%all");
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  std::string out;
  RenderSqueue(*items, nullptr, {}, 0, out);
  EXPECT_EQ(out.substr(0, 22), "ACCOUNT|TRES_PER_NODE|");
  EXPECT_EQ(static_cast<size_t>(std::count(out.begin(), out.end(), '|')),
            std::string(kSqueueLetters).size() - 1);
}

TEST(SqueueFormatTest, SortKeysAsSqueueReadsThem) {
  auto keys = ParseSortKeys("-t,i", kSqueueSortLetters, kSqueueInertSortLetters);
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].letter, 't');
  EXPECT_TRUE((*keys)[0].descending);
  EXPECT_EQ((*keys)[1].letter, 'i');
  EXPECT_FALSE((*keys)[1].descending);
  keys = ParseSortKeys("P,+t,-p", kSqueueSortLetters, kSqueueInertSortLetters);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 3u);
  EXPECT_TRUE((*keys)[2].descending);
  keys = ParseSortKeys("cluster,-i,n", kSqueueSortLetters, kSqueueInertSortLetters);
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 1u) << "one cluster, and n orders nothing (as Slurm's)";
  EXPECT_TRUE((*keys)[0].descending);
  EXPECT_FALSE(ParseSortKeys("1", kSqueueSortLetters).ok());
  EXPECT_FALSE(ParseSortKeys("%i", kSqueueSortLetters).ok()) << "squeue refuses % in -S too";
  EXPECT_FALSE(ParseSortKeys("K", kSqueueSortLetters).ok());
}

TEST(SqueueFormatTest, RowsInSortOrder) {
  std::vector<v1::JobInfo> rows;
  for (uint64_t id : {3, 1, 2}) {
    v1::JobInfo j = Pending();
    j.set_id(id);
    j.set_priority(static_cast<int64_t>(100 - id));
    rows.push_back(j);
  }
  rows[1].set_state(v1::RUNNING);  // job 1
  auto order = [&](const std::string& spec) {
    auto keys = ParseSortKeys(spec, kSqueueSortLetters, kSqueueInertSortLetters);
    EXPECT_TRUE(keys.ok()) << spec;
    SortRows<v1::JobInfo>(rows, *keys, [](char letter, const v1::JobInfo& j) {
      return SqueueSortValue(letter, j, 0);
    });
    std::string ids;
    for (const auto& j : rows) ids += std::to_string(j.id());
    return ids;
  };
  EXPECT_EQ(order("i"), "123");
  EXPECT_EQ(order("-i"), "321");
  EXPECT_EQ(order("t,i"), "231") << "PD before R, as the codes sort; then by id";
  EXPECT_EQ(order("-t,-i"), "132");
  EXPECT_EQ(order("-p"), "123") << "the highest priority first";
  EXPECT_EQ(order("p"), "321");
  EXPECT_EQ(order("n"), "321") << "a key that orders nothing keeps the order";
}

TEST(SqueueFormatTest, ArrayTasksSortByTheirArrayThenTask) {
  v1::JobInfo a = Pending(), b = Pending(), c = Pending();
  a.set_id(20);
  a.mutable_array()->set_array_job_id(7);
  a.mutable_array()->set_task_id(2);
  b.set_id(8);
  b.mutable_array()->set_array_job_id(7);
  b.mutable_array()->set_task_id(1);
  c.set_id(9);
  std::vector<v1::JobInfo> rows = {c, a, b};
  SortRows<v1::JobInfo>(rows, {{'i', false}}, [](char letter, const v1::JobInfo& j) {
    return SqueueSortValue(letter, j, 0);
  });
  EXPECT_EQ(JobIdText(rows[0]), "7_1");
  EXPECT_EQ(JobIdText(rows[1]), "7_2");
  EXPECT_EQ(JobIdText(rows[2]), "9");
}

TEST(SqueueFormatTest, StepRowsAndTheirSelection) {
  v1::JobInfo j = Pending();
  j.set_state(v1::RUNNING);
  j.add_nodes("node1");
  j.add_nodes("node2");
  j.set_start_time_ms(1'000'000);
  v1::StepRecord* s = j.add_steps();
  s->set_id(0);
  s->set_name("hostname");
  s->set_ntasks(4);
  s->set_start_time_ms(1'010'000);
  s->add_nodes()->set_node("node1");
  s->add_nodes()->set_node("node2");
  const StepRow step{&j, s}, batch{&j, nullptr};
  EXPECT_EQ(SqueueStepField('i', step, 0), "12.0");
  EXPECT_EQ(SqueueStepField('i', batch, 0), "12.batch");
  EXPECT_EQ(SqueueStepField('j', batch, 0), "batch");
  EXPECT_EQ(SqueueStepField('N', step, 0), "node[1-2]");
  EXPECT_EQ(SqueueStepField('N', batch, 0), "node1") << "the batch script runs on the first";
  EXPECT_EQ(SqueueStepField('A', step, 0), "4");
  EXPECT_EQ(SqueueStepField('M', step, 1'010'000 + 61'000), "1:01");
  auto items = ParseSqueueFormat(kSqueueStepFormat, /*steps=*/true);
  ASSERT_TRUE(items.ok());
  EXPECT_FALSE(ParseSqueueFormat("%i %T", /*steps=*/true).ok()) << "no state on a step's row";

  auto refs = ParseStepRefs("12.0");
  ASSERT_TRUE(refs.ok());
  EXPECT_TRUE(StepRefsMatch(*refs, step));
  EXPECT_FALSE(StepRefsMatch(*refs, batch));
  refs = ParseStepRefs("12.batch,99.1");
  ASSERT_TRUE(refs.ok());
  EXPECT_FALSE(StepRefsMatch(*refs, step));
  EXPECT_TRUE(StepRefsMatch(*refs, batch));
  refs = ParseStepRefs("12");
  ASSERT_TRUE(refs.ok());
  EXPECT_TRUE(StepRefsMatch(*refs, step) && StepRefsMatch(*refs, batch)) << "all its steps";
  j.mutable_array()->set_array_job_id(7);
  j.mutable_array()->set_task_id(3);
  refs = ParseStepRefs("7_3.0");
  ASSERT_TRUE(refs.ok());
  EXPECT_TRUE(StepRefsMatch(*refs, step));
  EXPECT_EQ(SqueueStepField('i', step, 0), "7_3.0");
  refs = ParseStepRefs("7_4.0");
  ASSERT_TRUE(refs.ok());
  EXPECT_FALSE(StepRefsMatch(*refs, step));
  EXPECT_FALSE(ParseStepRefs("7.x").ok());
  EXPECT_FALSE(ParseStepRefs("a.1").ok());
}

TEST(SqueueFormatTest, DefaultFormatParses) {
  auto items = ParseSqueueFormat(kSqueueDefaultFormat);
  ASSERT_TRUE(items.ok());
  std::string out;
  RenderSqueue(*items, nullptr, {}, 0, out);
  EXPECT_EQ(out,
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES "
            "NODELIST(REASON)\n");
}

}  // namespace
}  // namespace muster::cli
