// The CLI's shared vocabulary: job references, states, signals.
#include "output.h"

#include <gtest/gtest.h>

#include <csignal>

namespace muster::cli {
namespace {

TEST(OutputTest, JobReferencesAsUsersWriteThem) {
  auto refs = ParseJobRefs("7_[1-3,5],9,12_4");
  ASSERT_TRUE(refs.ok()) << refs.status().ToString();
  ASSERT_EQ(refs->size(), 3u);
  EXPECT_EQ((*refs)[0].id, 7u);
  EXPECT_EQ((*refs)[0].tasks, (std::vector<uint32_t>{1, 2, 3, 5}));
  EXPECT_TRUE((*refs)[1].tasks.empty());
  EXPECT_EQ((*refs)[2].tasks, std::vector<uint32_t>{4});
  EXPECT_FALSE(ParseJobRefs("7_[").ok());
  EXPECT_FALSE(ParseJobRefs("abc").ok());

  v1::JobInfo task;
  task.set_id(10);
  task.mutable_array()->set_array_job_id(7);
  task.mutable_array()->set_task_id(3);
  EXPECT_TRUE(RefsMatch(*refs, task));
  task.mutable_array()->set_task_id(4);
  EXPECT_FALSE(RefsMatch(*refs, task));
  EXPECT_TRUE(RefsMatch(*ParseJobRefs("7"), task)) << "an array's id names all its tasks";
}

TEST(OutputTest, SignalsByNameOrNumber) {
  EXPECT_EQ(ParseSignalName("USR1"), SIGUSR1);
  EXPECT_EQ(ParseSignalName("sigterm"), SIGTERM);
  EXPECT_EQ(ParseSignalName("9"), 9);
  EXPECT_EQ(ParseSignalName("65"), 0);
  EXPECT_EQ(ParseSignalName("0"), 0);
  EXPECT_EQ(ParseSignalName("BOGUS"), 0);
}

TEST(OutputTest, StatesRoundTripThroughTheirCodes) {
  for (v1::JobState s : {v1::PENDING, v1::RUNNING, v1::COMPLETED, v1::FAILED, v1::CANCELLED,
                         v1::TIMEOUT, v1::NODE_FAIL}) {
    v1::JobState parsed;
    ASSERT_TRUE(ParseJobState(JobStateCode(s, false), &parsed)) << JobStateCode(s, false);
    EXPECT_EQ(parsed, s);
    ASSERT_TRUE(ParseJobState(JobStateName(s, false), &parsed));
    EXPECT_EQ(parsed, s);
  }
  EXPECT_EQ(JobStateCode(v1::CANCELLED, true), "CG") << "still cleaning up: COMPLETING";
  v1::JobState ignored;
  EXPECT_FALSE(ParseJobState("sleeping", &ignored));
}

TEST(OutputTest, ElapsedTime) {
  v1::JobInfo j;
  j.set_state(v1::PENDING);
  EXPECT_EQ(ElapsedMs(j, 5000), 0);
  j.set_state(v1::COMPLETED);
  j.set_start_time_ms(1000);
  j.set_end_time_ms(4000);
  EXPECT_EQ(ElapsedMs(j, 99'000), 3000) << "a finished job's run ends at its end";
  j.set_state(v1::RUNNING);
  EXPECT_EQ(ElapsedMs(j, 9000), 8000);
}

}  // namespace
}  // namespace muster::cli
