// muster-sim: replays a workload trace through Muster's controller (engine, pass policy and
// scheduling core) on a virtual clock, and reports what it did to the queue.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "muster/common/config.h"
#include "muster/sim/cluster.h"
#include "muster/sim/metrics.h"
#include "muster/sim/replay.h"
#include "muster/sim/trace_file.h"

namespace {

constexpr const char* kUsage = R"(usage: muster-sim --trace FILE [--format swf|philly|openb|csv]
                  (--config muster.toml | --nodes N [--cpus-per-node C] [--gpus-per-node G]
                   [--gpu-type T] [--leaf-size L] [--nvlink-domain D] [--memory-mb M])
                  [--jobs N] [--start K] [--backfill-depth N]
                  [--json OUT|-] [--progress] [--print-config]

Replays the trace through the controller musterctld runs (its engine, pass policy and
scheduling core) on a virtual clock, with stand-in agents that run each job for its recorded
run time and kill it at its requested time. Without --config or --nodes, the cluster is the
trace's own machine (SWF's MaxProcs), one CPU per node.

  --trace FILE        the workload (SWF, plain or .gz)
  --format F          the trace's format; default: from the file name
  --config FILE       the cluster and policy as a muster.toml says them
  --nodes N ...       or the cluster's shape: N alike nodes, in leaves of L nodes
  --jobs N            replay N jobs (default: all) ...
  --start K           ... from the K-th (0-based) in submit order
  --backfill-depth N  blocked jobs that get a reservation per pass (1: EASY)
  --json OUT          the metrics as JSON, to OUT or - (stdout)
  --progress          a progress line on stderr
  --print-config      print the cluster's config (TOML) and exit
)";

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "muster-sim: %s\n", why.c_str());
  std::exit(2);
}

uint64_t Number(const std::string& flag, const char* v) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (!*v || *end || errno || v[0] == '-')
    Fail(flag + " needs a non-negative integer, not '" + v + "'");
  return n;
}

uint32_t Small(const std::string& flag, const char* v) {
  const uint64_t n = Number(flag, v);
  if (n > 1'000'000) Fail(flag + " is at most 1000000");
  return static_cast<uint32_t>(n);
}

void PrintSummary(const muster::sim::Metrics& m, const muster::sim::ReplayResult& r) {
  std::fprintf(stderr,
               "muster-sim: %llu jobs (%llu started, %llu refused, %llu never started) in %.2f s "
               "wall, %llu passes\n",
               static_cast<unsigned long long>(m.jobs), static_cast<unsigned long long>(m.started),
               static_cast<unsigned long long>(m.refused),
               static_cast<unsigned long long>(m.never_started), r.wall_seconds,
               static_cast<unsigned long long>(m.passes));
  std::fprintf(stderr,
               "  utilization %.4f  wait mean %.0f s median %.0f p95 %.0f p99 %.0f  bounded "
               "slowdown %.2f  makespan %.0f s\n",
               m.utilization, m.wait.mean_s, m.wait.median_s, m.wait.p95_s, m.wait.p99_s,
               m.bounded_slowdown, m.makespan_s);
}

}  // namespace

int main(int argc, char** argv) {
  std::string trace_path, format, config_path, json_path;
  muster::sim::ClusterShape shape;
  bool have_shape = false, progress = false, print_config = false;
  uint64_t jobs_limit = 0, start = 0;
  int64_t backfill_depth = -1;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= args.size()) Fail(a + " needs a value");
      return args[++i].c_str();
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--trace") {
      trace_path = value();
    } else if (a == "--format") {
      format = value();
    } else if (a == "--config") {
      config_path = value();
    } else if (a == "--nodes") {
      shape.nodes = Small(a, value());
      have_shape = true;
    } else if (a == "--cpus-per-node") {
      shape.cpus_per_node = Small(a, value());
    } else if (a == "--gpus-per-node") {
      shape.gpus_per_node = Small(a, value());
    } else if (a == "--gpu-type") {
      shape.gpu_type = value();
    } else if (a == "--leaf-size") {
      shape.leaf_size = Small(a, value());
    } else if (a == "--nvlink-domain") {
      shape.nvlink_domain = Small(a, value());
    } else if (a == "--memory-mb") {
      shape.memory_mb = Number(a, value());
    } else if (a == "--jobs") {
      jobs_limit = Number(a, value());
    } else if (a == "--start") {
      start = Number(a, value());
    } else if (a == "--backfill-depth") {
      backfill_depth = Small(a, value());
    } else if (a == "--json") {
      json_path = value();
    } else if (a == "--progress") {
      progress = true;
    } else if (a == "--print-config") {
      print_config = true;
    } else {
      Fail("unknown option '" + a + "' (see --help)");
    }
  }
  if (!config_path.empty() && have_shape) Fail("give --config or --nodes, not both");
  if (trace_path.empty() && !(print_config && have_shape)) Fail("--trace FILE is required");

  muster::sim::Trace trace;
  if (!trace_path.empty()) {
    auto t = muster::sim::ReadTraceFile(trace_path, format);
    if (!t.ok()) Fail(t.status().message());
    trace = std::move(*t);
    for (const std::string& note : trace.notes) {
      std::fprintf(stderr, "muster-sim: %s: %s\n", trace_path.c_str(), note.c_str());
    }
  }
  if (!have_shape && config_path.empty()) {
    if (trace.max_procs <= 0) {
      Fail("the trace does not say its machine's size (MaxProcs): give --nodes or --config");
    }
    shape.nodes = static_cast<uint32_t>(trace.max_procs);
    have_shape = true;
  }
  muster::Config config;
  if (have_shape) {
    if (print_config) {
      std::fputs(muster::sim::ShapeToToml(shape).c_str(), stdout);
      return 0;
    }
    auto c = muster::sim::ShapeToConfig(shape);
    if (!c.ok()) Fail(c.status().message());
    config = std::move(*c);
  } else {
    auto c = muster::LoadConfig(config_path);
    if (!c.ok()) Fail(c.status().ToString());
    config = std::move(*c);
  }
  if (backfill_depth >= 0) config.scheduling.backfill_depth = static_cast<uint32_t>(backfill_depth);

  std::vector<muster::sim::SimJob>& jobs = trace.jobs;
  if (start > 0 || jobs_limit > 0) {
    if (start >= jobs.size()) Fail("--start is past the trace's last job");
    const size_t end =
        jobs_limit > 0 ? std::min<uint64_t>(jobs.size(), start + jobs_limit) : jobs.size();
    jobs = std::vector<muster::sim::SimJob>(jobs.begin() + static_cast<ptrdiff_t>(start),
                                            jobs.begin() + static_cast<ptrdiff_t>(end));
    // The sequence starts with an empty cluster at its first arrival.
    const int64_t t0 = jobs.front().submit_s;
    for (auto& j : jobs) j.submit_s -= t0;
  }

  muster::sim::ReplayOptions options;
  if (progress) {
    options.progress = [](size_t done, size_t total, int64_t virtual_ms) {
      std::fprintf(stderr, "\rmuster-sim: %zu/%zu jobs finished, %.1f days in", done, total,
                   static_cast<double>(virtual_ms) / 86'400'000.0);
      if (done == total) std::fputc('\n', stderr);
    };
  }
  auto r = muster::sim::Replay(config, jobs, options);
  if (progress) std::fputc('\n', stderr);
  if (!r.ok()) Fail(r.status().ToString());
  size_t said = 0;
  for (const auto& o : r->jobs) {
    const std::string& why = !o.refused.empty() ? o.refused : o.waiting;
    if (why.empty()) continue;
    if (said++ < 10) {
      std::fprintf(stderr, "muster-sim: job %lld %s: %s\n", static_cast<long long>(o.trace_id),
                   o.refused.empty() ? "never started" : "refused", why.c_str());
    }
  }
  if (said > 10) std::fprintf(stderr, "muster-sim: ... and %zu more such jobs\n", said - 10);
  const muster::sim::Metrics m = muster::sim::ComputeMetrics(*r);
  PrintSummary(m, *r);
  if (json_path == "-") {
    muster::sim::WriteJson(m, std::cout);
  } else if (!json_path.empty()) {
    std::ofstream out(json_path);
    muster::sim::WriteJson(m, out);
    if (!out) Fail("cannot write " + json_path);
  }
  return 0;
}
