// Tenants in a replay: the trace's accounts become the config's with equal shares (folded to the
// heaviest K), fair share then orders the queue, and GPU quotas either hold each account to its
// guarantee or lend its idle GPUs and take them back by preemption, with the figures that show
// each (usage over time, waits within the guarantee, preemptions and the GPU time they lost).
#include "muster/sim/tenants.h"

#include <gtest/gtest.h>

#include <sstream>

#include "muster/sim/cluster.h"
#include "muster/sim/experiment.h"
#include "muster/sim/metrics.h"
#include "muster/sim/plot.h"
#include "muster/sim/replay.h"

namespace muster::sim {
namespace {

const bool kQuiet = (QuietControllerLogs(), true);

// A job starts in the pass after the event that frees its resources: milliseconds later.
constexpr double kPassMs = 1000;

Config Cluster(uint32_t nodes, uint32_t cpus, uint32_t gpus) {
  ClusterShape s;
  s.nodes = nodes;
  s.cpus_per_node = cpus;
  s.gpus_per_node = gpus;
  auto c = ShapeToConfig(s);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

SimJob Job(int64_t id, int64_t submit_s, int64_t run_s, uint32_t procs, const std::string& user,
           const std::string& account, uint32_t gpus = 0) {
  SimJob j;
  j.trace_id = id;
  j.submit_s = submit_s;
  j.run_s = run_s;
  j.req_time_s = run_s;
  j.procs = procs;
  j.gpus = gpus;
  j.user = user;
  j.account = account;
  return j;
}

const AccountConfig* Find(const Config& c, const std::string& name) {
  for (const AccountConfig& a : c.accounts) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

Config WithOrder(Config c, const std::string& policy) {
  auto p = ParsePolicy(policy);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return WithPolicy(std::move(c), *p);
}

TEST(TenantsTest, TheTracesAccountsGetEqualSharesAndTheirUsers) {
  std::vector<SimJob> jobs = {Job(1, 0, 10, 1, "ann", "vision"), Job(2, 0, 10, 1, "bob", "nlp"),
                              Job(3, 0, 10, 1, "amy", "vision"), Job(4, 0, 10, 1, "ann", "vision"),
                              Job(5, 0, 10, 1, "cid", "")};
  auto c = AddTenants(Cluster(2, 1, 0), jobs, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->accounts.size(), 3u);
  const AccountConfig* vision = Find(*c, "vision");
  ASSERT_NE(vision, nullptr);
  EXPECT_EQ(vision->shares, 1u);
  EXPECT_EQ(vision->parent, "root");
  EXPECT_EQ(vision->users, (std::vector<std::string>{"ann", "amy"}));
  EXPECT_TRUE(vision->quotas.empty());
  ASSERT_NE(Find(*c, "nlp"), nullptr);
  // A job with no account charges "others", where its user is.
  ASSERT_NE(Find(*c, kOthersAccount), nullptr);
  EXPECT_EQ(Find(*c, kOthersAccount)->users, (std::vector<std::string>{"cid"}));
  EXPECT_EQ(jobs[4].account, kOthersAccount);
  EXPECT_EQ(jobs[0].account, "vision");
}

TEST(TenantsTest, FoldsAllButTheHeaviestIntoOthers) {
  // By processors x run time: big 100, mid 40, small 10 and tiny 1.
  std::vector<SimJob> jobs = {Job(1, 0, 10, 1, "u1", "small"), Job(2, 0, 50, 2, "u2", "big"),
                              Job(3, 0, 20, 2, "u3", "mid"), Job(4, 0, 1, 1, "u4", "tiny")};
  TenantOptions o;
  o.max_accounts = 3;
  auto c = AddTenants(Cluster(2, 2, 0), jobs, o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->accounts.size(), 3u);
  EXPECT_NE(Find(*c, "big"), nullptr);
  EXPECT_NE(Find(*c, "mid"), nullptr);
  EXPECT_EQ(Find(*c, "small"), nullptr);
  EXPECT_EQ(jobs[0].account, kOthersAccount);
  EXPECT_EQ(jobs[3].account, kOthersAccount);
  EXPECT_EQ(Find(*c, kOthersAccount)->users, (std::vector<std::string>{"u1", "u4"}));
  // One account: everything in "others".
  std::vector<SimJob> one = {Job(1, 0, 10, 1, "u1", "a"), Job(2, 0, 10, 1, "u2", "b")};
  o.max_accounts = 1;
  c = AddTenants(Cluster(2, 2, 0), one, o);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->accounts.size(), 1u);
  EXPECT_EQ(c->accounts[0].name, kOthersAccount);
  EXPECT_EQ(c->accounts[0].users, (std::vector<std::string>{"u1", "u2"}));
  // As many accounts as allowed: every one keeps its name.
  std::vector<SimJob> again = {Job(1, 0, 10, 1, "u1", "a"), Job(2, 0, 10, 1, "u2", "b")};
  o.max_accounts = 2;
  c = AddTenants(Cluster(2, 2, 0), again, o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Find(*c, "a"), nullptr);
  EXPECT_NE(Find(*c, "b"), nullptr);
  EXPECT_EQ(Find(*c, kOthersAccount), nullptr);
}

TEST(TenantsTest, QuotasSplitEachGpuTypeEvenlyAndLendOnlyInACohort) {
  std::vector<SimJob> jobs = {Job(1, 0, 10, 1, "u1", "a", 1), Job(2, 0, 10, 1, "u2", "b", 1),
                              Job(3, 0, 10, 1, "u3", "c", 1)};
  TenantOptions o;
  o.quotas = QuotaMode::kLend;
  auto c = AddTenants(Cluster(5, 8, 2), jobs, o);  // 10 GPUs of type "gpu"
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->accounts.size(), 3u);
  EXPECT_EQ(Find(*c, "a")->quotas.at("gpu").guaranteed, 4u) << "the remainder to the first";
  EXPECT_EQ(Find(*c, "b")->quotas.at("gpu").guaranteed, 3u);
  EXPECT_EQ(Find(*c, "c")->quotas.at("gpu").guaranteed, 3u);
  for (const AccountConfig& a : c->accounts) {
    EXPECT_EQ(a.cohort, "tenants");
    EXPECT_FALSE(a.quotas.at("gpu").max.has_value()) << "as far as the cohort lends";
  }
  // Two types of 4 GPUs each: each type's spare GPU goes to the next account in turn.
  Config two = Cluster(4, 8, 2);
  two.nodes[0].gpu_type = two.nodes[1].gpu_type = "a100";
  c = AddTenants(two, jobs, o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(Find(*c, "a")->quotas.at("a100").guaranteed, 2u);
  EXPECT_EQ(Find(*c, "b")->quotas.at("a100").guaranteed, 1u);
  EXPECT_EQ(Find(*c, "a")->quotas.at("gpu").guaranteed, 1u);
  EXPECT_EQ(Find(*c, "b")->quotas.at("gpu").guaranteed, 2u);
  EXPECT_EQ(Find(*c, "c")->quotas.at("gpu").guaranteed, 1u);

  o.quotas = QuotaMode::kStrict;
  c = AddTenants(Cluster(5, 8, 2), jobs, o);
  ASSERT_TRUE(c.ok());
  for (const AccountConfig& a : c->accounts) EXPECT_TRUE(a.cohort.empty());
}

TEST(TenantsTest, RefusesWhatItCannotMake) {
  std::vector<SimJob> jobs = {Job(1, 0, 10, 1, "u1", "a")};
  Config named = Cluster(1, 1, 0);
  named.accounts.push_back(AccountConfig{.name = "site"});
  auto c = AddTenants(named, jobs, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("names accounts already"), std::string::npos);

  TenantOptions o;
  o.quotas = QuotaMode::kStrict;
  c = AddTenants(Cluster(1, 1, 0), jobs, o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("no GPUs"), std::string::npos);

  std::vector<SimJob> bad = {Job(1, 0, 10, 1, "u1", "a b")};
  c = AddTenants(Cluster(1, 1, 0), bad, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'a b'"), std::string::npos);
  bad = {Job(1, 0, 10, 1, "u/1", "a")};
  EXPECT_FALSE(AddTenants(Cluster(1, 1, 0), bad, {}).ok());

  bad = {Job(1, 0, 10, 1, "u1", "root")};
  c = AddTenants(Cluster(1, 1, 0), bad, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("root"), std::string::npos);

  // Three accounts and two GPUs: a quota of 0 would keep one from ever running.
  std::vector<SimJob> three = {Job(1, 0, 10, 1, "u1", "a", 1), Job(2, 0, 10, 1, "u2", "b", 1),
                               Job(3, 0, 10, 1, "u3", "c", 1)};
  c = AddTenants(Cluster(1, 2, 2), three, o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("equal:K"), std::string::npos) << c.status().message();

  EXPECT_FALSE(ParseQuotaMode("borrow").ok());
  EXPECT_EQ(*ParseQuotaMode("lend"), QuotaMode::kLend);
}

// One CPU; "heavy" queues ten 1,000-second jobs at 0, "light" one at 50 s. In arrival order the
// light job waits for all ten; with equal shares fair share starts it next (usage is charged at
// the controller's tick, every 10 virtual minutes: by 1,000 s heavy has been charged).
TEST(TenantsTest, FairShareServesTheLightAccountFirst) {
  std::vector<SimJob> jobs;
  for (int i = 0; i < 10; ++i) jobs.push_back(Job(i + 1, 0, 1000, 1, "hank", "heavy"));
  jobs.push_back(Job(11, 50, 1000, 1, "lena", "light"));
  auto tenants = AddTenants(Cluster(1, 1, 0), jobs, {});
  ASSERT_TRUE(tenants.ok()) << tenants.status().ToString();

  auto fair = Replay(WithOrder(*tenants, "muster"), jobs);
  ASSERT_TRUE(fair.ok()) << fair.status().ToString();
  EXPECT_EQ(tenants->billing.cpu, 1) << "no GPUs: CPUs are billed";
  EXPECT_NEAR(fair->jobs[10].start_ms, 1'000'000, kPassMs)
      << "it goes when the first heavy job ends";
  auto fcfs = Replay(WithOrder(*tenants, "fcfs+easy"), jobs);
  ASSERT_TRUE(fcfs.ok());
  EXPECT_NEAR(fcfs->jobs[10].start_ms, 10'000'000, kPassMs) << "after all ten";

  const Metrics m = ComputeMetrics(*fair);
  ASSERT_TRUE(m.accounts.count("light"));
  const AccountUsage& light = m.accounts.at("light");
  EXPECT_TRUE(light.configured);
  EXPECT_DOUBLE_EQ(light.share, 0.5);
  EXPECT_NEAR(light.wait_mean_s, 950, kPassMs / 1000);
  EXPECT_EQ(light.guaranteed_gpus, 0u);
  // Use over time: windows of whole hours that add up to all the use.
  EXPECT_EQ(m.usage_window_s, 3600);
  ASSERT_EQ(m.usage_over_time.size(), 4u) << "11,000 s in windows of an hour";
  EXPECT_NEAR(m.usage_over_time[0].unit_hours.at("heavy"), 2600.0 / 3600, 1e-3);
  EXPECT_NEAR(m.usage_over_time[0].unit_hours.at("light"), 1000.0 / 3600, 1e-3);
  EXPECT_EQ(m.usage_over_time[3].start_s, 3 * 3600);
  double heavy_hours = 0;
  for (const UsageWindow& w : m.usage_over_time) heavy_hours += w.unit_hours.at("heavy");
  EXPECT_NEAR(heavy_hours, 10 * 1000.0 / 3600, 1e-9);
  std::ostringstream json;
  WriteJson(m, json);
  EXPECT_NE(json.str().find("\"light\": {\"jobs\": 1, \"cpu_hours\": "), std::string::npos);
  EXPECT_NE(json.str().find("\"share\": 0.5"), std::string::npos);
  EXPECT_NE(json.str().find("\"usage_over_time\": ["), std::string::npos);
  std::ostringstream svg;
  WritePlotSvg(*fair, m, "tenants", svg);
  EXPECT_NE(svg.str().find("Use by account over time"), std::string::npos);
  EXPECT_NE(svg.str().find("heavy (50.0%)"), std::string::npos);
  // Without accounts in the config, neither the windows nor the panel.
  std::vector<SimJob> plain = jobs;
  auto none = Replay(WithOrder(Cluster(1, 1, 0), "muster"), plain);
  ASSERT_TRUE(none.ok());
  EXPECT_NEAR(none->jobs[10].start_ms, 10'000'000, kPassMs) << "no accounts: no fair share";
  const Metrics n = ComputeMetrics(*none);
  EXPECT_TRUE(n.usage_over_time.empty());
  EXPECT_FALSE(n.accounts.at("light").configured);
}

// Two nodes of 4 GPUs, two accounts guaranteed 4 each. "a" runs two 4-GPU jobs from 0 for
// 1,000 s; "b" asks for 4 GPUs at 100 s. Strict: a's second job waits for its first. Lending:
// it borrows b's idle GPUs at once and gives them back, preempted, when b's job comes; b's job,
// within its guarantee, starts at once either way.
TEST(TenantsTest, StrictQuotasHoldToTheGuaranteeLendingBorrowsAndReclaims) {
  const std::vector<SimJob> base = {Job(1, 0, 1000, 4, "ann", "a", 4),
                                    Job(2, 0, 1000, 4, "ann", "a", 4),
                                    Job(3, 100, 1000, 4, "bob", "b", 4)};
  auto run = [&](QuotaMode mode) {
    std::vector<SimJob> jobs = base;
    TenantOptions o;
    o.quotas = mode;
    auto c = AddTenants(Cluster(2, 8, 4), jobs, o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    auto r = Replay(WithOrder(*c, "muster"), jobs);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return *r;
  };
  const ReplayResult strict = run(QuotaMode::kStrict);
  EXPECT_NEAR(strict.jobs[0].start_ms, 0, kPassMs);
  EXPECT_NEAR(strict.jobs[1].start_ms, 1'000'000, kPassMs) << "held to a's guarantee";
  EXPECT_NEAR(strict.jobs[2].start_ms, 100'000, kPassMs);
  const Metrics ms = ComputeMetrics(strict);
  EXPECT_EQ(ms.preemptions, 0u);
  EXPECT_EQ(ms.accounts.at("a").guaranteed_gpus, 4u);
  EXPECT_EQ(ms.accounts.at("a").within_guarantee.jobs, 1u) << "its second job would borrow";
  EXPECT_EQ(ms.accounts.at("b").within_guarantee.jobs, 1u);
  EXPECT_LT(ms.accounts.at("b").within_guarantee.max_s, kPassMs / 1000);

  const ReplayResult lend = run(QuotaMode::kLend);
  EXPECT_EQ(lend.jobs[1].preemptions, 1u) << "reclaimed by b";
  EXPECT_NEAR(lend.jobs[2].start_ms, 100'000, kPassMs) << "b's job takes its GPUs back at once";
  EXPECT_NEAR(lend.jobs[1].start_ms, 1'000'000, kPassMs)
      << "requeued, it runs when a's first job ends";
  const Metrics ml = ComputeMetrics(lend);
  EXPECT_EQ(ml.preemptions, 1u);
  EXPECT_NEAR(ml.lost_gpu_hours, 4 * 100.0 / 3600, 1e-3);
  ASSERT_EQ(lend.jobs[1].preempted_runs.size(), 1u);
  EXPECT_NEAR(lend.jobs[1].preempted_runs[0].second - lend.jobs[1].preempted_runs[0].first, 100'000,
              kPassMs);
  // a's use over time counts the run preemption ended: 4 GPUs for 1,000 + 100 + 1,000 s.
  double a_hours = 0;
  for (const UsageWindow& w : ml.usage_over_time) {
    if (auto it = w.unit_hours.find("a"); it != w.unit_hours.end()) a_hours += it->second;
  }
  EXPECT_NEAR(a_hours, 4 * 2100.0 / 3600, 1e-2);
  EXPECT_EQ(ml.accounts.at("b").within_guarantee.jobs, 1u);
  EXPECT_LT(ml.accounts.at("b").within_guarantee.max_s, kPassMs / 1000);
  std::ostringstream json;
  WriteJson(ml, json);
  EXPECT_NE(json.str().find("\"guaranteed_gpus\": 4, \"within_guarantee_wait\": {\"jobs\": 1"),
            std::string::npos);
}

// Quotas of 4 GPUs each. Strict: a's 8-GPU job can never start; a's 2-GPU job after it is
// within the guarantee all the same (the big job, waiting, claimed nothing the guarantee was
// ever going to cover), and starts at once.
TEST(TenantsTest, AJobTooBigForTheGuaranteeClaimsNothingOfIt) {
  std::vector<SimJob> jobs = {Job(1, 0, 100, 8, "ann", "a", 8), Job(2, 10, 100, 2, "ann", "a", 2),
                              Job(3, 20, 100, 2, "bob", "b", 2)};
  TenantOptions o;
  o.quotas = QuotaMode::kStrict;
  auto c = AddTenants(Cluster(2, 8, 4), jobs, o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto r = Replay(WithOrder(*c, "muster"), jobs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(r->jobs[0].start_ms, 0) << "more than a's guarantee, and strict";
  EXPECT_NEAR(r->jobs[1].start_ms, 10'000, kPassMs);
  const Metrics m = ComputeMetrics(*r);
  EXPECT_EQ(m.never_started, 1u);
  EXPECT_EQ(m.accounts.at("a").within_guarantee.jobs, 1u);
  EXPECT_LT(m.accounts.at("a").within_guarantee.max_s, kPassMs / 1000);

  // Lending: the 8-GPU job runs on b's idle GPUs too, and while it runs a holds all 8, so a's
  // 2-GPU job is beyond a's guarantee (it waits for its own team, nobody's to reclaim from);
  // b's job is within b's and takes b's GPUs back.
  jobs = {Job(1, 0, 100, 8, "ann", "a", 8), Job(2, 10, 100, 2, "ann", "a", 2),
          Job(3, 20, 100, 2, "bob", "b", 2)};
  o.quotas = QuotaMode::kLend;
  c = AddTenants(Cluster(2, 8, 4), jobs, o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  r = Replay(WithOrder(*c, "muster"), jobs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs[0].preemptions, 1u);
  EXPECT_NEAR(r->jobs[2].start_ms, 20'000, kPassMs);
  const Metrics ml = ComputeMetrics(*r);
  EXPECT_EQ(ml.accounts.at("a").within_guarantee.jobs, 0u) << "a held 8 GPUs when it came";
  EXPECT_EQ(ml.accounts.at("b").within_guarantee.jobs, 1u);
}

// Under a site's config a job that names no account charges its user's default one, and the
// figures say so.
TEST(TenantsTest, AJobIsCountedUnderTheAccountTheEngineCharged) {
  Config c = Cluster(1, 1, 0);
  c.accounts.push_back(AccountConfig{.name = "team", .users = {"u1"}});
  const std::vector<SimJob> jobs = {Job(1, 0, 10, 1, "u1", "")};
  auto r = Replay(WithOrder(c, "muster"), jobs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_GE(r->jobs[0].start_ms, 0) << r->jobs[0].refused << r->jobs[0].waiting;
  const Metrics m = ComputeMetrics(*r);
  ASSERT_TRUE(m.accounts.count("team"));
  EXPECT_EQ(m.accounts.at("team").jobs, 1u);
}

}  // namespace
}  // namespace muster::sim
