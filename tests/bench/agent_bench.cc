// What the agent's containment costs per job start: a process started directly, under a keeper
// (the batch script's exit recorder), and under a keeper in a fresh cgroup with a GPU device
// filter. Each iteration starts `/bin/true` and waits until it is gone and accounted for.
//   build/release/bench/agent_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cgroup.h"
#include "spawn.h"

namespace muster::agent {
namespace {

std::string Dir() {
  static std::string d = [] {
    auto p =
        std::filesystem::temp_directory_path() / ("muster-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return d;
}

SpawnSpec TrueSpec() {
  SpawnSpec s;
  s.argv = {"/bin/true"};
  s.env = {"PATH=/usr/bin:/bin"};
  s.stdout_path = "/dev/null";
  return s;
}

void Reap(const Spawned& sp) {
  int status;
  ::waitpid(sp.pid, &status, 0);
  ::close(sp.pidfd);
}

void BM_SpawnDirect(benchmark::State& state) {
  SpawnSpec s = TrueSpec();
  for (auto _ : state) {
    auto sp = Spawn(s);
    if (!sp.ok()) return state.SkipWithError(sp.status().ToString().c_str());
    Reap(*sp);
  }
}
BENCHMARK(BM_SpawnDirect)->Unit(benchmark::kMicrosecond);

void BM_SpawnUnderKeeper(benchmark::State& state) {
  SpawnSpec s = TrueSpec();
  s.exit_file = Dir() + "/exit";
  for (auto _ : state) {
    auto sp = Spawn(s);
    if (!sp.ok()) return state.SkipWithError(sp.status().ToString().c_str());
    Reap(*sp);
    if (!ReadExitFile(s.exit_file).ok()) return state.SkipWithError("no exit status recorded");
  }
}
BENCHMARK(BM_SpawnUnderKeeper)->Unit(benchmark::kMicrosecond);

void BM_SpawnUnderKeeperInJobCgroup(benchmark::State& state) {
  JobCgroups cg = JobCgroups::Detect("", "bench-" + std::to_string(::getpid()));
  if (!cg.enabled()) return state.SkipWithError(cg.description().c_str());
  SpawnSpec s = TrueSpec();
  s.exit_file = Dir() + "/exit";
  uint64_t job = 0;
  for (auto _ : state) {
    auto dir = cg.Create(++job, {});
    if (!dir.ok()) return state.SkipWithError(dir.status().ToString().c_str());
    if (cg.limits_devices() && !JobCgroups::LimitGpus(*dir, {0}).ok()) {
      return state.SkipWithError("device filter");
    }
    s.cgroup_fd = ::open(dir->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    auto sp = Spawn(s);
    ::close(s.cgroup_fd);
    if (!sp.ok()) return state.SkipWithError(sp.status().ToString().c_str());
    Reap(*sp);
    while (!JobCgroups::Empty(*dir)) {
    }
    JobCgroups::Remove(*dir).IgnoreError();
  }
  ::rmdir(cg.base().c_str());
  state.SetLabel(cg.limits_devices() ? "with device filter" : "no device filter");
}
BENCHMARK(BM_SpawnUnderKeeperInJobCgroup)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace muster::agent

BENCHMARK_MAIN();
