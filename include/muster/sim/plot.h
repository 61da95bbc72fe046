// A replay as one picture for people: a self-contained SVG (no script, no external font or file)
// with the cluster's utilization and the queue's length over time, and the wait per job size
// class, under a title and the headline metrics. Pure and deterministic: the same replay gives
// the same bytes (numbers at fixed precision, no time stamps).
#pragma once

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "muster/sim/metrics.h"
#include "muster/sim/replay.h"

namespace muster::sim {

// The most points a time series of the plot has, however many samples the replay kept.
inline constexpr size_t kPlotMaxPoints = 1000;

// One time bucket of a series.
struct SeriesPoint {
  double t_s = 0;   // the bucket's middle, seconds since the first sample
  double mean = 0;  // time-weighted mean of the value over the bucket
  double max = 0;   // the largest value held for some time in the bucket
};

// Cuts the span from the first sample to the last into at most `buckets` equal buckets (no
// shorter than a millisecond) and gives each the time-weighted mean and the max of `value`, each
// sample holding until the next. Empty for fewer than two samples or a span of zero; a bucket no
// sample covers (samples out of order) is left out.
std::vector<SeriesPoint> BucketSeries(const std::vector<Sample>& samples,
                                      const std::function<double(const Sample&)>& value,
                                      size_t buckets = kPlotMaxPoints);

// Escapes text for XML (& < > " '), drops the control characters XML cannot hold and replaces
// bytes that are not UTF-8 with '?'.
std::string XmlEscape(const std::string& text);

// The SVG (about 900 px wide): the title (escaped here), the headline metrics, the allocated
// share over time (GPUs on a cluster with GPUs, else CPUs), the queued jobs over time (bucket max
// shaded, time-weighted mean as a line) and the mean and p95 wait per size class of `m.by_size`.
// A part with nothing to draw says so.
void WritePlotSvg(const ReplayResult& r, const Metrics& m, const std::string& title,
                  std::ostream& out);

}  // namespace muster::sim
