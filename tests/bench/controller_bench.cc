// Controller-level benchmarks (Google Benchmark), results in docs/benchmarks.md.
//   Scenario C: controller memory with 12,500 nodes and 100,000 jobs tracked (running and
//   pending), each job carrying a realistic script and exported environment; plus what one
//   scheduling pass costs the engine at that size (snapshot building included).
// The store is RocksDB in a temporary directory with buffered commits: memory, not fsync, is
// measured here (cluster_bench.sh measures the durable path).
#include <benchmark/benchmark.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "controller_scenario.h"
#include "muster/controller/engine.h"
#include "muster/rpc/api_dispatch.h"
#include "muster/store/state_store.h"
#include "scenario.h"

namespace muster::bench {
namespace {

double StatusKb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::strlen(key)));
  }
  return 0;
}

void BM_ScenarioC_ControllerMemory(benchmark::State& state) {
  spdlog::set_level(spdlog::level::err);
  const uint32_t nodes = static_cast<uint32_t>(state.range(0));
  const uint32_t jobs = static_cast<uint32_t>(state.range(1));
  for (auto _ : state) {
    const double rss_before = StatusKb("VmRSS:");
    std::string dir = "/tmp/muster-bench-" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    {
      auto rocks = store::OpenRocksDbStateStore(dir);
      if (!rocks.ok()) {
        state.SkipWithError(rocks.status().ToString().c_str());
        return;
      }
      BufferedStore store(std::move(*rocks));
      auto config = ParseConfig(ClusterConfig(nodes), "bench.toml");
      if (!config.ok()) {
        state.SkipWithError(config.status().ToString().c_str());
        return;
      }
      controller::EngineOptions o;
      o.config = *config;
      core::TimeMs now = 1'800'000'000'000;
      auto engine = controller::Engine::Create(o, &store, now);
      if (!engine.ok()) {
        state.SkipWithError(engine.status().ToString().c_str());
        return;
      }
      controller::Engine& e = **engine;
      RegisterAllNodes(e, *config, nodes, now);
      std::mt19937_64 rng(7);
      controller::Caller user{1000, 1000, "user", false};
      auto t0 = std::chrono::steady_clock::now();
      for (uint32_t k = 0; k < jobs; ++k) {
        v1::SubmitJobRequest req;
        *req.mutable_spec() = Spec(PhillyRequest(rng(), 8), k);
        auto r = e.SubmitJob(user, req, now);
        if (!r.ok()) {
          state.SkipWithError(r.status().ToString().c_str());
          return;
        }
        // Start work as it arrives, as the controller's coalesced passes would.
        if (k % 5000 == 4999) {
          e.RunSchedulePass(now);
          e.TakeOutgoing();
        }
      }
      auto t1 = std::chrono::steady_clock::now();
      e.RunSchedulePass(now);
      e.TakeOutgoing();
      // One more pass on the full cluster: what a steady-state pass costs the engine.
      // Split as the daemon runs it: only Prepare and Apply hold the strand.
      now += 1000;
      using Ms = std::chrono::duration<double, std::milli>;
      auto p0 = std::chrono::steady_clock::now();
      auto p1 = p0;
      {
        auto in = e.PreparePass(now);
        auto p_prepared = std::chrono::steady_clock::now();
        core::SchedulePass pass = in ? controller::Engine::ComputePass(*in) : core::SchedulePass{};
        auto p_computed = std::chrono::steady_clock::now();
        e.ApplyPass(pass, now);
        p1 = std::chrono::steady_clock::now();
        state.counters["strand_ms"] = Ms(p_prepared - p0).count() + Ms(p1 - p_computed).count();
        state.counters["off_strand_ms"] = Ms(p_computed - p_prepared).count();
      }
      state.counters["submit_us_per_job"] =
          std::chrono::duration<double, std::micro>(t1 - t0).count() / jobs;
      state.counters["engine_pass_ms"] = std::chrono::duration<double, std::milli>(p1 - p0).count();
      auto list = e.ListJobs(controller::Caller{0, 0, "root", true}, v1::ListJobsRequest());
      uint32_t running = 0, pending = 0;
      for (const auto& j : list->jobs()) {
        running += j.state() == v1::RUNNING;
        pending += j.state() == v1::PENDING;
      }
      state.counters["running"] = running;
      state.counters["pending"] = pending;
      state.counters["rss_mib"] = (StatusKb("VmRSS:") - rss_before) / 1024.0;
      state.counters["peak_rss_mib"] = StatusKb("VmHWM:") / 1024.0;
    }
    std::filesystem::remove_all(dir);
  }
}
BENCHMARK(BM_ScenarioC_ControllerMemory)
    ->Args({12'500, 100'000})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

// squeue's server side: the brief rows of 10,000 pending jobs, serialized as the reply is.
void BM_ListJobsBrief(benchmark::State& state) {
  spdlog::set_level(spdlog::level::err);
  const uint32_t jobs = static_cast<uint32_t>(state.range(0));
  store::InMemoryStateStore store;
  auto config = ParseConfig(ClusterConfig(32), "bench.toml");
  controller::EngineOptions o;
  o.config = *config;
  const core::TimeMs now = 1'800'000'000'000;
  auto engine = controller::Engine::Create(o, &store, now);
  if (!engine.ok()) {
    state.SkipWithError(engine.status().ToString().c_str());
    return;
  }
  controller::Engine& e = **engine;
  std::mt19937_64 rng(7);
  controller::Caller user{1000, 1000, "user", false};
  for (uint32_t k = 0; k < jobs; ++k) {
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec(PhillyRequest(rng(), 8), k);
    req.mutable_spec()->set_hold(true);
    if (auto r = e.SubmitJob(user, req, now); !r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
  }
  size_t bytes = 0, pages = 0;
  for (auto _ : state) {
    // Every page, as the CLI asks for them.
    v1::ListJobsRequest req;
    req.set_brief(true);
    bytes = pages = 0;
    do {
      std::string reply = rpc::EncodeJobList(e, controller::Caller{0, 0, "root", true}, req);
      bytes += reply.size();
      ++pages;
      google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(reply.data()),
                                                static_cast<int>(reply.size()));
      uint64_t next = 0;
      for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
        if (tag == (v1::ListJobsResponse::kNextAfterIdFieldNumber << 3)) {
          in.ReadVarint64(&next);
        } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) {
          break;
        }
      }
      req.set_after_id(next);
      benchmark::DoNotOptimize(reply);
    } while (req.after_id() != 0);
  }
  state.counters["reply_kib"] = static_cast<double>(bytes) / 1024;
  state.counters["pages"] = static_cast<double>(pages);
}
BENCHMARK(BM_ListJobsBrief)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

// A job array's submission in the engine, each commit synced (RocksDB in a temporary
// directory): one record however many tasks (five held arrays, each cancelled after, median);
// then what a scheduling pass costs with a held array pending (it stays out of the pass), and the
// first pass after its release (its waiting tasks go in as copies, as many as the free CPUs
// could start, and start).
void BM_SubmitArray(benchmark::State& state) {
  spdlog::set_level(spdlog::level::err);
  const uint32_t tasks = static_cast<uint32_t>(state.range(0));
  const uint32_t nodes = 100;
  using Ms = std::chrono::duration<double, std::milli>;
  for (auto _ : state) {
    std::string dir = "/tmp/muster-bench-array-" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    auto rocks = store::OpenRocksDbStateStore(dir);
    auto config = ParseConfig(ClusterConfig(nodes), "bench.toml");
    if (!rocks.ok() || !config.ok()) {
      state.SkipWithError("cannot open the store or read the config");
      return;
    }
    config->scheduling.max_array_size = 4'000'001;
    controller::EngineOptions o;
    o.config = *config;
    core::TimeMs now = 1'800'000'000'000;
    auto engine = controller::Engine::Create(o, rocks->get(), now);
    if (!engine.ok()) {
      state.SkipWithError(engine.status().ToString().c_str());
      return;
    }
    controller::Engine& e = **engine;
    RegisterAllNodes(e, *config, nodes, now);
    controller::Caller user{1000, 1000, "user", false};
    core::JobRequest one;
    one.nodes = 1;
    one.tasks_per_node = {1};
    one.cpus_per_task = 1;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec(one, 0);
    req.mutable_spec()->set_array("0-" + std::to_string(tasks - 1));
    req.mutable_spec()->set_hold(true);
    std::vector<double> submit;
    uint64_t id = 0;
    for (int k = 0; k < 5; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      auto r = e.SubmitJob(user, req, now);
      submit.push_back(Ms(std::chrono::steady_clock::now() - t0).count());
      if (!r.ok()) {
        state.SkipWithError(r.status().ToString().c_str());
        return;
      }
      id = r->job_id();
      if (k < 4) {
        v1::CancelJobRequest cancel;
        cancel.add_job_ids(id);
        (void)e.CancelJob(user, cancel, now);
      }
    }
    std::sort(submit.begin(), submit.end());
    state.counters["submit_ms"] = submit[2];
    auto p0 = std::chrono::steady_clock::now();
    e.RunSchedulePass(now);
    state.counters["pass_held_ms"] = Ms(std::chrono::steady_clock::now() - p0).count();
    v1::UpdateJobRequest release;
    release.set_action(v1::UpdateJobRequest::RELEASE);
    release.add_job_ids(id);
    (void)e.UpdateJob(user, release, now);
    p0 = std::chrono::steady_clock::now();
    e.RunSchedulePass(now);
    state.counters["pass_released_ms"] = Ms(std::chrono::steady_clock::now() - p0).count();
    e.TakeOutgoing();
    if (auto info = e.ControllerInfo(); info.ok()) {
      state.counters["started"] = info->jobs_running();
      state.counters["still_pending"] = info->jobs_pending();
    }
    engine->reset();
    rocks->reset();
    std::filesystem::remove_all(dir);
  }
}
BENCHMARK(BM_SubmitArray)->Arg(1'000)->Arg(100'000)->Iterations(1)->Unit(benchmark::kMillisecond);

// A submission where the account sets a submit-job limit (GrpSubmitJobs, MaxSubmitJobs), with
// `jobs` already pending in it: the limit compares against counts the job table keeps, not a
// walk over every job. Median of 200 submissions, in memory (no fsync).
void BM_SubmitUnderSubmitLimit(benchmark::State& state) {
  spdlog::set_level(spdlog::level::err);
  const uint32_t jobs = static_cast<uint32_t>(state.range(0));
  using Ms = std::chrono::duration<double, std::milli>;
  store::InMemoryStateStore store;
  auto config = ParseConfig(ClusterConfig(32) +
                                "[[accounts]]\nname = \"lab\"\nusers = [\"user\"]\n"
                                "grp_submit_jobs = 10000000\nmax_submit_jobs_per_user = 10000000\n",
                            "bench.toml");
  if (!config.ok()) {
    state.SkipWithError(config.status().ToString().c_str());
    return;
  }
  controller::EngineOptions o;
  o.config = *config;
  const core::TimeMs now = 1'800'000'000'000;
  auto engine = controller::Engine::Create(o, &store, now);
  if (!engine.ok()) {
    state.SkipWithError(engine.status().ToString().c_str());
    return;
  }
  controller::Engine& e = **engine;
  controller::Caller user{1000, 1000, "user", false};
  std::mt19937_64 rng(7);
  auto submit = [&](uint32_t k) {
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec(PhillyRequest(rng(), 8), k);
    req.mutable_spec()->set_account("lab");
    req.mutable_spec()->set_hold(true);
    return e.SubmitJob(user, req, now);
  };
  for (uint32_t k = 0; k < jobs; ++k) {
    if (auto r = submit(k); !r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
  }
  for (auto _ : state) {
    std::vector<double> ms;
    for (uint32_t k = 0; k < 200; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      auto r = submit(jobs + k);
      ms.push_back(Ms(std::chrono::steady_clock::now() - t0).count());
      if (!r.ok()) {
        state.SkipWithError(r.status().ToString().c_str());
        return;
      }
    }
    std::sort(ms.begin(), ms.end());
    state.counters["submit_ms"] = ms[ms.size() / 2];
  }
}
BENCHMARK(BM_SubmitUnderSubmitLimit)
    ->Arg(1'000)
    ->Arg(20'000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace muster::bench

BENCHMARK_MAIN();
