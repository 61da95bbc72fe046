#include "muster/metrics/prometheus_text.h"

#include <cstdio>
#include <utility>

#include "muster/common/strings.h"

namespace muster::metrics {

std::string Label(const char* name, const std::string& raw) {
  // Valid UTF-8 without control bytes first (a GPU's health text from NVML, a node's name):
  // one bad byte would make Prometheus refuse the whole scrape.
  std::string value;
  AppendPrintable(value, raw);
  std::string out = std::string(name) + "=\"";
  out.reserve(out.size() + value.size() + 1);
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

void PrometheusWriter::Family(const std::string& name, const char* type, const char* help) {
  out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void PrometheusWriter::Sample(const std::string& name, const std::string& labels, double value) {
  out_ += name;
  if (!labels.empty()) out_ += "{" + labels + "}";
  out_ += " " + Number(value) + "\n";
}

void PrometheusWriter::Counter(const std::string& name, const char* help, double value) {
  Family(name, "counter", help);
  Sample(name, "", value);
}

void PrometheusWriter::Gauge(const std::string& name, const char* help, double value) {
  Family(name, "gauge", help);
  Sample(name, "", value);
}

void PrometheusWriter::Histogram(const std::string& name, const std::string& labels,
                                 const std::vector<double>& bounds,
                                 const std::vector<uint64_t>& at_or_below, uint64_t count,
                                 double sum) {
  const std::string sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i < bounds.size() && i < at_or_below.size(); ++i) {
    Sample(name + "_bucket", labels + sep + Label("le", Number(bounds[i])),
           static_cast<double>(at_or_below[i]));
  }
  Sample(name + "_bucket", labels + sep + "le=\"+Inf\"", static_cast<double>(count));
  Sample(name + "_sum", labels, sum);
  Sample(name + "_count", labels, static_cast<double>(count));
}

}  // namespace muster::metrics
