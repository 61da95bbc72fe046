// muster-sim: replays a workload trace through Muster's controller (engine, pass policy and
// scheduling core) on a virtual clock, and reports what it did to the queue: one run, or every
// named policy over the same jobs (whole, or the RLScheduler paper's sampled sequences).
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "muster/common/config.h"
#include "muster/sim/cluster.h"
#include "muster/sim/experiment.h"
#include "muster/sim/metrics.h"
#include "muster/sim/openb.h"
#include "muster/sim/plot.h"
#include "muster/sim/replay.h"
#include "muster/sim/tenants.h"
#include "muster/sim/trace_file.h"

namespace {

using muster::sim::Metrics;
using muster::sim::PolicySpec;
using muster::sim::SimJob;

constexpr const char* kUsage =
    R"(usage: muster-sim --trace FILE [--format swf|philly|openb|csv|sacct]
                  (--config muster.toml | --openb-nodes FILE
                   | --nodes N [--cpus-per-node C] [--gpus-per-node G]
                   [--gpu-type T] [--leaf-size L] [--nvlink-domain D] [--memory-mb M])
                  [--policy P[,P...]] [--backfill-depth N]
                  [--jobs N] [--start K] [--procs-as-gpus]
                  [--tenants equal[:K] [--quotas strict|lend]]
                  [--sequences K [--length 1024] [--seed S] [--sample-first N]]
                  [--json OUT|-] [--plot OUT.svg] [--outcomes OUT.csv] [--progress]
                  [--threads T] [--print-config]

Replays the trace through the controller musterctld runs (its engine, pass policy and
scheduling core) on a virtual clock, with stand-in agents that run each job for its recorded
run time and kill it at its requested time. Without --config or --nodes, the cluster is the
trace's own machine (SWF's MaxProcs), one CPU per node.

  --trace FILE        the workload, plain or .gz: SWF, Philly, openb pods, CSV, sacct -P
  --format F          the trace's format; default: from the file name
  --config FILE       the cluster and policy as a muster.toml says them
  --openb-nodes FILE  the cluster of an Alibaba openb node list (openb_node_list_*.csv)
  --nodes N ...       or the cluster's shape: N alike nodes, in leaves of L nodes
  --policy P,...      ORDER[+BACKFILL][/FILL][@PLACEMENT][~WAIT]: ORDER muster (the config's),
                      fcfs, sjf, wfp3, unicep, f1, hrrn; BACKFILL strict (the RLScheduler
                      paper's), easy, conservative, none; FILL (who fills backfill's gaps)
                      priority, shortest, area; PLACEMENT topology, first_fit, random (with
                      --seed); WAIT (24h, 90m) protects jobs that waited that long: they go
                      first and only they take reservations (not with muster);
                      several: each runs on the same jobs and a table compares them
  --backfill-depth N  blocked jobs that get a reservation per pass, for every policy
  --procs-as-gpus     a CPU trace on a GPU cluster: each processor a job asks for is a GPU
  --tenants equal[:K] the trace's accounts (SWF groups, a CSV's account column) become the
                      config's accounts with equal shares, so fair share applies; with :K the
                      K-1 heaviest (over the jobs replayed) keep their names and the rest (and
                      jobs with no account) are "others"; not with a --config that names accounts
  --quotas MODE       with --tenants on a GPU cluster: each account is guaranteed an equal part
                      of each GPU type; strict: held to it; lend: idle guaranteed GPUs are lent
                      within one cohort and taken back by preemption when their owner needs them
  --jobs N            replay N jobs (default: all) ...
  --start K           ... from the K-th (0-based) in submit order; times stay the trace's
  --sequences K       the paper's protocol: K sequences of --length consecutive jobs, each from
                      an index drawn uniformly from [length, n - length - 1) (--seed), n the
                      trace's jobs or the first --sample-first of them; each from an empty cluster
  --json OUT          the metrics as JSON, to OUT or - (stdout)
  --plot OUT.svg      utilization and queue over time and waits by job size, as an SVG
                      (one replay: one policy, no --sequences)
  --outcomes OUT.csv  every job's outcome (submission, start, end, wait, preemptions, why it
                      never started) as CSV (one replay)
  --progress          a progress line on stderr
  --threads T         replays at once (default: 2)
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
  if (!*v || *end || errno || v[0] == '-') {
    Fail(flag + " needs a non-negative integer, not '" + v + "'");
  }
  return n;
}

uint32_t Small(const std::string& flag, const char* v) {
  const uint64_t n = Number(flag, v);
  if (n > 1'000'000) Fail(flag + " is at most 1000000");
  return static_cast<uint32_t>(n);
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// One replay to run: which policy, which jobs.
struct Run {
  size_t policy = 0;
  size_t sequence = 0;
  size_t begin = 0, end = 0;  // jobs [begin, end) of the trace
};

// What a run gave, kept for the table and the JSON.
struct RunResult {
  muster::sim::RunFigures figures;
  double wall_seconds = 0;
  std::string error;
  muster::sim::ReplayResult replay;  // kept for --plot
};

void PrintSummary(const Metrics& m, double wall) {
  std::fprintf(stderr,
               "muster-sim: %llu jobs (%llu started, %llu refused, %llu never started) in %.2f s "
               "wall, %llu passes\n",
               static_cast<unsigned long long>(m.jobs), static_cast<unsigned long long>(m.started),
               static_cast<unsigned long long>(m.refused),
               static_cast<unsigned long long>(m.never_started), wall,
               static_cast<unsigned long long>(m.passes));
  std::fprintf(stderr,
               "  utilization %.4f  wait mean %.0f s median %.0f p95 %.0f p99 %.0f  bounded "
               "slowdown %.2f  makespan %.0f s\n",
               m.utilization, m.wait.mean_s, m.wait.median_s, m.wait.p95_s, m.wait.p99_s,
               m.bounded_slowdown, m.makespan_s);
  if (m.preemptions > 0) {
    std::fprintf(stderr, "  %llu preemptions, %.1f GPU-hours and %.1f CPU-hours lost to them\n",
                 static_cast<unsigned long long>(m.preemptions), m.lost_gpu_hours,
                 m.lost_cpu_hours);
  }
  size_t configured = 0;
  for (const auto& [name, a] : m.accounts) configured += a.configured;
  if (configured == 0 || configured > 24) return;
  // A line per account: what it was given, what it got, how long its jobs waited.
  for (const auto& [name, a] : m.accounts) {
    std::fprintf(stderr,
                 "  account %-12s share %5.1f%%  used %5.1f%%  %6llu jobs  wait mean %.0f s"
                 "  bounded slowdown %.2f",
                 name.c_str(), a.share * 100, a.share_of_use * 100,
                 static_cast<unsigned long long>(a.jobs), a.wait_mean_s, a.bounded_slowdown);
    if (a.guaranteed_gpus > 0) {
      std::fprintf(
          stderr,
          "  guaranteed %llu GPUs: within it %llu jobs waited median %.0f s p95 %.0f max %.0f",
          static_cast<unsigned long long>(a.guaranteed_gpus),
          static_cast<unsigned long long>(a.within_guarantee.jobs), a.within_guarantee.median_s,
          a.within_guarantee.p95_s, a.within_guarantee.max_s);
    }
    std::fputc('\n', stderr);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string trace_path, format, config_path, openb_nodes, json_path, policies_arg, plot_path,
      outcomes_path;
  muster::sim::ClusterShape shape;
  bool have_shape = false, progress = false, print_config = false, procs_as_gpus = false;
  bool tenants_given = false;
  std::string tenants_arg, quotas_arg;
  uint64_t jobs_limit = 0, start = 0, sequences = 0, length = 1024, seed = 0, sample_first = 0;
  uint32_t threads = 2;
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
    } else if (a == "--openb-nodes") {
      openb_nodes = value();
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
    } else if (a == "--policy") {
      policies_arg = value();
    } else if (a == "--jobs") {
      jobs_limit = Number(a, value());
    } else if (a == "--start") {
      start = Number(a, value());
    } else if (a == "--sequences") {
      sequences = Small(a, value());
    } else if (a == "--length") {
      length = Small(a, value());
    } else if (a == "--seed") {
      seed = Number(a, value());
    } else if (a == "--sample-first") {
      sample_first = Number(a, value());
    } else if (a == "--backfill-depth") {
      backfill_depth = Small(a, value());
    } else if (a == "--json") {
      json_path = value();
    } else if (a == "--plot") {
      plot_path = value();
    } else if (a == "--outcomes") {
      outcomes_path = value();
    } else if (a == "--progress") {
      progress = true;
    } else if (a == "--threads") {
      threads = std::max<uint32_t>(1, Small(a, value()));
    } else if (a == "--procs-as-gpus") {
      procs_as_gpus = true;
    } else if (a == "--tenants") {
      tenants_arg = value();
      tenants_given = true;
    } else if (a == "--quotas") {
      quotas_arg = value();
    } else if (a == "--print-config") {
      print_config = true;
    } else {
      Fail("unknown option '" + a + "' (see --help)");
    }
  }
  if ((!config_path.empty()) + (!openb_nodes.empty()) + have_shape > 1) {
    Fail("give one of --config, --openb-nodes and --nodes");
  }
  if (trace_path.empty() && !(print_config && have_shape)) Fail("--trace FILE is required");
  if (sequences > 0 && (start > 0 || jobs_limit > 0)) {
    Fail("--sequences draws its own jobs: not with --start or --jobs");
  }
  muster::sim::TenantOptions tenants;
  if (tenants_given) {
    const std::string kind = tenants_arg.substr(0, tenants_arg.find(':'));
    if (kind != "equal") Fail("--tenants takes equal or equal:K, not '" + tenants_arg + "'");
    if (kind.size() < tenants_arg.size()) {
      tenants.max_accounts = Small("--tenants equal:K", tenants_arg.c_str() + kind.size() + 1);
      if (tenants.max_accounts < 1) Fail("--tenants equal:K needs K of at least 1");
    }
  }
  if (!quotas_arg.empty()) {
    if (!tenants_given) Fail("--quotas needs --tenants (whose accounts hold the quotas)");
    auto q = muster::sim::ParseQuotaMode(quotas_arg);
    if (!q.ok()) Fail("--quotas: " + q.status().message());
    tenants.quotas = *q;
  }
  std::vector<PolicySpec> policies;
  for (const std::string& p : SplitCommas(policies_arg.empty() ? "muster" : policies_arg)) {
    auto spec = muster::sim::ParsePolicy(p);
    if (!spec.ok()) Fail(spec.status().message());
    if (backfill_depth >= 0) spec->depth = backfill_depth;
    policies.push_back(*spec);
  }
  if (!plot_path.empty() && (policies.size() > 1 || sequences > 0)) {
    Fail("--plot draws one replay: give one --policy and no --sequences");
  }
  if (!outcomes_path.empty() && (policies.size() > 1 || sequences > 0)) {
    Fail("--outcomes lists one replay's jobs: give one --policy and no --sequences");
  }

  muster::sim::Trace trace;
  if (!trace_path.empty()) {
    muster::sim::TraceOptions topts;
    if (shape.gpus_per_node > 0) topts.gpus_per_node = shape.gpus_per_node;
    auto t = muster::sim::ReadTraceFile(trace_path, format, topts);
    if (!t.ok()) Fail(t.status().message());
    trace = std::move(*t);
    for (const std::string& note : trace.notes) {
      std::fprintf(stderr, "muster-sim: %s: %s\n", trace_path.c_str(), note.c_str());
    }
    if (trace.jobs.empty()) Fail(trace_path + " has no job to replay");
  }
  if (procs_as_gpus) {
    if (!have_shape || shape.gpus_per_node == 0) {
      Fail("--procs-as-gpus needs the cluster's shape with GPUs: --nodes N --gpus-per-node G");
    }
    // A task per GPU: each node needs a CPU for each of its GPUs.
    shape.cpus_per_node = std::max(shape.cpus_per_node, shape.gpus_per_node);
    for (SimJob& j : trace.jobs) {
      if (j.gpus > 0) Fail("--procs-as-gpus is for CPU traces: this one asks for GPUs already");
      j.gpus = j.procs;
    }
  }
  if (!have_shape && config_path.empty() && openb_nodes.empty()) {
    const int64_t size = trace.max_procs > 0 ? trace.max_procs : trace.max_nodes;
    if (size <= 0) {
      Fail(
          "the trace does not say its machine's size (MaxProcs, MaxNodes): give --nodes or "
          "--config");
    }
    shape.nodes = static_cast<uint32_t>(size);
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
  } else if (!openb_nodes.empty()) {
    auto c = muster::sim::ReadOpenbNodesFile(openb_nodes);
    if (!c.ok()) Fail(c.status().ToString());
    config = std::move(*c);
  } else {
    auto c = muster::LoadConfig(config_path);
    if (!c.ok()) Fail(c.status().ToString());
    config = std::move(*c);
  }
  // One slice of the trace (--start, --jobs): only its jobs are replayed, so only they are kept
  // (the tenants are the slice's); --sequences draws from all of them.
  if (sequences == 0) {
    if (start >= trace.jobs.size()) Fail("--start is past the trace's last job");
    const size_t end = jobs_limit > 0 ? std::min<uint64_t>(trace.jobs.size(), start + jobs_limit)
                                      : trace.jobs.size();
    trace.jobs.erase(trace.jobs.begin() + static_cast<ptrdiff_t>(end), trace.jobs.end());
    trace.jobs.erase(trace.jobs.begin(), trace.jobs.begin() + static_cast<ptrdiff_t>(start));
  }
  if (tenants_given) {
    auto c = muster::sim::AddTenants(std::move(config), trace.jobs, tenants);
    if (!c.ok()) Fail("--tenants: " + c.status().message());
    config = std::move(*c);
    std::fprintf(stderr, "muster-sim: %zu accounts with equal shares%s\n", config.accounts.size(),
                 tenants.quotas == muster::sim::QuotaMode::kLend     ? ", GPU quotas that lend"
                 : tenants.quotas == muster::sim::QuotaMode::kStrict ? ", strict GPU quotas"
                                                                     : "");
  }
  // --seed draws the sequences and, under random placement, the nodes.
  if (seed > 0) config.scheduling.placement_seed = seed;

  const std::vector<SimJob>& jobs = trace.jobs;
  std::vector<Run> runs;
  std::vector<size_t> starts;
  if (sequences > 0) {
    auto s = muster::sim::SampleStarts(jobs.size(), length, sequences, seed, sample_first);
    if (!s.ok()) Fail(s.status().message());
    starts = *s;
    for (size_t p = 0; p < policies.size(); ++p) {
      for (size_t k = 0; k < starts.size(); ++k)
        runs.push_back({p, k, starts[k], starts[k] + length});
    }
  } else {
    for (size_t p = 0; p < policies.size(); ++p) runs.push_back({p, 0, 0, jobs.size()});
  }

  muster::sim::QuietControllerLogs();
  std::vector<RunResult> results(runs.size());
  std::atomic<size_t> next{0}, done{0};
  const bool one = runs.size() == 1;
  auto worker = [&] {
    for (size_t i = next++; i < runs.size(); i = next++) {
      const Run& run = runs[i];
      const std::vector<SimJob> slice(jobs.begin() + static_cast<ptrdiff_t>(run.begin),
                                      jobs.begin() + static_cast<ptrdiff_t>(run.end));
      muster::sim::ReplayOptions options;
      if (progress && one) {
        options.progress = [](size_t finished, size_t total, int64_t virtual_ms) {
          std::fprintf(stderr, "\rmuster-sim: %zu/%zu jobs finished, day %.1f of the trace",
                       finished, total, static_cast<double>(virtual_ms) / 86'400'000.0);
        };
      }
      auto r = muster::sim::Replay(muster::sim::WithPolicy(config, policies[run.policy]), slice,
                                   options);
      RunResult& out = results[i];
      if (!r.ok()) {
        out.error = r.status().ToString();
      } else {
        out.figures.metrics = muster::sim::ComputeMetrics(*r);
        out.figures.largest_waits = muster::sim::LargestTenthWaits(*r);
        out.wall_seconds = r->wall_seconds;
        if (one) {
          size_t said = 0;
          for (const auto& o : r->jobs) {
            const std::string& why = !o.refused.empty() ? o.refused : o.waiting;
            if (why.empty()) continue;
            if (said++ < 10) {
              std::fprintf(stderr, "muster-sim: job %lld %s: %s\n",
                           static_cast<long long>(o.trace_id),
                           o.refused.empty() ? "never started" : "refused", why.c_str());
            }
          }
          if (said > 10)
            std::fprintf(stderr, "muster-sim: ... and %zu more such jobs\n", said - 10);
        }
        if (one && (!plot_path.empty() || !outcomes_path.empty())) out.replay = std::move(*r);
      }
      const size_t d = ++done;
      if (progress && !one) std::fprintf(stderr, "\rmuster-sim: %zu/%zu replays", d, runs.size());
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t t = 1; t < std::min<size_t>(threads, runs.size()); ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (progress) std::fputc('\n', stderr);
  for (const RunResult& r : results) {
    if (!r.error.empty()) Fail(r.error);
  }

  if (one) {
    PrintSummary(results[0].figures.metrics, results[0].wall_seconds);
    if (json_path == "-") {
      muster::sim::WriteJson(results[0].figures.metrics, std::cout);
    } else if (!json_path.empty()) {
      std::ofstream out(json_path);
      muster::sim::WriteJson(results[0].figures.metrics, out);
      if (!out) Fail("cannot write " + json_path);
    }
    if (!outcomes_path.empty()) {
      std::ofstream out(outcomes_path);
      muster::sim::WriteOutcomesCsv(results[0].replay, out);
      if (!out) Fail("cannot write " + outcomes_path);
    }
    if (!plot_path.empty()) {
      std::ofstream out(plot_path);
      muster::sim::WritePlotSvg(
          results[0].replay, results[0].figures.metrics,
          trace_path.substr(trace_path.find_last_of('/') + 1) + ", policy " + policies[0].name,
          out);
      if (!out) Fail("cannot write " + plot_path);
    }
    return 0;
  }

  // Several runs: per policy, the mean over its runs with a 95% interval, and the largest
  // tenth's waits pooled over them.
  std::vector<muster::sim::PolicySummary> summaries;
  for (size_t p = 0; p < policies.size(); ++p) {
    std::vector<const muster::sim::RunFigures*> mine;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].policy == p) mine.push_back(&results[i].figures);
    }
    summaries.push_back(muster::sim::Summarize(policies[p].name, mine));
  }
  // With the JSON on stdout, the table goes to stderr so that stdout stays one JSON document.
  muster::sim::WriteComparisonTable(summaries, json_path == "-" ? stderr : stdout);
  muster::sim::SequenceDraw draw{sequences, length, sample_first, seed, starts};
  std::ostringstream json;
  muster::sim::WriteComparisonJson(summaries, runs.size() / policies.size(),
                                   sequences > 0 ? &draw : nullptr, json);
  if (json_path == "-") {
    std::cout << json.str();
  } else if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << json.str();
    if (!out) Fail("cannot write " + json_path);
  }
  double wall = 0;
  for (const RunResult& r : results) wall += r.wall_seconds;
  std::fprintf(stderr, "muster-sim: %zu replays, %.1f s of replay time\n", runs.size(), wall);
  return 0;
}
