// The job manager through the engine: submission, the job state machine (ends, cancels, holds,
// requeues, signals), job arrays.
#include "engine_fixture.h"
#include "job_spec.h"

namespace muster::controller {
namespace {

TEST_F(EngineTest, RefusesWhatCanNeverRunAndPersistsNothing) {
  size_t commits = store_.commits();
  auto id = Submit(Gang(1, 9));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(id.status().message().find(
                "asks for 9 GPUs per node; the largest node in partition gpu has 8"),
            std::string::npos);
  v1::JobSpec bad;
  bad.add_partitions("nosuch");
  EXPECT_EQ(Submit(bad).status().code(), StatusCode::kNotFound);
  v1::JobSpec noshebang;
  noshebang.set_script("echo hi\n");
  EXPECT_EQ(Submit(noshebang).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.commits(), commits);
  EXPECT_EQ(*Submit(v1::JobSpec()), 1u) << "refused submissions use no job id";
}

TEST_F(EngineTest, FailedCommitRefusesTheSubmission) {
  store_.FailNextCommitsForTest(1);
  auto id = Submit(Gang(1, 1));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kInternal);
  v1::ListJobsRequest all;
  all.set_include_finished(true);
  EXPECT_EQ(engine_->ListJobs(Root(), all)->jobs_size(), 0);
  EXPECT_EQ(*Submit(Gang(1, 1)), 1u);
}

TEST_F(EngineTest, ANearlyFullDiskRefusesNewJobsWhileAdmittedOnesGoOn) {
  uint64_t free = uint64_t{1000} << 20;
  store_.GuardSpaceForTest(uint64_t{100} << 20,
                           [&free](const std::string&) -> Result<uint64_t> { return free; });
  AllUp();
  const uint64_t running = *Submit(Gang(1, 8));
  Pass();
  Run(running);
  const uint64_t queued = *Submit(Gang(4, 8));  // waits for node1

  free = uint64_t{60} << 20;  // below the reserve (100), above the floor (25)
  auto refused = Submit(Gang(1, 1));
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("job not accepted: the controller's state directory"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("60 MiB free"), std::string::npos);
  engine_->Tick(now_);
  v1::DiagnosticsResponse diag;
  engine_->FillDiagnostics(Root(), &diag);
  EXPECT_NE(diag.store_space_problem().find("new jobs are refused"), std::string::npos);

  // What was admitted goes on in the reserve: the running job ends and is accounted, the queued
  // one starts, a cancel is recorded.
  Exited(running, "node1", 0);
  EXPECT_EQ(Job(running).state(), v1::COMPLETED);
  CleanUp(running, 0);
  Pass();
  EXPECT_EQ(Job(queued).state(), v1::RUNNING);
  Flush();
  v1::CancelJobRequest cancel;
  cancel.add_job_ids(queued);
  ASSERT_EQ(engine_->CancelJob(Root(), cancel, now_)->results(0).code(), 0);
  auto told = Sent("node2");
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].terminate_job().reason(), "cancelled");

  // Back above the reserve but not by an eighth: still refused (no flapping at the mark).
  free = uint64_t{105} << 20;
  EXPECT_EQ(Submit(Gang(1, 1)).status().code(), StatusCode::kResourceExhausted);
  free = uint64_t{120} << 20;
  const uint64_t pending = *Submit(Gang(4, 8));  // waits: the cancelled gang still holds all
  engine_->Tick(now_);
  diag.Clear();
  engine_->FillDiagnostics(Root(), &diag);
  EXPECT_EQ(diag.store_space_problem(), "");

  // Below the floor nothing is written: a request's change is refused, not made in memory only.
  free = uint64_t{10} << 20;
  v1::CancelJobRequest late;
  late.add_job_ids(pending);
  auto r = engine_->CancelJob(Root(), late, now_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->results(0).code(), static_cast<int>(StatusCode::kResourceExhausted));
  EXPECT_EQ(Job(pending).state(), v1::PENDING);
}

TEST_F(EngineTest, ScriptLivesOutsideTheRecordAndIsReadBackAtLaunch) {
  AllUp();
  v1::JobSpec spec = Gang(1, 1);
  spec.set_script("#!/bin/sh\necho payload\n");
  spec.add_environment("FOO=bar");
  auto id = Submit(spec);
  ASSERT_TRUE(id.ok());
  auto loaded = store_.LoadAll();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->jobs.size(), 1u);
  EXPECT_TRUE(loaded->jobs[0].spec().script().empty()) << "the record must stay small";
  Pass();
  auto sent = Sent(Job(*id).nodes(0));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].launch_job().spec().script(), "#!/bin/sh\necho payload\n");
  ASSERT_EQ(sent[0].launch_job().spec().environment_size(), 1);

  // A payload that cannot be read back is launched without a script (the agent refuses it and
  // reports the failure) rather than with something else.
  auto second = Submit(spec);
  ASSERT_TRUE(second.ok());
  store_.CorruptForTest(store::Family::kJobPayload, store::Mutation::JobKey(*second));
  Pass();
  sent = Sent(Job(*second).nodes(0));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].launch_job().spec().script().empty());
}

TEST_F(EngineTest, CompletesFailsAndHoldsResourcesUntilEveryNodeIsClean) {
  AllUp();
  auto ok = *Submit(Gang(2, 8));
  auto bad = *Submit(Gang(2, 8));
  Pass();
  Flush();
  Exited(ok, "node1", 0);
  v1::JobInfo j = Job(ok);
  EXPECT_EQ(j.state(), v1::COMPLETED);
  EXPECT_TRUE(j.completing());
  // Every node of the job is told to clean up.
  auto t1 = Sent("node1");
  auto t2 = Sent("node2");
  ASSERT_EQ(t1.size(), 1u);
  ASSERT_EQ(t2.size(), 1u);
  EXPECT_TRUE(t2[0].has_terminate_job());
  // A third job needing node1/node2 cannot start before both are clean.
  auto next = *Submit(Gang(4, 8));
  Pass();
  EXPECT_EQ(Job(next).state(), v1::PENDING);
  Cleaned(ok, "node1");
  Pass();
  EXPECT_EQ(Job(next).state(), v1::PENDING);
  Cleaned(ok, "node2");
  EXPECT_FALSE(Job(ok).completing());
  Exited(bad, "node3", 3);
  EXPECT_EQ(Job(bad).state(), v1::FAILED);
  EXPECT_EQ(Job(bad).exit_code(), 3);
  EXPECT_EQ(Job(bad).reason(), "NonZeroExitCode");
  Cleaned(bad, "node3");
  Cleaned(bad, "node4");
  Pass();
  EXPECT_EQ(Job(next).state(), v1::RUNNING);
}

TEST_F(EngineTest, ExitFromTheWrongNodeOrAnOldRunIsIgnored) {
  AllUp();
  auto id = *Submit(Gang(2, 1));
  Pass();
  Exited(id, "node2", 0);  // not the batch node
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  v1::AgentMessage m;
  m.mutable_batch_exited()->set_job_id(id);
  m.mutable_batch_exited()->set_run(5);
  Agent("node1", m);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(EngineTest, TimeoutAndSignals) {
  AllUp();
  auto a = *Submit(Gang(1, 1));
  auto b = *Submit(Gang(1, 1));
  Pass();
  Exited(a, Job(a).nodes(0), 0, 15, true);
  EXPECT_EQ(Job(a).state(), v1::TIMEOUT);
  EXPECT_EQ(Job(a).exit_signal(), 15);
  Exited(b, Job(b).nodes(0), 0, 9);
  EXPECT_EQ(Job(b).state(), v1::FAILED);
}

TEST_F(EngineTest, CancelPendingRunningAndOthersJobs) {
  AllUp();
  auto running = *Submit(Gang(4, 8), Alice());
  auto pending = *Submit(Gang(1, 1), Alice());
  Pass();
  Flush();
  v1::CancelJobRequest byBob;
  byBob.add_job_ids(running);
  auto r = engine_->CancelJob(Bob(), byBob, now_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->results(0).code(), static_cast<int>(StatusCode::kPermissionDenied));
  EXPECT_EQ(Job(running).state(), v1::RUNNING);

  v1::CancelJobRequest req;
  req.add_job_ids(pending);
  req.add_job_ids(running);
  req.add_job_ids(999);
  r = engine_->CancelJob(Alice(), req, now_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->results(0).code(), 0);
  EXPECT_EQ(r->results(1).code(), 0);
  EXPECT_EQ(r->results(2).code(), static_cast<int>(StatusCode::kNotFound));
  EXPECT_EQ(Job(pending).state(), v1::CANCELLED);
  // Running: still running until the batch script is gone, and every node was told.
  EXPECT_EQ(Job(running).state(), v1::RUNNING);
  for (const char* n : {"node1", "node2", "node3", "node4"}) {
    auto s = Sent(n);
    ASSERT_EQ(s.size(), 1u) << n;
    EXPECT_EQ(s[0].terminate_job().reason(), "cancelled");
  }
  Exited(running, "node1", 0, 15);
  EXPECT_EQ(Job(running).state(), v1::CANCELLED);
  // An admin may cancel anyone's job.
  auto other = *Submit(Gang(1, 1), Bob());
  v1::CancelJobRequest ops;
  ops.add_job_ids(other);
  r = engine_->CancelJob({5, 5, "ops", true}, ops, now_);
  EXPECT_EQ(r->results(0).code(), 0);
}

TEST_F(EngineTest, HoldReleaseAndRequeueLikeScontrol) {
  AllUp();
  auto update = [&](Caller who, uint64_t id, v1::UpdateJobRequest::Action a) {
    v1::UpdateJobRequest r;
    r.add_job_ids(id);
    r.set_action(a);
    auto resp = engine_->UpdateJob(who, r, now_);
    EXPECT_TRUE(resp.ok());
    return resp->results(0).code();
  };
  auto id = *Submit(Gang(1, 8), Alice());
  EXPECT_EQ(update(Bob(), id, v1::UpdateJobRequest::HOLD),
            static_cast<int>(StatusCode::kPermissionDenied));
  EXPECT_EQ(update(Alice(), id, v1::UpdateJobRequest::HOLD), 0);
  Pass();
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_EQ(Job(id).reason(), "JobHeldUser");
  EXPECT_EQ(update(Alice(), id, v1::UpdateJobRequest::RELEASE), 0);
  Pass();
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  const std::string node = Job(id).nodes(0);
  EXPECT_EQ(update(Alice(), id, v1::UpdateJobRequest::HOLD),
            static_cast<int>(StatusCode::kFailedPrecondition));
  Started(id, node);
  Flush();
  EXPECT_EQ(update(Alice(), id, v1::UpdateJobRequest::REQUEUE), 0);
  EXPECT_EQ(Job(id).state(), v1::PENDING);
  EXPECT_EQ(Job(id).requeue_count(), 1u);
  EXPECT_TRUE(Sent(node).at(0).has_terminate_job());
  // An admin's hold is the admin's to release.
  auto held = *Submit(Gang(1, 1), Alice());
  EXPECT_EQ(update(Root(), held, v1::UpdateJobRequest::HOLD), 0);
  EXPECT_EQ(Job(held).reason(), "JobHeldAdmin");
  EXPECT_EQ(update(Alice(), held, v1::UpdateJobRequest::RELEASE),
            static_cast<int>(StatusCode::kPermissionDenied));
  v1::JobSpec no = Gang(1, 1);
  no.set_no_requeue(true);
  auto fixed = *Submit(no, Alice());
  Pass();
  EXPECT_EQ(update(Alice(), fixed, v1::UpdateJobRequest::REQUEUE),
            static_cast<int>(StatusCode::kFailedPrecondition));
}

TEST_F(EngineTest, ASignalReachesEveryNodeAndLeavesTheJobRunning) {
  AllUp();
  auto id = *Submit(Gang(2, 8), Alice());
  Pass();
  auto pending = *Submit(Gang(4, 8), Alice());
  Pass();
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  Flush();
  v1::CancelJobRequest r;
  r.add_job_ids(id);
  r.add_job_ids(pending);
  r.set_signal(SIGUSR1);
  r.set_batch_only(true);
  auto resp = engine_->CancelJob(Alice(), r, now_);
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(resp->results(0).code(), 0);
  EXPECT_EQ(resp->results(1).message(), "Job is pending execution");
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_FALSE(Job(id).completing());
  const auto first = Sent(Job(id).nodes(0));
  const auto second = Sent(Job(id).nodes(1));
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0].signal_job().signal(), SIGUSR1);
  EXPECT_TRUE(first[0].signal_job().batch()) << "the batch script runs on the first node";
  EXPECT_FALSE(second[0].signal_job().batch());
  EXPECT_FALSE(first[0].signal_job().steps()) << "--batch: not the steps";
}

TEST(ArraySpecTest, ParsesSlurmsForms) {
  v1::ArrayTask a;
  auto t = ParseArraySpec("0-15:4%2", 1001, &a);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, (std::vector<uint32_t>{0, 4, 8, 12}));
  EXPECT_EQ(a.count(), 4u);
  EXPECT_EQ(a.min(), 0u);
  EXPECT_EQ(a.max(), 12u);
  EXPECT_EQ(a.step(), 4u);
  EXPECT_EQ(a.max_running(), 2u);
  EXPECT_EQ(a.spec(), "0-15:4%2");
  t = ParseArraySpec("5,1-3,3", 1001, &a);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (std::vector<uint32_t>{1, 2, 3, 5}));
  EXPECT_EQ(a.step(), 1u);
  EXPECT_EQ(a.max_running(), 0u);
  for (const char* bad : {"", "5-3", "1-2000", "a-b", "1-3%0", "1-3:0", "1,,x", "-1", "1-3%"}) {
    EXPECT_EQ(ParseArraySpec(bad, 1001, &a).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(EngineTest, AJobArrayIsOneJobPerTaskThrottledByItsLimit) {
  AllUp();
  v1::JobSpec spec = Gang(1, 1);
  spec.set_array("1-5%2");
  auto id = *Submit(spec, Alice());
  v1::ListJobsRequest req;
  req.add_job_ids(id);  // the array's id lists every task
  auto list = engine_->ListJobs(Root(), req);
  ASSERT_EQ(list->jobs_size(), 5);
  for (int k = 0; k < 5; ++k) {
    const v1::JobInfo& j = list->jobs(k);
    EXPECT_EQ(j.id(), id + static_cast<uint64_t>(k));
    EXPECT_EQ(j.array().array_job_id(), id);
    EXPECT_EQ(j.array().task_id(), static_cast<uint32_t>(k + 1));
    EXPECT_EQ(j.array().count(), 5u);
  }
  EXPECT_EQ(*Submit(Gang(1, 1)), id + 5) << "the next job's id follows the array's";
  Pass();
  int running = 0;
  for (int k = 0; k < 5; ++k) running += Job(id + static_cast<uint64_t>(k)).state() == v1::RUNNING;
  EXPECT_EQ(running, 2) << "%2: two tasks at a time, though everything fits";
  EXPECT_EQ(Job(id + 2).reason(), "JobArrayTaskLimit");
  // The launch carries the array for SLURM_ARRAY_* and %A/%a.
  bool launched = false;
  for (const auto& o : engine_->TakeOutgoing()) {
    if (o.message.has_launch_job() && o.message.launch_job().job_id() == id + 1) {
      launched = true;
      EXPECT_EQ(o.message.launch_job().array().task_id(), 2u);
      EXPECT_EQ(o.message.launch_job().array().array_job_id(), id);
    }
  }
  EXPECT_TRUE(launched);
  // One ends: the next task starts.
  Started(id, "node1");
  const std::string node = Job(id).nodes(0);
  Exited(id, node, 0);
  Cleaned(id, node);
  Pass();
  EXPECT_EQ(Job(id + 2).state(), v1::RUNNING);
  EXPECT_EQ(Job(id + 3).state(), v1::PENDING);
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok());
}

TEST_F(EngineTest, CancellingAnArrayIdCancelsEveryTaskButASingleIdOnlyItself) {
  v1::JobSpec spec = Gang(1, 1);
  spec.set_array("0-3");
  auto id = *Submit(spec, Alice());
  v1::CancelJobRequest one;
  one.add_single_job_ids(id);  // task 0, whose job id is the array's
  ASSERT_TRUE(engine_->CancelJob(Alice(), one, now_).ok());
  EXPECT_EQ(Job(id).state(), v1::CANCELLED);
  EXPECT_EQ(Job(id + 1).state(), v1::PENDING);
  v1::CancelJobRequest all;
  all.add_job_ids(id);
  auto r = engine_->CancelJob(Alice(), all, now_);
  ASSERT_TRUE(r.ok());
  // One result per record: task 0's own, and the one tasks 1-3 still wait in.
  EXPECT_EQ(r->results_size(), 2);
  for (uint64_t k = 1; k < 4; ++k) EXPECT_EQ(Job(id + k).state(), v1::CANCELLED);
  // Accounting lists the array's tasks by its id.
  v1::ListAccountingRequest acct;
  acct.add_job_ids(id);
  auto a = engine_->ListAccounting(Root(), acct, now_);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->jobs_size(), 4);
}

// A cancel naming an array's id over and over once produced one result per task per mention:
// a small request, a reply of millions of rows. Each job is acted on once, and a request names
// at most kMaxJobIdsPerRequest ids.
TEST_F(EngineTest, ACancelOrUpdateActsOnEachJobOnceAndNamesBoundedIds) {
  v1::JobSpec spec = Gang(1, 1);
  spec.set_array("0-99");
  auto id = *Submit(spec, Alice());
  v1::CancelJobRequest repeated;
  for (int i = 0; i < 10'000; ++i) repeated.add_job_ids(id);
  repeated.set_signal(10);  // a signal to pending jobs: each answers, and nothing changes
  auto r = engine_->CancelJob(Alice(), repeated, now_);
  ASSERT_TRUE(r.ok());
  // The array waits as one record, which answers for its tasks.
  EXPECT_EQ(r->results_size(), 1) << "one result per record, however often the array is named";

  v1::CancelJobRequest too_many;
  for (int i = 0; i <= 10'000; ++i) too_many.add_single_job_ids(id);
  r = engine_->CancelJob(Alice(), too_many, now_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("10001 job ids in one request; at most 10000"),
            std::string::npos);
  EXPECT_EQ(Job(id).state(), v1::PENDING) << "a refused request changes nothing";

  v1::UpdateJobRequest hold;
  hold.set_action(v1::UpdateJobRequest::HOLD);
  for (int i = 0; i < 50; ++i) hold.add_job_ids(id + 1);
  auto u = engine_->UpdateJob(Alice(), hold, now_);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->results_size(), 1);
}

// An array's script and environment are stored once, under the array's id, not once per task
// (a 1,000-task array of a 4 MiB script was 4 GB); every task still launches with them, and the
// shared copy goes with the last task to be archived.
TEST_F(EngineTest, AnArraysScriptIsStoredOnceAndOutlivesAllButItsLastTask) {
  AllUp();
  v1::JobSpec spec = Gang(1, 8);
  spec.set_array("0-3");
  const std::string script = "#!/bin/sh\n# " + std::string(100'000, 's') + "\n";
  spec.set_script(script);
  spec.add_environment("FROM=submit");
  const uint64_t id = *Submit(spec, Alice());
  ASSERT_TRUE(store_.ReadJobPayload(id).ok());
  for (uint64_t k = 1; k < 4; ++k) {
    EXPECT_EQ(store_.ReadJobPayload(id + k).status().code(), StatusCode::kNotFound)
        << "task " << k << " has a copy of its own";
  }
  Pass();
  std::map<uint64_t, std::string> node_of;
  for (uint64_t k = 0; k < 4; ++k) {
    node_of[id + k] = Job(id + k).nodes(0);
    bool launched = false;
    for (const auto& m : Sent(node_of[id + k])) {
      if (!m.has_launch_job() || m.launch_job().job_id() != id + k) continue;
      launched = true;
      EXPECT_EQ(m.launch_job().spec().script(), script);
      EXPECT_EQ(m.launch_job().spec().environment(0), "FROM=submit");
    }
    EXPECT_TRUE(launched) << "task " << k;
  }
  // Tasks end and, past the retention, are archived.
  auto end_and_archive = [&](std::initializer_list<uint64_t> tasks) {
    for (uint64_t k : tasks) {
      Exited(id + k, node_of[id + k], 0);
      Cleaned(id + k, node_of[id + k]);
    }
    now_ += 61'000;
    AllUp();
    engine_->Tick(now_);
  };
  end_and_archive({0, 1});
  EXPECT_TRUE(store_.ReadJobPayload(id).ok()) << "removed while tasks of the array still live";
  end_and_archive({2, 3});
  EXPECT_EQ(store_.ReadJobPayload(id).status().code(), StatusCode::kNotFound)
      << "the array's script outlived all of its tasks";
}

}  // namespace
}  // namespace muster::controller
