// squeue's fields over a job's row, -O names, and a job array's collapsed row.
#include "squeue_format.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ((*items)[0].letter, 'i');
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
