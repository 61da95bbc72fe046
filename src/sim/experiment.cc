#include "muster/sim/experiment.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "muster/common/duration.h"

namespace muster::sim {

Result<PolicySpec> ParsePolicy(std::string_view text) {
  PolicySpec p;
  p.name = std::string(text);
  std::string_view order = text, backfill, fill;
  if (auto tilde = text.find('~'); tilde != std::string_view::npos) {
    // ~WAIT: protect_after, as a config file writes a duration (24h, 90m, 3600s), at most the
    // config's own bound of 3,650 days.
    const std::string_view wait = text.substr(tilde + 1);
    auto ms = ParseDurationMs(wait);
    if (!ms.ok() || *ms <= 0 || *ms > 3'650LL * 86'400'000) {
      return InvalidArgument("bad wait '" + std::string(wait) + "' after ~ in policy '" + p.name +
                             "' (a duration up to 3650d: 24h, 90m)");
    }
    p.protect_after_ms = *ms;
    text = text.substr(0, tilde);
    order = text;
  }
  if (auto at = text.find('@'); at != std::string_view::npos) {
    const std::string_view placement = text.substr(at + 1);
    if (placement != "topology" && placement != "first_fit" && placement != "random") {
      return InvalidArgument("unknown placement '" + std::string(placement) + "' in policy '" +
                             p.name + "' (topology, first_fit, random)");
    }
    p.placement = std::string(placement);
    text = text.substr(0, at);
    order = text;
  }
  if (auto slash = text.find('/'); slash != std::string_view::npos) {
    fill = text.substr(slash + 1);
    text = text.substr(0, slash);
    order = text;
  }
  if (fill.empty()) {
  } else if (fill == "priority" || fill == "shortest" || fill == "area") {
    p.fill = std::string(fill);
  } else {
    return InvalidArgument("unknown backfill order '" + std::string(fill) + "' in policy '" +
                           p.name + "' (priority, shortest, area)");
  }
  if (auto plus = text.find('+'); plus != std::string_view::npos) {
    order = text.substr(0, plus);
    backfill = text.substr(plus + 1);
  }
  if (order == "muster") {
    if (p.protect_after_ms > 0) {
      return InvalidArgument("~WAIT in policy '" + p.name +
                             "' applies to a published order (fcfs, sjf, wfp3, unicep, f1, hrrn)");
    }
    p.order.clear();
  } else if (order == "fcfs" || order == "sjf" || order == "wfp3" || order == "unicep" ||
             order == "f1" || order == "hrrn") {
    p.order = std::string(order);
  } else {
    return InvalidArgument("unknown order '" + std::string(order) + "' in policy '" + p.name +
                           "' (muster, fcfs, sjf, wfp3, unicep, f1, hrrn)");
  }
  if (backfill.empty()) {
  } else if (backfill == "strict") {
    p.backfill = "strict";
    p.depth = 1;
  } else if (backfill == "easy") {
    p.backfill = "standard";
    p.depth = 1;
  } else if (backfill == "conservative") {
    p.backfill = "standard";
    p.depth = 100'000;
  } else if (backfill == "none") {
    p.depth = 0;
  } else {
    return InvalidArgument("unknown backfill '" + std::string(backfill) + "' in policy '" + p.name +
                           "' (strict, easy, conservative, none)");
  }
  return p;
}

Config WithPolicy(Config config, const PolicySpec& p) {
  if (!p.order.empty()) config.scheduling.order = p.order;
  if (!p.backfill.empty()) config.scheduling.backfill = p.backfill;
  if (p.depth >= 0) config.scheduling.backfill_depth = static_cast<uint32_t>(p.depth);
  if (!p.fill.empty()) config.scheduling.backfill_order = p.fill;
  if (!p.placement.empty()) config.scheduling.placement = p.placement;
  if (p.protect_after_ms > 0) config.scheduling.protect_after_ms = p.protect_after_ms;
  return config;
}

Result<std::vector<size_t>> SampleStarts(size_t jobs, size_t length, size_t count, uint64_t seed,
                                         size_t first) {
  const size_t n = first > 0 ? std::min(jobs, first) : jobs;
  if (length == 0 || n < 2 * length + 2) {
    return InvalidArgument("sequences of " + std::to_string(length) + " jobs need at least " +
                           std::to_string(2 * length + 2) + " jobs to draw from; the trace has " +
                           std::to_string(n));
  }
  // splitmix64: the same draws on every platform for a seed (std::uniform_int_distribution's are
  // the library's own).
  uint64_t x = seed;
  auto next = [&x] {
    x += 0x9e3779b97f4a7c15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  const uint64_t lo = length, span = n - length - 1 - lo;  // [length, n - length - 1)
  std::vector<size_t> starts;
  for (size_t i = 0; i < count; ++i) starts.push_back(static_cast<size_t>(lo + next() % span));
  return starts;
}

Interval MeanInterval(const std::vector<double>& v) {
  Interval r;
  r.n = v.size();
  if (v.empty()) return r;
  r.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  if (v.size() < 2) return r;
  double ss = 0;
  for (double x : v) ss += (x - r.mean) * (x - r.mean);
  const double sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  // Student's t at 97.5% for n - 1 degrees of freedom (1..30), then the normal's 1.96.
  static constexpr double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  const size_t df = v.size() - 1;
  const double t = df <= 30 ? kT[df - 1] : 1.96;
  r.half_width = t * sd / std::sqrt(static_cast<double>(v.size()));
  return r;
}

namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

PolicySummary Summarize(const std::string& policy, const std::vector<const RunFigures*>& runs) {
  PolicySummary s;
  s.policy = policy;
  std::vector<double> util, wait, stranded, large;
  double in_leaf = 0;
  for (const RunFigures* r : runs) {
    const Metrics& m = r->metrics;
    s.gpu_cluster = s.gpu_cluster || m.gpu_cluster;
    s.bounded_slowdown_runs.push_back(m.bounded_slowdown);
    util.push_back(m.utilization);
    wait.push_back(m.wait.mean_s);
    stranded.push_back(m.stranded_gpu_share);
    s.gangs_with_leaf_room += m.gangs_with_leaf_room;
    in_leaf += m.in_one_leaf * static_cast<double>(m.gangs_with_leaf_room);
    large.insert(large.end(), r->largest_waits.begin(), r->largest_waits.end());
  }
  std::sort(large.begin(), large.end());
  s.bounded_slowdown = MeanInterval(s.bounded_slowdown_runs);
  s.utilization = MeanInterval(util);
  s.wait_mean_s = MeanInterval(wait);
  s.stranded_gpu_share = MeanInterval(stranded);
  s.large_p99_s = Percentile(large, 99);
  s.large_max_s = large.empty() ? 0 : large.back();
  s.in_one_leaf =
      s.gangs_with_leaf_room > 0 ? in_leaf / static_cast<double>(s.gangs_with_leaf_room) : 0;
  return s;
}

void WriteComparisonJson(const std::vector<PolicySummary>& policies, size_t runs_per_policy,
                         const SequenceDraw* draw, std::ostream& out) {
  out << "{\n  \"runs_per_policy\": " << runs_per_policy << ",\n";
  if (draw) {
    out << "  \"sequences\": {\"count\": " << draw->count << ", \"length\": " << draw->length
        << ", \"seed\": " << draw->seed << ", \"sample_first\": " << draw->sample_first
        << ", \"starts\": [";
    for (size_t k = 0; k < draw->starts.size(); ++k) out << (k ? ", " : "") << draw->starts[k];
    out << "]},\n";
  }
  out << "  \"policies\": [";
  for (size_t p = 0; p < policies.size(); ++p) {
    const PolicySummary& s = policies[p];
    out << (p ? ",\n    " : "\n    ") << "{\"policy\": \"" << s.policy
        << "\", \"bounded_slowdown\": {\"mean\": " << Fixed(s.bounded_slowdown.mean, 6)
        << ", \"ci95\": " << Fixed(s.bounded_slowdown.half_width, 6)
        << "}, \"utilization\": {\"mean\": " << Fixed(s.utilization.mean, 6)
        << ", \"ci95\": " << Fixed(s.utilization.half_width, 6)
        << "}, \"wait_mean_s\": {\"mean\": " << Fixed(s.wait_mean_s.mean, 6)
        << ", \"ci95\": " << Fixed(s.wait_mean_s.half_width, 6)
        << "}, \"largest_tenth_wait\": {\"p99_s\": " << Fixed(s.large_p99_s, 3)
        << ", \"max_s\": " << Fixed(s.large_max_s, 3)
        << "}, \"stranded_gpu_share\": {\"mean\": " << Fixed(s.stranded_gpu_share.mean, 6)
        << ", \"ci95\": " << Fixed(s.stranded_gpu_share.half_width, 6)
        << "}, \"gangs_with_leaf_room\": " << s.gangs_with_leaf_room
        << ", \"in_one_leaf\": " << Fixed(s.in_one_leaf, 6) << ", \"bounded_slowdown_runs\": [";
    for (size_t k = 0; k < s.bounded_slowdown_runs.size(); ++k) {
      out << (k ? ", " : "") << Fixed(s.bounded_slowdown_runs[k], 6);
    }
    out << "]}";
  }
  out << "\n  ]\n}\n";
}

void WriteComparisonTable(const std::vector<PolicySummary>& policies, std::FILE* out) {
  std::fprintf(out, "%-20s %22s %16s %12s %12s %12s\n", "policy", "bounded slowdown", "utilization",
               "wait mean s", "large p99 s", "large max s");
  for (const PolicySummary& s : policies) {
    std::fprintf(out, "%-20s %12s ± %-7s %8s ± %-5s %12s %12s %12s\n", s.policy.c_str(),
                 Fixed(s.bounded_slowdown.mean, 2).c_str(),
                 Fixed(s.bounded_slowdown.half_width, 2).c_str(),
                 Fixed(s.utilization.mean, 3).c_str(), Fixed(s.utilization.half_width, 3).c_str(),
                 Fixed(s.wait_mean_s.mean, 0).c_str(), Fixed(s.large_p99_s, 0).c_str(),
                 Fixed(s.large_max_s, 0).c_str());
    if (s.gpu_cluster) {
      std::fprintf(out, "%-20s %22s %16s   gangs in one leaf when one had room %s%% of %llu\n", "",
                   ("stranded " + Fixed(s.stranded_gpu_share.mean * 100, 2) + "%").c_str(), "",
                   Fixed(s.in_one_leaf * 100, 1).c_str(),
                   static_cast<unsigned long long>(s.gangs_with_leaf_room));
    }
  }
}

}  // namespace muster::sim
