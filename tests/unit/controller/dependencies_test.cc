// --dependency through the engine: what waits for what, and what can never run.
#include "engine_fixture.h"
#include "muster/common/dependency.h"

namespace muster::controller {
namespace {

class DependencyTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    AllUp();
  }

  Result<uint64_t> After(const std::string& dependency, uint32_t gpus = 1,
                         const std::string& name = "") {
    v1::JobSpec spec = Gang(1, gpus);
    spec.set_dependency(dependency);
    if (!name.empty()) spec.set_name(name);
    return Submit(spec, Alice());
  }

  // Runs `id` and ends it with `code` (and cleans up its node).
  void Finish(uint64_t id, int code) {
    Pass();
    ASSERT_EQ(Job(id).state(), v1::RUNNING) << id;
    const std::string node = Job(id).nodes(0);
    Started(id, node);
    Exited(id, node, code);
    Cleaned(id, node);
  }
};

TEST(DependencyParseTest, SlurmsFormsParseAndPrint) {
  auto d = ParseDependency("afterok:12:13,afterany:14,singleton");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->terms.size(), 4u);
  EXPECT_FALSE(d->any);
  EXPECT_EQ(FormatDependency(*d), "afterok:12:13,afterany:14,singleton");
  auto any = ParseDependency("afterok:12?afternotok:13");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->any);
  EXPECT_EQ(FormatDependency(*ParseDependency("after:7+10")), "after:7+10");
  EXPECT_EQ(FormatDependency(*ParseDependency("15")), "afterany:15");
  for (const char* bad : {"", "afterok", "afterok:", "afterok:x", "afterok:1,afterany:2?after:3",
                          "sometime:4", "afterok:1+5", "singleton:3", "afterok:0"}) {
    EXPECT_EQ(ParseDependency(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(FormatDependency(*ParseDependency("aftercorr:5")), "aftercorr:5");
  EXPECT_EQ(ParseDependency("expand:5").status().code(), StatusCode::kUnimplemented);
}

TEST_F(DependencyTest, AfterOkWaitsForSuccessAndNeverRunsAfterFailure) {
  const uint64_t first = *After("");
  const uint64_t ok = *After("afterok:" + std::to_string(first));
  const uint64_t notok = *After("afternotok:" + std::to_string(first));
  const uint64_t any = *After("afterany:" + std::to_string(first));
  EXPECT_EQ(Job(ok).reason(), "Dependency");
  EXPECT_EQ(Job(ok).dependency(), "afterok:" + std::to_string(first) + "(unfulfilled)");
  Pass();
  EXPECT_EQ(Job(ok).state(), v1::PENDING) << "the cluster is empty, yet it waits";
  EXPECT_EQ(Job(first).state(), v1::RUNNING);
  Finish(first, 0);
  Pass();
  EXPECT_EQ(Job(ok).state(), v1::RUNNING);
  EXPECT_EQ(Job(any).state(), v1::RUNNING);
  EXPECT_EQ(Job(notok).state(), v1::PENDING);
  EXPECT_EQ(Job(notok).reason(), "DependencyNeverSatisfied");
  EXPECT_NE(Job(notok).dependency().find("(failed)"), std::string::npos);
}

TEST_F(DependencyTest, AfterNotOkRunsAfterAFailureAndAnyNeedsOne) {
  const uint64_t a = *After("");
  const uint64_t b = *After("");
  const uint64_t notok = *After("afternotok:" + std::to_string(a));
  const uint64_t either = *After("afterok:" + std::to_string(a) + "?afterok:" + std::to_string(b));
  const uint64_t both = *After("afterok:" + std::to_string(a) + ",afterok:" + std::to_string(b));
  Finish(a, 3);
  Pass();
  EXPECT_EQ(Job(notok).state(), v1::RUNNING);
  EXPECT_EQ(Job(either).state(), v1::PENDING) << "b may still succeed";
  EXPECT_EQ(Job(both).reason(), "DependencyNeverSatisfied");
  Finish(b, 0);
  Pass();
  EXPECT_EQ(Job(either).state(), v1::RUNNING);
}

TEST_F(DependencyTest, UnknownJobsAreRefusedAndArraysStandForTheirTasks) {
  Status st = After("afterok:999").status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("Job dependency problem"), std::string::npos) << st.message();
  v1::JobSpec array = Gang(1, 1);
  array.set_array("0-2");
  const uint64_t arr = *Submit(array, Alice());
  const uint64_t after = *After("afterany:" + std::to_string(arr));
  EXPECT_EQ(Job(after).dependency(), "afterany:" + std::to_string(arr) + ":" +
                                         std::to_string(arr + 1) + ":" + std::to_string(arr + 2) +
                                         "(unfulfilled)");
  Finish(arr, 0);
  Finish(arr + 1, 1);
  Pass();
  EXPECT_EQ(Job(after).state(), v1::PENDING);
  Finish(arr + 2, 0);
  Pass();
  EXPECT_EQ(Job(after).state(), v1::RUNNING);
}

TEST_F(DependencyTest, AfterCorrPairsTasksOfTwoArraysByTaskId) {
  v1::JobSpec array = Gang(1, 1);
  array.set_array("0-2");
  const uint64_t first = *Submit(array, Alice());
  array.set_dependency("aftercorr:" + std::to_string(first));
  array.set_array("0-3");  // task 3 has no counterpart: it need not wait
  auto second = Submit(array, Alice());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  // aftercorr names an array, not a plain job.
  const uint64_t plain = *After("");
  EXPECT_EQ(After("aftercorr:" + std::to_string(plain)).status().code(),
            StatusCode::kInvalidArgument);
  Finish(first + 1, 0);  // task 1 ended well; tasks 0 and 2 still run or wait
  Pass();
  EXPECT_EQ(Job(*second + 1).state(), v1::RUNNING) << "its counterpart (task 1) ended well";
  EXPECT_EQ(Job(*second + 3).state(), v1::RUNNING) << "no task 3 in the first array";
  EXPECT_EQ(Job(*second).state(), v1::PENDING);
  Finish(first, 2);  // task 0 failed: its counterpart can never run
  Pass();
  EXPECT_EQ(Job(*second).reason(), "DependencyNeverSatisfied");
  EXPECT_EQ(Job(*second + 2).state(), v1::PENDING);
}

TEST_F(DependencyTest, KillInvalidDependCancelsWhatCanNeverRun) {
  const uint64_t first = *After("");
  // Per job: --kill-on-invalid-dep=yes.
  v1::JobSpec spec = Gang(1, 1);
  spec.set_dependency("afterok:" + std::to_string(first));
  spec.set_kill_on_invalid_dep(1);
  const uint64_t killed = *Submit(spec, Alice());
  const uint64_t kept = *After("afterok:" + std::to_string(first));
  const uint64_t chained = *After("afterany:" + std::to_string(killed));
  Finish(first, 1);
  Pass();
  EXPECT_EQ(Job(killed).state(), v1::CANCELLED);
  EXPECT_EQ(Job(killed).reason(), "DependencyNeverSatisfied");
  EXPECT_EQ(Job(kept).state(), v1::PENDING) << "the cluster's default keeps it";
  EXPECT_EQ(Job(kept).reason(), "DependencyNeverSatisfied");
  Pass();
  EXPECT_EQ(Job(chained).state(), v1::RUNNING) << "afterany is satisfied by the cancelled job";
  // The cluster's kill_invalid_depend, and a job that says no.
  config_.scheduling.kill_invalid_depend = true;
  Restart();
  AllUp();
  const uint64_t second = *After("");
  const uint64_t dies = *After("afternotok:" + std::to_string(second));
  spec.set_dependency("afternotok:" + std::to_string(second));
  spec.set_kill_on_invalid_dep(2);
  const uint64_t stays = *Submit(spec, Alice());
  Finish(second, 0);
  Pass();
  EXPECT_EQ(Job(dies).state(), v1::CANCELLED);
  EXPECT_EQ(Job(stays).state(), v1::PENDING);
}

TEST_F(DependencyTest, SingletonWaitsForEarlierJobsOfTheSameNameAndUser) {
  const uint64_t first = *After("", 1, "train");
  const uint64_t other_name = *After("singleton", 1, "eval");
  const uint64_t second = *After("singleton", 1, "train");
  Pass();
  EXPECT_EQ(Job(other_name).state(), v1::RUNNING);
  EXPECT_EQ(Job(second).state(), v1::PENDING);
  Finish(first, 1);
  Pass();
  EXPECT_EQ(Job(second).state(), v1::RUNNING) << "singleton is satisfied by any end";
}

TEST_F(DependencyTest, AfterWaitsForTheStartPlusItsDelayAndSurvivesRestarts) {
  const uint64_t first = *After("");
  const uint64_t later = *After("after:" + std::to_string(first) + "+5");
  Pass();
  const std::string node = Job(first).nodes(0);
  Started(first, node);
  Pass();
  EXPECT_EQ(Job(later).state(), v1::PENDING);
  Restart();
  for (const char* n : {"node1", "node2", "node3", "node4"}) {
    Up(n, n == node ? std::vector<uint64_t>{first} : std::vector<uint64_t>{});
  }
  Pass();
  EXPECT_EQ(Job(first).state(), v1::RUNNING);
  EXPECT_EQ(Job(later).state(), v1::PENDING) << "its 5 minutes have not passed";
  now_ += 5 * 60'000;
  Pass();
  EXPECT_EQ(Job(later).dependency(), "");
  EXPECT_EQ(Job(later).state(), v1::RUNNING);
}

TEST_F(DependencyTest, WhatOneJobMayWaitForIsBoundedAndResolvingIsSpreadOverPasses) {
  const uint64_t done = *After("");
  Finish(done, 0);
  std::string many = "afterok";
  for (int i = 0; i < 1001; ++i) many += ":" + std::to_string(done);
  Status st = After(many).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("more than 1000"), std::string::npos) << st.message();
  EXPECT_EQ(After("afterok:" + std::string(5000, '1')).status().code(),
            StatusCode::kInvalidArgument)
      << "the text is bounded before it is parsed";
  // 30 jobs of 1000 satisfied terms each: one pass looks at 20,000 terms, the next at the rest.
  many.erase(many.rfind(':'));
  std::vector<uint64_t> waiting;
  for (int i = 0; i < 30; ++i) waiting.push_back(*After(many, 0));
  engine_->RunSchedulePass(now_);
  size_t resolved = 0;
  for (uint64_t id : waiting) resolved += Job(id).dependency().empty();
  EXPECT_GT(resolved, 0u);
  EXPECT_LT(resolved, waiting.size());
  engine_->RunSchedulePass(now_);
  for (uint64_t id : waiting) EXPECT_EQ(Job(id).dependency(), "") << id;
}

}  // namespace
}  // namespace muster::controller
