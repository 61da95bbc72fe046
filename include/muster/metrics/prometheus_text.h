// Prometheus' text exposition format (version 0.0.4), as the daemons' `/metrics` write it:
// families with their HELP and TYPE, samples with escaped labels, histograms from cumulative
// bucket counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace muster::metrics {

// `name="value"`, the value made printable (strings.h: valid UTF-8, no control bytes) and
// escaped as the format wants (backslash, double quote). Thread-compatible, as the writer.
std::string Label(const char* name, const std::string& value);
// A sample's value: integers exactly, others with 15 significant digits.
std::string Number(double v);

class PrometheusWriter {
 public:
  // HELP and TYPE ("counter", "gauge", "histogram"); once per family, before its samples.
  void Family(const std::string& name, const char* type, const char* help);
  // labels: "" or `a="x",b="y"` (from Label, joined with commas).
  void Sample(const std::string& name, const std::string& labels, double value);
  // A family of one sample.
  void Counter(const std::string& name, const char* help, double value);
  void Gauge(const std::string& name, const char* help, double value);
  // One histogram's samples (its family written before): `at_or_below[i]` counts observations
  // up to `bounds[i]`, cumulative; `count` all of them (the +Inf bucket).
  void Histogram(const std::string& name, const std::string& labels,
                 const std::vector<double>& bounds, const std::vector<uint64_t>& at_or_below,
                 uint64_t count, double sum);
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace muster::metrics
