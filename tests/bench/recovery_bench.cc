// Recovery at full size: how long the real musterctld takes from its start to answering requests
// with NODES nodes and JOBS jobs (running and pending, each with a script and an environment as
// sbatch sends them) in its store. The state is made once by the controller engine itself (the
// records are the ones a running cluster writes), then musterctld is started RUNS times on it.
//   usage: recovery_bench --dir DIR --musterctld PATH [--nodes N] [--jobs N] [--runs N]
// DIR is created (and reused when it already holds a state of that size). Prints each run and a
// summary line of JSON: serve_ms median/min/max, and what the controller said it recovered.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "controller_scenario.h"
#include "muster/client/controller_client.h"
#include "muster/controller/engine.h"
#include "muster/store/state_store.h"
#include "scenario.h"

namespace muster::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string dir, musterctld;
  uint32_t nodes = 12'500, jobs = 100'000, runs = 5;
};

std::string DaemonConfig(const Options& o) {
  return ClusterConfig(o.nodes) + "\n[controller]\nsocket = \"" + o.dir +
         "/ctld.sock\"\nstate_dir = \"" + o.dir +
         "/state\"\nagent_address = \"127.0.0.1:" + std::to_string(20000 + getpid() % 20000) +
         "\"\n";
}

// The engine writes the state as a controller would: nodes registered, jobs submitted, and
// passes starting what fits as they arrive.
Status Fill(const Options& o, const Config& config) {
  MUSTER_ASSIGN_OR_RETURN(auto rocks, store::OpenRocksDbStateStore(o.dir + "/state"));
  BufferedStore store(std::move(rocks));
  controller::EngineOptions eo;
  eo.config = config;
  core::TimeMs now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  MUSTER_ASSIGN_OR_RETURN(auto engine, controller::Engine::Create(eo, &store, now));
  RegisterAllNodes(*engine, config, o.nodes, now);
  std::mt19937_64 rng(7);
  controller::Caller user{1000, 1000, "user", false};
  for (uint32_t k = 0; k < o.jobs; ++k) {
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec(PhillyRequest(rng(), 8), k);
    MUSTER_RETURN_IF_ERROR(engine->SubmitJob(user, req, now).status());
    if (k % 5000 == 4999) {
      engine->RunSchedulePass(now);
      engine->TakeOutgoing();
    }
  }
  engine->RunSchedulePass(now);
  engine->TakeOutgoing();
  return Status::Ok();
}

// Milliseconds from exec to the first answered ControllerInfo, and the jobs it then tracks.
Result<std::pair<double, uint32_t>> TimeOneStart(const Options& o, const std::string& conf) {
  const std::string log = o.dir + "/musterctld.log";
  const auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "a", stderr);
    if (f) ::dup2(::fileno(stderr), 1);
    ::execl(o.musterctld.c_str(), o.musterctld.c_str(), "--config", conf.c_str(), nullptr);
    _exit(127);
  }
  if (pid < 0) return Internal("fork failed");
  std::optional<std::pair<double, uint32_t>> served;
  while (!served && Clock::now() - start < std::chrono::seconds(120)) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return Internal("musterctld exited; see " + log);
    if (auto c = client::ControllerClient::Connect(o.dir + "/ctld.sock"); c.ok()) {
      if (auto info = c->ControllerInfo(); info.ok()) {
        served.emplace(std::chrono::duration<double, std::milli>(Clock::now() - start).count(),
                       info->jobs_pending() + info->jobs_running());
      }
    }
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(pid, SIGTERM);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (!served) return DeadlineExceeded("musterctld did not answer within 120 s");
  return *served;
}

int Main(const Options& o) {
  spdlog::set_level(spdlog::level::err);
  std::filesystem::create_directories(o.dir);
  const std::string conf_text = DaemonConfig(o);
  auto config = ParseConfig(conf_text, "recovery_bench.toml");
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 2;
  }
  const std::string conf = o.dir + "/muster.toml";
  std::ofstream(conf) << conf_text;
  const std::string marker =
      o.dir + "/filled-" + std::to_string(o.nodes) + "-" + std::to_string(o.jobs);
  if (!std::filesystem::exists(marker)) {
    std::filesystem::remove_all(o.dir + "/state");
    const auto t0 = Clock::now();
    if (Status st = Fill(o, *config); !st.ok()) {
      std::fprintf(stderr, "fill: %s\n", st.ToString().c_str());
      return 1;
    }
    std::printf("filled %u nodes, %u jobs in %.1f s\n", o.nodes, o.jobs,
                std::chrono::duration<double>(Clock::now() - t0).count());
    std::ofstream{marker};
  }
  std::vector<double> times;
  uint32_t tracked = 0;
  for (uint32_t r = 0; r < o.runs; ++r) {
    auto t = TimeOneStart(o, conf);
    if (!t.ok()) {
      std::fprintf(stderr, "run %u: %s\n", r + 1, t.status().ToString().c_str());
      return 1;
    }
    times.push_back(t->first);
    tracked = t->second;
    std::printf("run %u: serving after %.0f ms, tracking %u jobs\n", r + 1, t->first, t->second);
    std::fflush(stdout);
  }
  std::sort(times.begin(), times.end());
  std::printf(
      "{\"nodes\": %u, \"jobs\": %u, \"jobs_tracked\": %u, \"runs\": %u, \"serve_ms_median\": "
      "%.0f, \"serve_ms_min\": %.0f, \"serve_ms_max\": %.0f}\n",
      o.nodes, o.jobs, tracked, o.runs, times[times.size() / 2], times.front(), times.back());
  return tracked == o.jobs ? 0 : 1;
}

}  // namespace
}  // namespace muster::bench

int main(int argc, char** argv) {
  muster::bench::Options o;
  try {
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string a = argv[i], v = argv[i + 1];
      if (a == "--dir")
        o.dir = v;
      else if (a == "--musterctld")
        o.musterctld = v;
      else if (a == "--nodes")
        o.nodes = static_cast<uint32_t>(std::stoul(v));
      else if (a == "--jobs")
        o.jobs = static_cast<uint32_t>(std::stoul(v));
      else if (a == "--runs")
        o.runs = static_cast<uint32_t>(std::stoul(v));
      else
        o.dir.clear();
    }
  } catch (const std::exception&) {
    std::fprintf(stderr, "%s: a value that is not a number\n", "recovery_bench");
    return 2;
  }
  if (argc % 2 == 0 || o.dir.empty() || o.musterctld.empty() || o.runs == 0) {
    std::fprintf(stderr,
                 "usage: recovery_bench --dir DIR --musterctld PATH [--nodes N] [--jobs N] "
                 "[--runs N]\n");
    return 2;
  }
  return muster::bench::Main(o);
}
