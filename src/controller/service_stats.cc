#include "muster/controller/service_stats.h"

#include <algorithm>
#include <cmath>

namespace muster::controller {

int ServiceStats::BucketOf(double us) {
  if (us < 1) return 0;
  return std::min(kBuckets - 1, static_cast<int>(std::floor(4 * std::log2(us))) + 1);
}

double ServiceStats::BucketTop(int bucket) {
  return bucket == 0 ? 1 : std::exp2(static_cast<double>(bucket) / 4);
}

double ServiceStats::Percentile(const Series& s, double p) {
  const auto rank = static_cast<uint64_t>(std::ceil(p * static_cast<double>(s.count)));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += s.buckets[static_cast<size_t>(b)];
    if (seen >= std::max<uint64_t>(rank, 1)) return std::min(BucketTop(b), s.max_us);
  }
  return s.max_us;
}

void ServiceStats::Record(std::string_view kind, Clock::duration took) {
  const double us = std::chrono::duration<double, std::micro>(took).count();
  std::lock_guard l(mu_);
  for (auto* series : {&series_, &lifetime_}) {
    auto it = series->find(kind);
    if (it == series->end()) it = series->emplace(std::string(kind), Series{}).first;
    Series& s = it->second;
    ++s.count;
    s.total_us += us;
    s.max_us = std::max(s.max_us, us);
    ++s.buckets[static_cast<size_t>(BucketOf(us))];
  }
}

void ServiceStats::CountResult(std::string_view kind, std::string_view code) {
  std::lock_guard l(mu_);
  ++results_[{std::string(kind), std::string(code)}];
}

const std::vector<double>& ServiceStats::BoundsUs() {
  static const std::vector<double> bounds = [] {
    std::vector<double> b;
    for (int k = 2; k <= 32; k += 2) b.push_back(std::exp2(k));
    return b;
  }();
  return bounds;
}

std::vector<ServiceStats::Histogram> ServiceStats::Histograms() const {
  const std::vector<double>& bounds = BoundsUs();
  std::lock_guard l(mu_);
  std::vector<Histogram> out;
  out.reserve(lifetime_.size());
  for (const auto& [kind, s] : lifetime_) {
    Histogram h{kind, s.count, s.total_us, {}};
    // Bucket 4k tops at 2^k us exactly: the bounds fall on bucket edges.
    uint64_t below = 0;
    int b = 0;
    for (double bound : bounds) {
      const int last = 4 * static_cast<int>(std::lround(std::log2(bound)));
      for (; b <= last && b < kBuckets; ++b) below += s.buckets[static_cast<size_t>(b)];
      h.at_or_below.push_back(below);
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::map<std::pair<std::string, std::string>, uint64_t> ServiceStats::Results() const {
  std::lock_guard l(mu_);
  return results_;
}

std::vector<ServiceStats::Timing> ServiceStats::Snapshot() const {
  std::lock_guard l(mu_);
  std::vector<Timing> out;
  out.reserve(series_.size());
  for (const auto& [kind, s] : series_) {
    out.push_back({kind, s.count, s.total_us / static_cast<double>(std::max<uint64_t>(s.count, 1)),
                   Percentile(s, 0.5), Percentile(s, 0.99), s.max_us});
  }
  return out;
}

void ServiceStats::Reset(int64_t now_ms) {
  std::lock_guard l(mu_);
  series_.clear();
  reset_ms_ = now_ms;
}

int64_t ServiceStats::reset_ms() const {
  std::lock_guard l(mu_);
  return reset_ms_;
}

}  // namespace muster::controller
