#include "muster/sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <queue>

namespace muster::sim {
namespace {

WaitStats Stats(std::vector<double> waits) {
  WaitStats s;
  s.jobs = waits.size();
  if (waits.empty()) return s;
  std::sort(waits.begin(), waits.end());
  s.mean_s = std::accumulate(waits.begin(), waits.end(), 0.0) / static_cast<double>(waits.size());
  s.median_s = Percentile(waits, 50);
  s.p95_s = Percentile(waits, 95);
  s.p99_s = Percentile(waits, 99);
  s.max_s = waits.back();
  return s;
}

// Size classes by powers of four: 1, 2-4, 5-16, 17-64, 65-256, ...
size_t ClassOf(uint64_t size) {
  size_t c = 0;
  for (uint64_t top = 1; size > top; top *= 4) ++c;
  return c;
}

std::string ClassName(size_t c) {
  if (c == 0) return "1";
  uint64_t lo = 1;
  for (size_t i = 1; i < c; ++i) lo *= 4;
  return std::to_string(lo + 1) + "-" + std::to_string(lo * 4);
}

std::string Num(double v) {
  char buf[64];
  if (std::fabs(v - std::round(v)) < 1e-9 && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.6f", v);
  }
  return buf;
}

std::string Quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

void WriteWait(const WaitStats& w, std::ostream& out) {
  out << "{\"jobs\": " << w.jobs << ", \"mean_s\": " << Num(w.mean_s)
      << ", \"median_s\": " << Num(w.median_s) << ", \"p95_s\": " << Num(w.p95_s)
      << ", \"p99_s\": " << Num(w.p99_s) << ", \"max_s\": " << Num(w.max_s) << "}";
}

// The waits of `account`'s started GPU jobs that fit within its guarantee when submitted, with
// what it held or had asked for then: the GPUs its running jobs held (borrowed ones too), and
// those of its earlier jobs still waiting, except a waiting job larger than the whole guarantee
// (it can only run by borrowing, or never: the guarantee was never going to cover it).
std::vector<double> WithinGuaranteeWaits(const ReplayResult& r, const std::string& account,
                                         const AccountTerms& terms) {
  std::vector<double> waits;
  // (when, GPUs taken (+) or given back (-)) of the account's earlier jobs, earliest first.
  std::priority_queue<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>,
                      std::greater<>>
      changes;
  int64_t claimed = 0;
  for (const JobOutcome& j : r.jobs) {  // in submission order
    if (j.account != account || !j.refused.empty() || j.gpus == 0) continue;
    while (!changes.empty() && changes.top().first <= j.submit_ms) {
      claimed += changes.top().second;
      changes.pop();
    }
    const bool started = j.start_ms >= 0 && j.end_ms >= 0;
    const int64_t gpus = j.gpus;
    if (started && claimed + gpus <= static_cast<int64_t>(terms.guaranteed_gpus)) {
      waits.push_back(static_cast<double>(j.start_ms - j.submit_ms) / 1000.0);
    }
    // What it claims from now on: from its submission to its end if the guarantee can cover
    // it (a job that never ended claims to the end), else only while it runs.
    if (j.gpus <= terms.guaranteed_gpus) {
      changes.emplace(j.submit_ms, gpus);
      if (started) changes.emplace(j.end_ms, -gpus);
      continue;
    }
    // Too large for the guarantee: what its runs held (preempted ones, then its last).
    for (const auto& [from, to] : j.preempted_runs) {
      changes.emplace(from, gpus);
      changes.emplace(to, -gpus);
    }
    if (j.start_ms >= 0) changes.emplace(j.start_ms, gpus);
    if (started) changes.emplace(j.end_ms, -gpus);
  }
  return waits;
}

// Every run of every job (those preemption ended too), spread over windows of whole hours (about
// 50 over the makespan).
void UsageOverTime(const ReplayResult& r, int64_t first_submit_ms, int64_t makespan_ms,
                   Metrics& m) {
  if (makespan_ms <= 0) return;
  const int64_t hour_ms = 3'600'000;
  const int64_t hours = std::max<int64_t>(1, (makespan_ms + 50 * hour_ms - 1) / (50 * hour_ms));
  const int64_t window_ms = hours * hour_ms;
  m.usage_window_s = static_cast<double>(window_ms) / 1000.0;
  const size_t count = static_cast<size_t>((makespan_ms + window_ms - 1) / window_ms);
  m.usage_over_time.assign(std::max<size_t>(count, 1), {});
  for (size_t w = 0; w < m.usage_over_time.size(); ++w) {
    m.usage_over_time[w].start_s =
        static_cast<double>(static_cast<int64_t>(w) * window_ms) / 1000.0;
  }
  auto add = [&](const JobOutcome& j, int64_t start_ms, int64_t end_ms) {
    const double units = static_cast<double>(m.gpu_cluster ? j.gpus : j.procs);
    const int64_t from = start_ms - first_submit_ms, to = end_ms - first_submit_ms;
    for (int64_t w = std::max<int64_t>(from, 0) / window_ms; w * window_ms < to; ++w) {
      const size_t i = std::min(static_cast<size_t>(w), m.usage_over_time.size() - 1);
      const int64_t lo = std::max(from, w * window_ms), hi = std::min(to, (w + 1) * window_ms);
      m.usage_over_time[i].unit_hours[j.account] +=
          units * static_cast<double>(hi - lo) / 3'600'000.0;
    }
  };
  for (const JobOutcome& j : r.jobs) {
    if (!j.refused.empty()) continue;
    for (const auto& [from, to] : j.preempted_runs) add(j, from, to);
    if (j.start_ms >= 0 && j.end_ms >= 0) add(j, j.start_ms, j.end_ms);
  }
}

}  // namespace

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size())));
  return sorted[i - 1];
}

std::vector<double> LargestTenthWaits(const ReplayResult& r) {
  struct Big {
    double size;
    double wait;
  };
  std::vector<Big> bigs;
  const bool gpus = r.total_gpus > 0;
  for (const JobOutcome& j : r.jobs) {
    if (!j.refused.empty() || j.start_ms < 0 || j.end_ms < 0) continue;
    const uint64_t size = std::max<uint64_t>(1, gpus ? j.gpus : j.procs);
    bigs.push_back(
        {static_cast<double>(size) * static_cast<double>(std::max<int64_t>(j.req_time_ms, 1)),
         static_cast<double>(j.start_ms - j.submit_ms) / 1000.0});
  }
  // Sorted by size, ties by wait, so that the cut does not depend on the trace's order.
  std::sort(bigs.begin(), bigs.end(), [](const Big& a, const Big& b) {
    return a.size != b.size ? a.size > b.size : a.wait > b.wait;
  });
  std::vector<double> waits;
  for (size_t i = 0; i < (bigs.size() + 9) / 10; ++i) waits.push_back(bigs[i].wait);
  return waits;
}

Metrics ComputeMetrics(const ReplayResult& r) {
  Metrics m;
  m.jobs = r.jobs.size();
  m.passes = r.passes;
  m.gpu_cluster = r.total_gpus > 0;
  int64_t first_submit = -1, last_end = 0;
  double used = 0;  // allocated unit-seconds (GPUs on a GPU cluster, else CPUs)
  std::vector<double> waits;
  std::vector<double> slowdowns;
  std::vector<std::vector<double>> class_waits, class_slowdowns;
  uint64_t leaf_ok = 0, domain_ok = 0;
  for (const JobOutcome& j : r.jobs) {
    if (first_submit < 0 || j.submit_ms < first_submit) first_submit = j.submit_ms;
    if (!j.refused.empty()) {
      ++m.refused;
      continue;
    }
    if (j.start_ms < 0 || j.end_ms < 0) {
      ++m.never_started;
      continue;
    }
    ++m.started;
    m.killed_at_limit += j.killed_at_limit;
    last_end = std::max(last_end, j.end_ms);
    const double run_s = static_cast<double>(j.end_ms - j.start_ms) / 1000.0;
    const double wait_s = static_cast<double>(j.start_ms - j.submit_ms) / 1000.0;
    const uint64_t size = m.gpu_cluster ? j.gpus : j.procs;
    used += run_s * static_cast<double>(size);
    waits.push_back(wait_s);
    const double sd = std::max((wait_s + run_s) / std::max(run_s, kSlowdownTauSeconds), 1.0);
    slowdowns.push_back(sd);
    const size_t c = ClassOf(std::max<uint64_t>(size, 1));
    if (class_waits.size() <= c) {
      class_waits.resize(c + 1);
      class_slowdowns.resize(c + 1);
    }
    class_waits[c].push_back(wait_s);
    class_slowdowns[c].push_back(sd);
    if (j.nodes > 1 && j.one_leaf_had_room) {
      ++m.gangs_with_leaf_room;
      leaf_ok += j.leaves == 1;
    }
    if (j.nodes > 1 && j.one_domain_had_room) {
      ++m.gangs_with_domain_room;
      domain_ok += j.nvlink_domains == 1;
    }
    AccountUsage& a = m.accounts[j.account];
    a.cpu_hours += run_s * j.procs / 3600.0;
    a.gpu_hours += run_s * j.gpus / 3600.0;
    ++a.jobs;
    a.wait_mean_s += wait_s;  // sums until every job is in
    a.bounded_slowdown += sd;
  }
  for (auto& [name, a] : m.accounts) {
    a.wait_mean_s /= static_cast<double>(std::max<uint64_t>(a.jobs, 1));
    a.bounded_slowdown /= static_cast<double>(std::max<uint64_t>(a.jobs, 1));
  }
  for (const auto& [name, terms] : r.accounts) {
    AccountUsage& a = m.accounts[name];
    a.configured = true;
    a.share = terms.share;
    a.guaranteed_gpus = terms.guaranteed_gpus;
    a.has_quota = terms.has_quota;
    if (terms.has_quota) a.within_guarantee = Stats(WithinGuaranteeWaits(r, name, terms));
  }
  for (const JobOutcome& j : r.jobs) {
    m.preemptions += j.preemptions;
    m.lost_gpu_hours += j.lost_gpu_seconds / 3600.0;
    m.lost_cpu_hours += j.lost_cpu_seconds / 3600.0;
  }
  if (first_submit < 0) first_submit = 0;
  m.makespan_s = static_cast<double>(std::max<int64_t>(0, last_end - first_submit)) / 1000.0;
  const double capacity =
      static_cast<double>(m.gpu_cluster ? r.total_gpus : r.total_cpus) * m.makespan_s;
  m.utilization = capacity > 0 ? used / capacity : 0;
  m.wait = Stats(waits);
  m.bounded_slowdown = slowdowns.empty()
                           ? 0
                           : std::accumulate(slowdowns.begin(), slowdowns.end(), 0.0) /
                                 static_cast<double>(slowdowns.size());
  for (size_t c = 0; c < class_waits.size(); ++c) {
    if (class_waits[c].empty()) continue;
    SizeClass sc;
    sc.name = ClassName(c);
    sc.wait = Stats(class_waits[c]);
    sc.bounded_slowdown =
        std::accumulate(class_slowdowns[c].begin(), class_slowdowns[c].end(), 0.0) /
        static_cast<double>(class_slowdowns[c].size());
    m.by_size.push_back(std::move(sc));
  }
  m.large_wait = Stats(LargestTenthWaits(r));
  m.in_one_leaf = m.gangs_with_leaf_room
                      ? static_cast<double>(leaf_ok) / static_cast<double>(m.gangs_with_leaf_room)
                      : 0;
  m.in_one_domain = m.gangs_with_domain_room ? static_cast<double>(domain_ok) /
                                                   static_cast<double>(m.gangs_with_domain_room)
                                             : 0;
  // Time-weighted over the samples (each holds until the next).
  double stranded = 0, waiting = 0, span = 0;
  for (size_t i = 0; i + 1 < r.samples.size(); ++i) {
    const double dt = static_cast<double>(r.samples[i + 1].t_ms - r.samples[i].t_ms);
    span += dt;
    if (r.samples[i].stranded_gpus > 0 || r.samples[i].queued > 0) {
      stranded += dt * static_cast<double>(r.samples[i].stranded_gpus);
    }
    if (r.samples[i].stranded_gpus > 0) waiting += dt;
  }
  if (span > 0 && r.total_gpus > 0) {
    m.stranded_gpu_share = stranded / span / static_cast<double>(r.total_gpus);
    m.whole_node_waiting_share = waiting / span;
  }
  if (!r.accounts.empty()) {
    UsageOverTime(r, first_submit, std::max<int64_t>(0, last_end - first_submit), m);
  }
  double total_use = 0;
  for (const auto& [name, a] : m.accounts) total_use += m.gpu_cluster ? a.gpu_hours : a.cpu_hours;
  for (auto& [name, a] : m.accounts) {
    a.share_of_use = total_use > 0 ? (m.gpu_cluster ? a.gpu_hours : a.cpu_hours) / total_use : 0;
  }
  return m;
}

void WriteJson(const Metrics& m, std::ostream& out) {
  out << "{\n";
  out << "  \"jobs\": " << m.jobs << ",\n";
  out << "  \"started\": " << m.started << ",\n";
  out << "  \"refused\": " << m.refused << ",\n";
  out << "  \"never_started\": " << m.never_started << ",\n";
  out << "  \"killed_at_limit\": " << m.killed_at_limit << ",\n";
  out << "  \"unit\": " << Quoted(m.gpu_cluster ? "gpus" : "cpus") << ",\n";
  out << "  \"makespan_s\": " << Num(m.makespan_s) << ",\n";
  out << "  \"utilization\": " << Num(m.utilization) << ",\n";
  out << "  \"wait\": ";
  WriteWait(m.wait, out);
  out << ",\n";
  out << "  \"bounded_slowdown\": " << Num(m.bounded_slowdown) << ",\n";
  out << "  \"bounded_slowdown_tau_s\": " << Num(kSlowdownTauSeconds) << ",\n";
  out << "  \"by_size\": [";
  for (size_t i = 0; i < m.by_size.size(); ++i) {
    const SizeClass& c = m.by_size[i];
    out << (i ? ",\n    " : "\n    ") << "{\"size\": " << Quoted(c.name) << ", \"wait\": ";
    WriteWait(c.wait, out);
    out << ", \"bounded_slowdown\": " << Num(c.bounded_slowdown) << "}";
  }
  out << (m.by_size.empty() ? "],\n" : "\n  ],\n");
  out << "  \"largest_tenth_wait\": ";
  WriteWait(m.large_wait, out);
  out << ",\n";
  out << "  \"stranded_gpu_share\": " << Num(m.stranded_gpu_share) << ",\n";
  out << "  \"whole_node_waiting_share\": " << Num(m.whole_node_waiting_share) << ",\n";
  out << "  \"gangs_with_leaf_room\": " << m.gangs_with_leaf_room << ",\n";
  out << "  \"in_one_leaf\": " << Num(m.in_one_leaf) << ",\n";
  out << "  \"gangs_with_domain_room\": " << m.gangs_with_domain_room << ",\n";
  out << "  \"in_one_domain\": " << Num(m.in_one_domain) << ",\n";
  out << "  \"preemptions\": " << m.preemptions << ",\n";
  out << "  \"lost_gpu_hours\": " << Num(m.lost_gpu_hours) << ",\n";
  out << "  \"lost_cpu_hours\": " << Num(m.lost_cpu_hours) << ",\n";
  out << "  \"passes\": " << m.passes << ",\n";
  out << "  \"accounts\": {";
  bool first = true;
  for (const auto& [name, a] : m.accounts) {
    out << (first ? "\n    " : ",\n    ") << Quoted(name) << ": {\"jobs\": " << a.jobs
        << ", \"cpu_hours\": " << Num(a.cpu_hours) << ", \"gpu_hours\": " << Num(a.gpu_hours)
        << ", \"share_of_use\": " << Num(a.share_of_use)
        << ", \"wait_mean_s\": " << Num(a.wait_mean_s)
        << ", \"bounded_slowdown\": " << Num(a.bounded_slowdown);
    if (a.configured) out << ", \"share\": " << Num(a.share);
    if (a.has_quota) {
      out << ", \"guaranteed_gpus\": " << a.guaranteed_gpus << ", \"within_guarantee_wait\": ";
      WriteWait(a.within_guarantee, out);
    }
    out << "}";
    first = false;
  }
  out << (first ? "}" : "\n  }");
  if (!m.usage_over_time.empty()) {
    out << ",\n  \"usage_window_s\": " << Num(m.usage_window_s) << ",\n  \"usage_over_time\": [";
    for (size_t w = 0; w < m.usage_over_time.size(); ++w) {
      out << (w ? ",\n    " : "\n    ") << "{\"start_s\": " << Num(m.usage_over_time[w].start_s)
          << ", \"unit_hours\": {";
      bool first_account = true;
      for (const auto& [name, h] : m.usage_over_time[w].unit_hours) {
        out << (first_account ? "" : ", ") << Quoted(name) << ": " << Num(h);
        first_account = false;
      }
      out << "}}";
    }
    out << "\n  ]";
  }
  out << "\n";
  out << "}\n";
}

namespace {

// A CSV field: quoted (quotes doubled) where it holds a comma, a quote or a line break.
std::string CsvField(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string o = "\"";
  for (char c : v) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

std::string Seconds(int64_t ms) { return ms < 0 ? "-1" : Num(static_cast<double>(ms) / 1000.0); }

}  // namespace

void WriteOutcomesCsv(const ReplayResult& r, std::ostream& out) {
  out << "trace_id,user,account,procs,gpus,nodes,submit_s,start_s,end_s,wait_s,killed_at_limit,"
         "preemptions,lost_gpu_hours,leaves,reason\n";
  for (const JobOutcome& j : r.jobs) {
    const bool ran = j.start_ms >= 0 && j.end_ms >= 0;
    out << j.trace_id << ',' << CsvField(j.user) << ',' << CsvField(j.account) << ',' << j.procs
        << ',' << j.gpus << ',' << j.nodes << ',' << Seconds(j.submit_ms) << ','
        << Seconds(j.start_ms) << ',' << Seconds(j.end_ms) << ','
        << (ran ? Seconds(j.start_ms - j.submit_ms) : "-1") << ',' << (j.killed_at_limit ? 1 : 0)
        << ',' << j.preemptions << ',' << Num(j.lost_gpu_seconds / 3600.0) << ',' << j.leaves << ','
        << CsvField(!j.refused.empty() ? j.refused : j.waiting) << '\n';
  }
}

}  // namespace muster::sim
