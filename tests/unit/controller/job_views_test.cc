// What clients see: squeue's brief rows, sacct over live and archived jobs, retention.
#include "engine_fixture.h"

namespace muster::controller {
namespace {

TEST_F(EngineTest, ABriefListCarriesWhatSqueueShowsAndNothingHeavy) {
  AllUp();
  v1::JobSpec spec = Gang(2, 4);
  spec.set_name("train");
  spec.set_ntasks(8);
  auto id = *Submit(spec, Alice());
  Pass();
  v1::ListJobsRequest req;
  req.set_brief(true);
  auto brief = engine_->ListJobs(Root(), req);
  ASSERT_TRUE(brief.ok());
  ASSERT_EQ(brief->jobs_size(), 1);
  const v1::JobInfo& b = brief->jobs(0);
  const v1::JobInfo full = Job(id);
  EXPECT_EQ(b.name(), "train");
  EXPECT_EQ(b.user(), "alice");
  EXPECT_EQ(b.state(), v1::RUNNING);
  EXPECT_EQ(b.nodes_size(), 2);
  EXPECT_EQ(b.num_nodes(), full.num_nodes());
  EXPECT_EQ(b.num_tasks(), full.num_tasks());
  EXPECT_EQ(b.cpus_total(), full.cpus_total());
  EXPECT_EQ(b.gpus_per_node(), 4u);
  EXPECT_EQ(b.priority(), full.priority());
  EXPECT_EQ(b.start_time_ms(), full.start_time_ms());
  EXPECT_FALSE(full.stdout_path().empty());
  EXPECT_TRUE(b.stdout_path().empty()) << "no output paths in a brief list";
  EXPECT_EQ(b.allocation().nodes_size(), 0) << "no allocation details in a brief list";
  EXPECT_EQ(b.partition(), full.partition());

  // A pending job's row: the cached spec part and the live part agree with the full view.
  v1::JobSpec held = Gang(3, 2);
  held.set_hold(true);
  held.set_ntasks(6);
  held.set_cpus_per_task(2);
  auto held_id = *Submit(held, Alice());
  req.add_job_ids(held_id);
  auto pending = engine_->ListJobs(Root(), req);
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->jobs_size(), 1);
  const v1::JobInfo& p = pending->jobs(0);
  const v1::JobInfo pfull = Job(held_id);
  EXPECT_EQ(p.id(), held_id);
  EXPECT_EQ(p.state(), v1::PENDING);
  EXPECT_EQ(p.reason(), "JobHeldUser");
  EXPECT_EQ(p.partition(), "gpu");
  EXPECT_EQ(p.nodes_size(), 0);
  EXPECT_EQ(p.num_nodes(), 3u);
  EXPECT_EQ(p.num_tasks(), pfull.num_tasks());
  EXPECT_EQ(p.cpus_total(), 12u);
  EXPECT_EQ(p.cpus_total(), pfull.cpus_total());
  EXPECT_EQ(p.submit_time_ms(), pfull.submit_time_ms());
  EXPECT_EQ(p.time_limit_ms(), pfull.time_limit_ms());
}

TEST_F(EngineTest, FinishedJobsAreArchivedAfterRetention) {
  AllUp();
  auto id = *Submit(Gang(1, 1));
  Pass();
  std::string n = Job(id).nodes(0);
  Exited(id, n, 0);
  Cleaned(id, n);
  now_ += 59'000;
  engine_->Tick(now_);
  EXPECT_EQ(Job(id).state(), v1::COMPLETED);
  now_ += 2'000;
  AllUp();
  engine_->Tick(now_);
  v1::GetJobRequest g;
  g.set_job_id(id);
  EXPECT_EQ(engine_->GetJob(Root(), g).status().code(), StatusCode::kNotFound);
  auto h = store_.ReadHistory(10);
  ASSERT_EQ(h->size(), 1u);
  EXPECT_EQ((*h)[0].id(), id);
  // squeue's flat walk order lost the archived job with the map.
  EXPECT_TRUE(engine_->CheckInvariantsForTest().ok())
      << engine_->CheckInvariantsForTest().ToString();
  EXPECT_EQ(engine_->ListJobs(Root(), v1::ListJobsRequest())->jobs_size(), 0);
}

TEST_F(EngineTest, AccountingFiltersLiveAndArchivedJobsAndForgetsAfterTheRetention) {
  config_.scheduling.accounting_retention_days = 2;
  Restart();
  AllUp();
  auto a = *Submit(Gang(1, 1), Alice());
  auto b = *Submit(Gang(1, 1), Bob());
  Pass();
  Started(a, Job(a).nodes(0));
  Exited(a, Job(a).nodes(0), 0);
  Cleaned(a, Job(a).nodes(0));
  now_ += 120'000;
  engine_->Tick(now_);  // a is archived
  auto c = *Submit(Gang(1, 1), Alice());
  auto ids = [&](v1::ListAccountingRequest q) {
    std::vector<uint64_t> out;
    auto r = engine_->ListAccounting(Root(), q, now_);
    EXPECT_TRUE(r.ok());
    for (const auto& j : r->jobs()) out.push_back(j.id());
    return out;
  };
  EXPECT_EQ(ids({}), (std::vector<uint64_t>{a, b, c}));
  v1::ListAccountingRequest q;
  q.add_users("alice");
  EXPECT_EQ(ids(q), (std::vector<uint64_t>{a, c}));
  q.add_states(v1::COMPLETED);
  EXPECT_EQ(ids(q), (std::vector<uint64_t>{a}));
  v1::ListAccountingRequest window;
  window.set_start_ms(now_ - 1000);  // a ended before the window
  EXPECT_EQ(ids(window), (std::vector<uint64_t>{b, c}));
  window.set_start_ms(0);
  window.set_end_ms(now_ - 200'000);  // before anything was submitted
  EXPECT_TRUE(ids(window).empty());
  // After the retention, the archived record is gone; live jobs stay.
  now_ += 3LL * 86'400'000;
  engine_->Tick(now_);
  v1::ListAccountingRequest byid;
  byid.add_job_ids(a);
  EXPECT_TRUE(ids(byid).empty());
  EXPECT_EQ(ids({}), (std::vector<uint64_t>{b, c}));
}

// sacct's reply comes in pages of 1 MiB (or 20,000 jobs): archived and live jobs, and an array's
// waiting tasks, each once and in id order across the pages; a limit stops the pages.
TEST_F(EngineTest, AccountingComesInBoundedPagesThatTogetherListEveryJobOnce) {
  const std::string name(900, 'n');  // about 1,000 jobs to a page
  auto submit = [&](const std::string& array = "") {
    v1::JobSpec s = Gang(1, 1);
    s.set_hold(true);
    s.set_name(name);
    s.set_array(array);
    auto id = Submit(s, Alice());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  };
  auto cancel = [&](uint64_t from, uint64_t to) {
    v1::CancelJobRequest req;
    for (uint64_t id = from; id <= to; ++id) req.add_job_ids(id);
    ASSERT_TRUE(engine_->CancelJob(Root(), req, now_).ok());
  };
  const uint64_t first = submit();
  for (int i = 1; i < 1500; ++i) submit();
  cancel(first, first + 1499);
  now_ += 120'000;
  engine_->Tick(now_);                     // the first 1,500 are archived
  const uint64_t array = submit("0-499");  // 500 tasks waiting in one live record
  for (int i = 0; i < 700; ++i) submit();
  std::vector<uint64_t> want;
  for (uint64_t id = first; id < array + 500 + 700; ++id) want.push_back(id);

  v1::ListAccountingRequest req;
  req.set_without_steps(true);
  std::vector<uint64_t> got;
  int pages = 0;
  for (;;) {
    auto r = engine_->ListAccounting(Root(), req, now_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ++pages;
    EXPECT_LE(r->ByteSizeLong(), (1u << 20) + 4096) << "page " << pages;
    for (const auto& j : r->jobs()) got.push_back(j.id());
    if (r->next_after_id() == 0) break;
    ASSERT_GT(r->next_after_id(), req.after_id());
    req.set_after_id(r->next_after_id());
    ASSERT_LT(pages, 100);
  }
  EXPECT_EQ(got, want);
  EXPECT_GE(pages, 3);
  // A limit: the first jobs, and no page after them.
  v1::ListAccountingRequest few;
  few.set_limit(10);
  auto r = engine_->ListAccounting(Root(), few, now_);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->jobs_size(), 10);
  EXPECT_EQ(r->jobs(9).id(), first + 9);
  EXPECT_EQ(r->next_after_id(), 0u);
}

// sacct's two parts: the live jobs read on the strand, the archive scanned later on another
// thread. A job archived in between is listed once, as it was when the query began.
TEST_F(EngineTest, AccountingScanLaterListsAJobArchivedMeanwhileOnce) {
  AllUp();
  auto old_job = *Submit(Gang(1, 1));
  auto id = *Submit(Gang(1, 1));
  Pass();
  for (uint64_t j : {old_job, id}) {
    const std::string n = Job(j).nodes(0);
    Exited(j, n, j == id ? 3 : 0);
    Cleaned(j, n);
  }
  now_ += 61'000;  // past finished_job_retention_ms: both are archived ...
  AllUp();
  engine_->Tick(now_);
  auto young = *Submit(Gang(1, 1));  // ... and one live job
  v1::ListAccountingRequest req;
  req.set_start_ms(now_ - 3'600'000);
  Engine::AccountingQuery q = engine_->PrepareAccounting(Root(), req, now_);
  EXPECT_EQ(q.live.size(), 1u);
  EXPECT_TRUE(q.live.count(young));
  // The live job ends and is archived before the scan runs.
  v1::CancelJobRequest c;
  c.add_job_ids(young);
  ASSERT_TRUE(engine_->CancelJob(Root(), c, now_).ok());
  now_ += 61'000;
  AllUp();
  engine_->Tick(now_);
  auto resp = Engine::ScanAccounting(q);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  ASSERT_EQ(resp->jobs_size(), 3);
  EXPECT_EQ(resp->jobs(0).id(), old_job);
  EXPECT_EQ(resp->jobs(1).id(), id);
  EXPECT_EQ(resp->jobs(1).exit_code(), 3);
  EXPECT_EQ(resp->jobs(2).id(), young);
  EXPECT_EQ(resp->jobs(2).state(), v1::PENDING) << "as it was when the query began";
}

}  // namespace
}  // namespace muster::controller
