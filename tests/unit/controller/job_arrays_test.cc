// Job arrays that wait as one record: submission writes one, tasks are split off as they start
// or as a request names one alone, and every view, limit and dependency still sees each task.
#include <set>

#include "engine_fixture.h"

namespace muster::controller {
namespace {

class ArrayTest : public EngineTest {
 protected:
  void AllowArraysOf(uint32_t tasks) {
    config_.scheduling.max_array_size = tasks + 1;
    config_.scheduling.max_pending_jobs_per_user = 0;
    Restart();
    AllUp();
  }

  // The live job records in the store (what a restarted controller would find).
  std::vector<v1::JobRecord> Stored() {
    auto loaded = store_.LoadAll();
    EXPECT_TRUE(loaded.ok());
    return loaded.ok() ? loaded->jobs : std::vector<v1::JobRecord>{};
  }

  std::vector<v1::JobInfo> Listed(uint64_t id, bool brief) {
    v1::ListJobsRequest req;
    if (id != 0) req.add_job_ids(id);
    req.set_brief(brief);
    auto list = engine_->ListJobs(Root(), req);
    EXPECT_TRUE(list.ok());
    return list.ok() ? std::vector<v1::JobInfo>(list->jobs().begin(), list->jobs().end())
                     : std::vector<v1::JobInfo>{};
  }

  uint32_t PendingCount() {
    auto info = engine_->ControllerInfo();
    return info.ok() ? info->jobs_pending() : 0;
  }

  v1::CancelJobResponse CancelOne(uint64_t id, const Caller& who) {
    v1::CancelJobRequest req;
    req.add_single_job_ids(id);
    auto r = engine_->CancelJob(who, req, now_);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : v1::CancelJobResponse();
  }
};

TEST_F(ArrayTest, A100000TaskArrayIsOneRecordAndEveryTaskStillShows) {
  AllowArraysOf(100'000);
  v1::JobSpec spec = Gang(1, 8);  // 4 nodes: four run at once
  spec.set_array("0-99999");
  spec.set_hold(true);
  const uint64_t id = *Submit(spec, Alice());
  ASSERT_EQ(Stored().size(), 1u) << "one record for the whole pending array";
  EXPECT_EQ(*Submit(Gang(1, 1)), id + 100'000) << "the tasks' ids are reserved all the same";
  EXPECT_EQ(PendingCount(), 100'001u);
  // Each task is a row, with its own id and task id, in order.
  const auto rows = Listed(id, /*brief=*/true);
  ASSERT_EQ(rows.size(), 100'000u);
  for (uint64_t k : {0ul, 1ul, 5'000ul, 99'999ul}) {
    EXPECT_EQ(rows[k].id(), id + k);
    EXPECT_EQ(rows[k].array().task_id(), k);
    EXPECT_EQ(rows[k].array().array_job_id(), id);
    EXPECT_EQ(rows[k].state(), v1::PENDING);
  }
  // One task, by its own id.
  const v1::JobInfo one = Job(id + 777);
  EXPECT_EQ(one.id(), id + 777);
  EXPECT_EQ(one.array().task_id(), 777u);
  EXPECT_TRUE(one.hold());
  // Released, the array runs as the nodes allow; the rest still wait in one record.
  v1::UpdateJobRequest release;
  release.set_action(v1::UpdateJobRequest::RELEASE);
  release.add_job_ids(id);
  auto r = engine_->UpdateJob(Alice(), release, now_);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->results_size(), 1) << "the array's one record";
  Pass();
  for (uint64_t k = 0; k < 4; ++k) EXPECT_EQ(Job(id + k).state(), v1::RUNNING) << k;
  EXPECT_EQ(Job(id + 4).state(), v1::PENDING);
  EXPECT_EQ(Stored().size(), 4u + 1 + 1) << "four started tasks, the waiting ones, the other job";
  EXPECT_EQ(PendingCount(), 99'996u + 1);
}

TEST_F(ArrayTest, TasksSplitOffAsTheyStartAndSurviveARestart) {
  AllUp();
  v1::JobSpec spec = Gang(1, 8);
  spec.set_array("1-9:2");  // tasks 1 3 5 7 9
  const uint64_t id = *Submit(spec, Alice());
  Pass();
  for (uint64_t k = 0; k < 4; ++k) {
    ASSERT_EQ(Job(id + k).state(), v1::RUNNING) << k;
    EXPECT_EQ(Job(id + k).array().task_id(), 1 + 2 * k);
  }
  // The launch names the task (SLURM_ARRAY_TASK_ID, %a).
  bool launched = false;
  for (const auto& m : Sent(Job(id + 2).nodes(0))) {
    if (m.has_launch_job() && m.launch_job().job_id() == id + 2) {
      launched = true;
      EXPECT_EQ(m.launch_job().array().task_id(), 5u);
      EXPECT_EQ(m.launch_job().array().count(), 5u);
    }
  }
  EXPECT_TRUE(launched);
  EXPECT_EQ(Job(id + 4).state(), v1::PENDING);
  EXPECT_EQ(Job(id + 4).array().task_id(), 9u);
  // A restarted controller finds the same: four running, the last task waiting.
  Restart();
  AllUp();
  for (uint64_t k = 0; k < 4; ++k) EXPECT_EQ(Job(id + k).state(), v1::RUNNING) << k;
  EXPECT_EQ(Job(id + 4).state(), v1::PENDING);
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok())
      << engine_->CheckInvariantsForTest().ToString();
  // One ends; the last starts on its node.
  const std::string node = Job(id).nodes(0);
  Started(id, node);
  Exited(id, node, 0);
  Cleaned(id, node);
  Pass();
  EXPECT_EQ(Job(id + 4).state(), v1::RUNNING);
  std::set<uint64_t> ids;
  for (const auto& r : Stored()) ids.insert(r.id());
  EXPECT_EQ(ids, (std::set<uint64_t>{id, id + 1, id + 2, id + 3, id + 4}));
}

TEST_F(ArrayTest, NamingOneWaitingTaskSplitsItOffAndOnlyIt) {
  v1::JobSpec spec = Gang(1, 1);
  spec.set_array("0-5");
  const uint64_t id = *Submit(spec, Alice());
  // Cancel task 3 alone (scancel A_3 sends its own id).
  auto r = CancelOne(id + 3, Alice());
  ASSERT_EQ(r.results_size(), 1);
  EXPECT_EQ(r.results(0).code(), 0) << r.results(0).message();
  EXPECT_EQ(Job(id + 3).state(), v1::CANCELLED);
  for (uint64_t k : {0, 1, 2, 4, 5}) EXPECT_EQ(Job(id + k).state(), v1::PENDING) << k;
  // Task 0 alone: it carried the others, which now wait in task 1's record.
  r = CancelOne(id, Alice());
  EXPECT_EQ(Job(id).state(), v1::CANCELLED);
  for (uint64_t k : {1, 2, 4, 5}) EXPECT_EQ(Job(id + k).state(), v1::PENDING) << k;
  // Hold one waiting task by its id; the rest stay released.
  v1::UpdateJobRequest hold;
  hold.set_action(v1::UpdateJobRequest::HOLD);
  hold.add_job_ids(id + 4);
  ASSERT_TRUE(engine_->UpdateJob(Alice(), hold, now_).ok());
  EXPECT_TRUE(Job(id + 4).hold());
  EXPECT_FALSE(Job(id + 5).hold());
  EXPECT_FALSE(Job(id + 2).hold());
  EXPECT_EQ(PendingCount(), 4u);
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok())
      << engine_->CheckInvariantsForTest().ToString();
  // A hold of the array's id is about its tasks that wait: the cancelled ones are no error.
  v1::UpdateJobRequest hold_all;
  hold_all.set_action(v1::UpdateJobRequest::HOLD);
  hold_all.add_job_ids(id);
  auto held = engine_->UpdateJob(Alice(), hold_all, now_);
  ASSERT_TRUE(held.ok());
  for (const auto& res : held->results()) {
    EXPECT_EQ(res.code(), 0) << res.job_id() << ": " << res.message();
  }
  for (uint64_t k : {1, 2, 4, 5}) EXPECT_TRUE(Job(id + k).hold()) << k;
  // The whole array, by its id: what waits and what was split off.
  v1::CancelJobRequest all;
  all.add_job_ids(id);
  ASSERT_TRUE(engine_->CancelJob(Alice(), all, now_).ok());
  for (uint64_t k = 0; k < 6; ++k) EXPECT_EQ(Job(id + k).state(), v1::CANCELLED) << k;
  EXPECT_EQ(PendingCount(), 0u);
  // Accounting has every task, once, with its task id, before and after archiving.
  auto check_accounting = [&] {
    v1::ListAccountingRequest acct;
    acct.add_job_ids(id);
    auto a = engine_->ListAccounting(Root(), acct, now_);
    ASSERT_TRUE(a.ok());
    ASSERT_EQ(a->jobs_size(), 6);
    for (int k = 0; k < 6; ++k) {
      EXPECT_EQ(a->jobs(k).id(), id + static_cast<uint64_t>(k));
      EXPECT_EQ(a->jobs(k).array().task_id(), static_cast<uint32_t>(k));
      EXPECT_EQ(a->jobs(k).state(), v1::CANCELLED);
    }
  };
  check_accounting();
  now_ += 61'000;
  engine_->Tick(now_);
  EXPECT_TRUE(Listed(0, true).empty()) << "archived";
  check_accounting();
}

TEST_F(ArrayTest, NoOneSplitsAnotherUsersArray) {
  v1::JobSpec spec = Gang(1, 1);
  spec.set_array("0-9");
  const uint64_t id = *Submit(spec, Alice());
  const size_t before = Stored().size();
  auto r = CancelOne(id + 4, Bob());
  ASSERT_EQ(r.results_size(), 1);
  EXPECT_EQ(r.results(0).code(), static_cast<int>(StatusCode::kPermissionDenied));
  v1::UpdateJobRequest hold;
  hold.set_action(v1::UpdateJobRequest::HOLD);
  hold.add_job_ids(id + 5);
  auto u = engine_->UpdateJob(Bob(), hold, now_);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->results(0).code(), static_cast<int>(StatusCode::kPermissionDenied));
  EXPECT_EQ(Stored().size(), before) << "a refused request split nothing off";
  EXPECT_EQ(Job(id + 4).state(), v1::PENDING);
  // The refusals are audited, as for any job of another user's.
  v1::ListAuditRequest chronological;
  chronological.set_oldest_first(true);
  auto audit = engine_->ListAudit(Root(), chronological, now_);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->entries_size(), 2);
  EXPECT_EQ(audit->entries(0).target(), "job " + std::to_string(id + 4));
  EXPECT_FALSE(audit->entries(0).allowed());
  EXPECT_EQ(audit->entries(1).action(), "hold");
  // A signal does not split either: a task that has not started cannot take one.
  v1::CancelJobRequest sig;
  sig.add_single_job_ids(id + 6);
  sig.set_signal(10);
  auto s = engine_->CancelJob(Alice(), sig, now_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->results(0).code(), static_cast<int>(StatusCode::kFailedPrecondition));
  EXPECT_EQ(Stored().size(), before);
}

TEST_F(ArrayTest, AThrottledArrayStartsNoMoreThanItsLimitFromOneRecord) {
  AllUp();
  v1::JobSpec spec = Gang(1, 1);
  spec.set_array("0-19%3");
  const uint64_t id = *Submit(spec, Alice());
  Pass();
  Pass();
  int running = 0;
  for (uint64_t k = 0; k < 20; ++k) running += Job(id + k).state() == v1::RUNNING;
  EXPECT_EQ(running, 3);
  EXPECT_EQ(Job(id + 3).reason(), "JobArrayTaskLimit");
  EXPECT_EQ(Job(id + 19).reason(), "JobArrayTaskLimit");
}

TEST_F(ArrayTest, ADependencyOnAnArrayWaitsForItsWaitingTasks) {
  AllUp();
  v1::JobSpec spec = Gang(1, 8);
  spec.set_array("0-5");  // 4 nodes: two tasks wait after the first pass
  const uint64_t arr = *Submit(spec, Alice());
  v1::JobSpec after = Gang(1, 1);
  after.set_dependency("afterok:" + std::to_string(arr));
  const uint64_t waiter = *Submit(after, Alice());
  Pass();
  for (uint64_t k = 0; k < 4; ++k) {
    const std::string node = Job(arr + k).nodes(0);
    Started(arr + k, node);
    Exited(arr + k, node, 0);
    Cleaned(arr + k, node);
  }
  Pass();
  EXPECT_EQ(Job(waiter).state(), v1::PENDING) << "tasks 4 and 5 have not run yet";
  for (uint64_t k = 4; k < 6; ++k) {
    ASSERT_EQ(Job(arr + k).state(), v1::RUNNING) << k;
    const std::string node = Job(arr + k).nodes(0);
    Started(arr + k, node);
    Exited(arr + k, node, 0);
    Cleaned(arr + k, node);
  }
  Pass();
  Pass();
  EXPECT_EQ(Job(waiter).state(), v1::RUNNING);
}

// A damaged store (or a hand-edited one) may hold a carrier whose waiting tasks overlap, run
// past its array, include itself, or include a task that has a record of its own: recovery keeps
// each task once, and no pass tries to start a task twice.
TEST_F(ArrayTest, RecoveryRepairsACarrierThatHoldsTasksItCannot) {
  v1::JobSpec spec = Gang(1, 1);
  spec.set_array("0-5");
  const uint64_t id = *Submit(spec, Alice());
  std::vector<v1::JobRecord> stored = Stored();
  ASSERT_EQ(stored.size(), 1u);
  v1::JobRecord carrier = stored[0];
  v1::JobRecord own = carrier;  // task 4 with a record of its own
  own.set_id(id + 4);
  own.clear_array_waiting();
  own.mutable_array()->set_task_id(4);
  carrier.clear_array_waiting();
  for (uint32_t v : {3u, 9u, 0u, 2u, 2u, 3u}) carrier.add_array_waiting(v);
  store::Mutation m;
  m.PutJob(carrier);
  m.PutJob(own);
  ASSERT_TRUE(store_.Commit(m).ok());
  Restart();
  AllUp();
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok())
      << engine_->CheckInvariantsForTest().ToString();
  const auto rows = Listed(id, /*brief=*/true);
  ASSERT_EQ(rows.size(), 6u);
  for (uint64_t k = 0; k < 6; ++k) {
    EXPECT_EQ(rows[k].id(), id + k);
    EXPECT_EQ(rows[k].array().task_id(), k);
  }
  EXPECT_EQ(PendingCount(), 6u);
  Pass();
  for (uint64_t k = 0; k < 6; ++k) EXPECT_EQ(Job(id + k).state(), v1::RUNNING) << k;
}

TEST_F(ArrayTest, AnotherUsersWaitingTaskIsHiddenWhereJobsArePrivate) {
  config_.private_data.jobs = true;
  Restart();
  v1::JobSpec spec = Gang(1, 1);
  spec.set_array("0-9");
  const uint64_t id = *Submit(spec, Alice());
  auto get = [&](const Caller& who, uint64_t job) {
    v1::GetJobRequest r;
    r.set_job_id(job);
    return engine_->GetJob(who, r).status();
  };
  EXPECT_EQ(get(Bob(), id + 7).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(get(Alice(), id + 7).ok());
  // Nor does a dependency on it tell Bob that it exists: the same answer as for no job at all.
  auto depend_on = [&](const std::string& dep, const Caller& who) {
    v1::JobSpec s = Gang(1, 1);
    s.set_dependency(dep);
    return Submit(s, who);
  };
  auto hidden = depend_on("afterok:" + std::to_string(id + 7), Bob());
  auto missing = depend_on("afterok:" + std::to_string(id + 5000), Bob());
  ASSERT_FALSE(hidden.ok());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(hidden.status().message(),
            "Job dependency problem: job " + std::to_string(id + 7) +
                " is not known (finished too long ago, or never submitted)");
  EXPECT_EQ(depend_on("afterany:" + std::to_string(id), Bob()).status().code(),
            StatusCode::kInvalidArgument)
      << "the array's own id";
  auto own = depend_on("afterok:" + std::to_string(id + 7), Alice());
  EXPECT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_TRUE(depend_on("afterok:" + std::to_string(id + 7), Root()).ok()) << "an admin sees all";
}

}  // namespace
}  // namespace muster::controller
