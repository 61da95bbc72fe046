// What the controller spends its time on, as sdiag shows it: for each kind of work (an API
// method, an agent message, a scheduling pass) how many there were and how long each took from
// arrival to done (queueing for the strand included): mean, p50, p99 and max. Percentiles come
// from buckets a quarter of a power of two wide (within 19% above the true value, never below).
// Thread-safe: sacct's scans finish on the query worker.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace muster::controller {

class ServiceStats {
 public:
  using Clock = std::chrono::steady_clock;

  struct Timing {
    std::string kind;
    uint64_t count = 0;
    double mean_us = 0, p50_us = 0, p99_us = 0, max_us = 0;
  };

  void Record(std::string_view kind, Clock::duration took);
  // How a request of `kind` ended ("OK", "NOT_FOUND", ...), for the metrics.
  void CountResult(std::string_view kind, std::string_view code);
  // By kind; the counts since the start or the last Reset.
  std::vector<Timing> Snapshot() const;

  // The same timings since the controller started, whatever Reset did (Prometheus' counters
  // only grow): cumulative counts at every boundary of `kBounds`.
  struct Histogram {
    std::string kind;
    uint64_t count = 0;
    double sum_us = 0;
    std::vector<uint64_t> at_or_below;  // per kBoundsUs entry
  };
  // 4 us to 2^32 us (72 minutes), each four times the one before: whole buckets of the series.
  static const std::vector<double>& BoundsUs();
  std::vector<Histogram> Histograms() const;
  // (kind, code) -> requests since the controller started.
  std::map<std::pair<std::string, std::string>, uint64_t> Results() const;
  // The counts start again; reset_ms() says when (0: never reset).
  void Reset(int64_t now_ms);
  int64_t reset_ms() const;

 private:
  static constexpr int kBuckets = 4 * 40;  // up to 2^40 us (12 days)
  struct Series {
    uint64_t count = 0;
    double total_us = 0, max_us = 0;
    std::array<uint64_t, kBuckets> buckets{};
  };
  static int BucketOf(double us);
  static double BucketTop(int bucket);
  static double Percentile(const Series& s, double p);

  mutable std::mutex mu_;
  std::map<std::string, Series, std::less<>> series_;
  std::map<std::string, Series, std::less<>> lifetime_;
  std::map<std::pair<std::string, std::string>, uint64_t> results_;
  int64_t reset_ms_ = 0;
};

}  // namespace muster::controller
