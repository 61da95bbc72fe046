// Scheduling-core benchmarks (Google Benchmark). Results and the commands that reproduce them
// are in docs/benchmarks.md.
//   Scenario A: one full pass, 12,500 nodes x 8 GPUs, 60% busy, 10,000 pending, depth 100.
//   Scenario B: filling an empty cluster from a deep queue: placements per second.
//   Sharing: Scenario A with 100 accounts in 10 cohorts holding GPU quotas, per-account and
//            per-user limit counters, and fair-share factors.
//   Preemption: victims for a 64-node gang on a full 12,500-node cluster.
#include <benchmark/benchmark.h>

#include "muster/core/preemption.h"
#include "muster/core/scheduler.h"
#include "scenario.h"

namespace muster::bench {
namespace {

void Report(benchmark::State& state, const core::SchedulePass& pass, const Scenario& s) {
  state.counters["starts"] = static_cast<double>(pass.starts.size());
  state.counters["reservations"] = static_cast<double>(pass.reservations.size());
  state.counters["classes"] = pass.stats.classes;
  state.counters["forecasts"] = pass.stats.forecasts;
  state.counters["backfilled"] = pass.stats.backfilled;
  state.counters["busy_gpus"] = static_cast<double>(s.busy_gpus);
}

// Args: nodes, pending, busy percent. At 60% busy most of the queue starts in the pass; at 95%
// most of it is blocked, so reservations and backfill do the work.
void BM_ScenarioA_Pass(benchmark::State& state) {
  ScenarioSpec spec;
  spec.nodes = static_cast<uint32_t>(state.range(0));
  spec.pending = static_cast<uint32_t>(state.range(1));
  spec.busy_fraction = static_cast<double>(state.range(2)) / 100.0;
  Scenario s = MakeScenario(spec);
  core::SchedulerConfig config;
  config.backfill_depth = 100;
  core::SchedulePass pass;
  for (auto _ : state) {
    pass = core::Schedule(s.view, s.queue, s.now, config);
    benchmark::DoNotOptimize(pass.starts.data());
  }
  Report(state, pass, s);
}
BENCHMARK(BM_ScenarioA_Pass)
    ->ArgsProduct({{1'000, 4'000, 12'500}, {1'000, 10'000}, {60, 95}})
    ->Args({12'500, 50'000, 60})
    ->Args({12'500, 50'000, 95})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// Args: nodes. The queue holds enough Philly-sized jobs to fill every GPU.
void BM_ScenarioB_Fill(benchmark::State& state) {
  ScenarioSpec spec;
  spec.nodes = static_cast<uint32_t>(state.range(0));
  spec.busy_fraction = 0;
  spec.big_gang_fraction = 0;
  spec.pending = spec.nodes * spec.gpus_per_node / 2;  // ~2.1 GPUs per Philly job on average
  Scenario s = MakeScenario(spec);
  core::SchedulerConfig config;
  config.backfill_depth = 100;
  core::SchedulePass pass;
  for (auto _ : state) {
    pass = core::Schedule(s.view, s.queue, s.now, config);
    benchmark::DoNotOptimize(pass.starts.data());
  }
  state.counters["placements_per_s"] = benchmark::Counter(
      static_cast<double>(pass.starts.size()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  Report(state, pass, s);
}
BENCHMARK(BM_ScenarioB_Fill)
    ->Arg(1'000)
    ->Arg(4'000)
    ->Arg(12'500)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: nodes, pending, busy percent. Scenario A's pass with the sharing policy on: 100 accounts
// (10 cohorts of 10) each guaranteed 1% of the GPUs (max 1.5%) and holding its share of the busy
// ones,
// every pending job charging its account's quota, a GrpJobs counter of its account and a
// MaxJobs counter of its user, with a fair-share factor.
void BM_ScenarioA_Sharing(benchmark::State& state) {
  ScenarioSpec spec;
  spec.nodes = static_cast<uint32_t>(state.range(0));
  spec.pending = static_cast<uint32_t>(state.range(1));
  spec.busy_fraction = static_cast<double>(state.range(2)) / 100.0;
  Scenario s = MakeScenario(spec);
  constexpr uint32_t kAccounts = 100, kUsers = 1000;
  const uint64_t gpus = uint64_t{spec.nodes} * spec.gpus_per_node;
  for (uint32_t c = 0; c < kAccounts / 10; ++c) {
    s.view.cohorts.push_back({"cohort" + std::to_string(c), {}});
  }
  for (uint32_t a = 0; a < kAccounts; ++a) {
    core::QuotaView q;
    q.what = "account a" + std::to_string(a) + ": h100 GPUs";
    q.guaranteed = gpus / kAccounts;
    q.max = q.guaranteed * 3 / 2;
    q.lending_limit = q.guaranteed;
    q.used = s.busy_gpus / kAccounts;
    q.cohort = static_cast<int32_t>(a / 10);
    s.view.cohorts[a / 10].members.push_back(a);
    s.view.quotas.push_back(std::move(q));
    s.view.limits.push_back(
        {core::JobReason::kAssocGrpJobsLimit, "account: running jobs", 0, 100'000});
  }
  for (uint32_t u = 0; u < kUsers; ++u) {
    s.view.limits.push_back({core::JobReason::kAssocMaxJobsLimit, "user: running jobs", 0, 1'000});
  }
  uint64_t rnd = 777;
  for (size_t i = 0; i < s.queue.size(); ++i) {
    core::PendingJob& j = s.queue[i];
    const auto account = static_cast<uint32_t>(i % kAccounts);
    rnd = rnd * 6364136223846793005ULL + 1442695040888963407ULL;
    j.priority.fairshare = static_cast<double>((rnd >> 33) % 1000) / 1000.0;
    core::PendingJob::Choice c;
    c.gpu_type = j.request.gpu_type;
    c.limits = {{account, 1}, {kAccounts + static_cast<uint32_t>(i % kUsers), 1}};
    c.quota = static_cast<int32_t>(account);
    j.choices.push_back(std::move(c));
  }
  core::SchedulerConfig config;
  config.backfill_depth = 100;
  core::SchedulePass pass;
  for (auto _ : state) {
    pass = core::Schedule(s.view, s.queue, s.now, config);
    benchmark::DoNotOptimize(pass.starts.data());
  }
  Report(state, pass, s);
  size_t borrowed = 0;
  for (const core::JobStart& st : pass.starts) borrowed += st.borrowed ? 1 : 0;
  state.counters["borrowed"] = static_cast<double>(borrowed);
}
BENCHMARK(BM_ScenarioA_Sharing)
    ->Args({12'500, 10'000, 60})
    ->Args({12'500, 10'000, 95})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// Args: nodes. Every node runs two 4-GPU jobs, all of them preemptable, with priorities and
// start times spread; the preemptor is a 64-node gang of 8 GPUs per node (args[1] = 1: under
// one leaf switch... which 64 nodes cannot be with 32 per leaf, so it is 2: two leaves at most).
void BM_PreemptionDecision(benchmark::State& state) {
  ScenarioSpec spec;
  spec.nodes = static_cast<uint32_t>(state.range(0));
  spec.busy_fraction = 0;
  spec.pending = 0;
  Scenario s = MakeScenario(spec);
  std::vector<core::PreemptCandidate> candidates;
  uint64_t rnd = 12345;
  core::JobId id = 1;
  for (core::NodeIndex n = 0; n < s.view.nodes.size(); ++n) {
    for (uint32_t half = 0; half < 2; ++half) {
      core::PreemptCandidate c;
      c.job = id++;
      rnd = rnd * 6364136223846793005ULL + 1442695040888963407ULL;
      c.priority = static_cast<int64_t>((rnd >> 33) % 1000);
      c.work_since_ms = static_cast<int64_t>((rnd >> 13) % 86'400'000);
      core::NodePlacement np;
      np.node = n;
      for (uint32_t g = 0; g < 4; ++g) np.gpus.push_back(half * 4 + g);
      for (uint32_t cpu = 0; cpu < 2; ++cpu) np.cpus.push_back(half * 2 + cpu);
      np.ntasks = 1;
      s.view.nodes[n].Take(np);
      c.placement.nodes.push_back(np);
      candidates.push_back(std::move(c));
    }
  }
  core::JobRequest r;
  r.partitions = {s.view.partitions.front().name};
  r.nodes = 64;
  r.tasks_per_node.assign(64, 1);
  r.gpus_per_node = 8;
  r.max_leaves = static_cast<uint32_t>(state.range(1));
  size_t victims = 0;
  for (auto _ : state) {
    auto plan = core::PlanPreemption(r, s.view, candidates);
    if (!plan.ok()) state.SkipWithError(plan.status().ToString().c_str());
    victims = plan.ok() ? plan->victims.size() : 0;
    benchmark::DoNotOptimize(victims);
  }
  state.counters["victims"] = static_cast<double>(victims);
  state.counters["candidates"] = static_cast<double>(candidates.size());
}
BENCHMARK(BM_PreemptionDecision)
    ->Args({12'500, 0})
    ->Args({12'500, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace muster::bench

BENCHMARK_MAIN();
