// Scheduling-core benchmarks (Google Benchmark). Results and the commands that reproduce them
// are in docs/benchmarks.md.
//   Scenario A: one full pass, 12,500 nodes x 8 GPUs, 60% busy, 10,000 pending, depth 100.
//   Scenario B: filling an empty cluster from a deep queue: placements per second.
#include <benchmark/benchmark.h>

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

}  // namespace
}  // namespace muster::bench

BENCHMARK_MAIN();
