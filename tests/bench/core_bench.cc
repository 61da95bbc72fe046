// Scheduling-core benchmarks (Google Benchmark). Results and the commands that reproduce them
// are in docs/benchmarks.md.
//   Scenario A: one full pass, 12,500 nodes x 8 GPUs, 60% busy, 10,000 pending, depth 100.
//   Scenario B: filling an empty cluster from a deep queue: placements per second.
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
