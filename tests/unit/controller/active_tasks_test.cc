// ActiveTasks: the pending and running tasks by account and QoS that submit limits compare
// against, kept as records change instead of counted by a walk over every job.
#include "active_tasks.h"

#include <gtest/gtest.h>

namespace muster::controller {
namespace {

v1::JobRecord Job(v1::JobState state, const std::string& account, const std::string& qos,
                  uint32_t uid) {
  v1::JobRecord r;
  r.set_id(7);
  r.set_state(state);
  r.mutable_spec()->set_account(account);
  r.mutable_spec()->set_qos(qos);
  r.mutable_spec()->set_uid(uid);
  return r;
}

TEST(ActiveTasksTest, AJobCountsWhilePendingOrRunningUnderItsAccountQosAndUser) {
  ActiveTasks active;
  ActiveTasks::Counted counted;
  v1::JobRecord r = Job(v1::PENDING, "physics", "", 1000);
  active.Recount(counted, r);
  EXPECT_EQ(active.OfAccount("physics"), 1u);
  EXPECT_EQ(active.OfAccount("physics", 1000), 1u);
  EXPECT_EQ(active.OfAccount("physics", 1001), 0u);
  EXPECT_EQ(active.OfQos("normal"), 1u) << "a job naming no QoS is in normal";
  EXPECT_EQ(active.OfQos("normal", 1000), 1u);

  r.set_state(v1::RUNNING);
  active.Recount(counted, r);
  EXPECT_EQ(active.OfAccount("physics"), 1u) << "running still counts, once";

  // Moved to another account and QoS (scontrol update): it leaves the old ones.
  r.mutable_spec()->set_account("chemistry");
  r.mutable_spec()->set_qos("high");
  active.Recount(counted, r);
  EXPECT_EQ(active.OfAccount("physics"), 0u);
  EXPECT_EQ(active.OfQos("normal"), 0u);
  EXPECT_EQ(active.OfAccount("chemistry", 1000), 1u);
  EXPECT_EQ(active.OfQos("high", 1000), 1u);

  r.set_state(v1::COMPLETED);
  active.Recount(counted, r);
  EXPECT_EQ(active.OfAccount("chemistry"), 0u);
  EXPECT_EQ(active.OfQos("high"), 0u);
  EXPECT_EQ(counted.tasks, 0u);
  active.Recount(counted, r);  // ended twice: nothing to take
  EXPECT_EQ(active.OfQos("high"), 0u);
}

TEST(ActiveTasksTest, ACarrierCountsEveryTaskItStandsForAndLessAsTasksSplitOff) {
  ActiveTasks active;
  ActiveTasks::Counted carrier;
  v1::JobRecord r = Job(v1::PENDING, "physics", "normal", 1000);
  r.add_array_waiting(1);  // waiting positions 1..9 beside its own
  r.add_array_waiting(9);
  active.Recount(carrier, r);
  EXPECT_EQ(active.OfAccount("physics"), 10u);
  // Task 1 splits off: the carrier holds 2..9, the task is counted on its own.
  r.set_array_waiting(0, 2);
  active.Recount(carrier, r);
  ActiveTasks::Counted task;
  active.Recount(task, Job(v1::RUNNING, "physics", "normal", 1000));
  EXPECT_EQ(active.OfAccount("physics", 1000), 10u);
  EXPECT_EQ(active.OfQos("normal"), 10u);
}

TEST(ActiveTasksTest, KeptCountsEqualRecountedOnesIgnoringKeysBackAtZero) {
  ActiveTasks kept, fresh;
  ActiveTasks::Counted a, b, c;
  kept.Recount(a, Job(v1::PENDING, "physics", "normal", 1000));
  kept.Recount(b, Job(v1::PENDING, "old", "gone", 1001));
  kept.Recount(b, Job(v1::CANCELLED, "old", "gone", 1001));  // back to zero, key kept
  fresh.Recount(c, Job(v1::PENDING, "physics", "normal", 1000));
  EXPECT_TRUE(kept.SameAs(fresh));
  EXPECT_TRUE(fresh.SameAs(kept));
  ActiveTasks::Counted d;
  fresh.Recount(d, Job(v1::PENDING, "physics", "normal", 1001));
  EXPECT_FALSE(kept.SameAs(fresh)) << "another user's job makes them differ";
}

}  // namespace
}  // namespace muster::controller
