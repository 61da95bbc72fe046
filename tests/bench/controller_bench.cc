// Controller-level benchmarks (Google Benchmark), results in docs/benchmarks.md.
//   Scenario C: controller memory with 12,500 nodes and 100,000 jobs tracked (running and
//   pending), each job carrying a realistic script and exported environment; plus what one
//   scheduling pass costs the engine at that size (snapshot building included).
// The store is RocksDB in a temporary directory with buffered commits: memory, not fsync, is
// measured here (cluster_bench.sh measures the durable path).
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "muster/controller/engine.h"
#include "muster/rpc/api_dispatch.h"
#include "muster/store/state_store.h"
#include "scenario.h"

namespace muster::bench {
namespace {

class BufferedStore : public store::StateStore {
 public:
  explicit BufferedStore(std::unique_ptr<store::StateStore> inner) : inner_(std::move(inner)) {}
  Status Commit(const store::Mutation& m, store::Durability) override {
    return inner_->Commit(m, store::Durability::kBuffered);
  }
  Result<store::LoadedState> LoadAll() override { return inner_->LoadAll(); }
  Result<std::vector<v1::JobRecord>> ReadHistory(size_t limit) override {
    return inner_->ReadHistory(limit);
  }
  Result<v1::JobPayload> ReadJobPayload(uint64_t id) override { return inner_->ReadJobPayload(id); }
  Status ScanAudit(
      const std::string& from,
      const std::function<bool(const std::string&, const v1::AuditEntry&)>& fn) override {
    return inner_->ScanAudit(from, fn);
  }
  Status ScanHistory(uint64_t from_id,
                     const std::function<bool(const v1::JobRecord&)>& fn) override {
    return inner_->ScanHistory(from_id, fn);
  }

 private:
  std::unique_ptr<store::StateStore> inner_;
};

double StatusKb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::strlen(key)));
  }
  return 0;
}

std::string ClusterConfig(uint32_t nodes) {
  // The engine at full size: no per-user pending limit.
  std::string c =
      "cluster_name = \"bench\"\n[scheduling]\nbackfill_depth = 100\nmax_pending_jobs_per_user = "
      "0\n";
  for (uint32_t first = 1; first <= nodes; first += 32) {
    uint32_t last = std::min(nodes, first + 31);
    uint32_t leaf = (first - 1) / 32 + 1, spine = (leaf - 1) / 16 + 1;
    c += "[[nodes]]\nnames = \"gpu[" + std::to_string(first) + "-" + std::to_string(last) +
         "]\"\ncpus = 128\nmemory_mb = 2048000\ngpus = 8\ngpu_type = \"h100\"\ntopology = \"spine" +
         std::to_string(spine) + "/leaf" + std::to_string(leaf) + "\"\n";
  }
  c += "[[partition]]\nname = \"gpu\"\nnodes = \"gpu[1-" + std::to_string(nodes) +
       "]\"\ndefault = true\nmax_time = \"3-0\"\n";
  return c;
}

// What sbatch sends: a short script and the exported environment (~60 variables, ~2 KB).
v1::JobSpec Spec(const core::JobRequest& r, uint32_t k) {
  v1::JobSpec s;
  s.set_name("train-" + std::to_string(k % 500));
  s.set_nodes(r.nodes);
  s.set_gpus_per_node(r.gpus_per_node);
  s.set_ntasks(r.nodes * std::max<uint32_t>(1, r.gpus_per_node));
  s.set_cpus_per_task(8);
  s.set_time_limit_ms(r.time_limit_ms);
  s.set_work_dir("/home/user" + std::to_string(k % 200) + "/experiments");
  s.set_script("#!/bin/bash\n#SBATCH --gpus-per-node=" + std::to_string(r.gpus_per_node) +
               "\nsource ~/venv/bin/activate\nsrun python train.py --config configs/run" +
               std::to_string(k) + ".yaml --epochs 90 --batch-size 256\n");
  for (int v = 0; v < 60; ++v) {
    s.add_environment("VAR_" + std::to_string(v) + "=/opt/software/lib/path/component" +
                      std::to_string(v) + ":/usr/local/lib");
  }
  return s;
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
      for (uint32_t i = 1; i <= nodes; ++i) {
        v1::RegisterRequest r;
        r.mutable_inventory()->set_name("gpu" + std::to_string(i));
        const NodeConfig* c = config->FindNode(r.inventory().name());
        r.mutable_inventory()->set_cpus(c ? c->cpus : 128);
        r.mutable_inventory()->set_memory_mb(c ? c->memory_mb : 0);
        for (uint32_t g = 0; c && g < c->gpus; ++g) {
          r.mutable_inventory()->add_gpus()->set_type(c->gpu_type);
        }
        r.set_instance_id("i" + std::to_string(i));
        (void)e.RegisterNode(r, now);
        v1::Hello h;
        h.set_node(r.inventory().name());
        h.set_instance_id(r.instance_id());
        (void)e.AttachSession(h, now);
      }
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
      auto list = e.ListJobs(v1::ListJobsRequest());
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
  v1::ListJobsRequest req;
  req.set_brief(true);
  size_t bytes = 0;
  for (auto _ : state) {
    std::string reply = rpc::EncodeJobList(e, req);
    bytes = reply.size();
    benchmark::DoNotOptimize(reply);
  }
  state.counters["reply_kib"] = static_cast<double>(bytes) / 1024;
}
BENCHMARK(BM_ListJobsBrief)->Arg(10'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace muster::bench

BENCHMARK_MAIN();
