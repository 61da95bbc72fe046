#include "muster/sim/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <utility>

namespace muster::sim {
namespace {

constexpr double kWidth = 900, kHeight = 900;
constexpr double kAccountsHeight = 330;  // the accounts panel's, below the others
// The accounts panel's colours, the heaviest account first; the rest are drawn together in grey.
constexpr const char* kAccountColours[] = {"#4c78a8", "#f58518", "#54a24b", "#e45756",
                                           "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6"};
constexpr size_t kAccountsDrawn = std::size(kAccountColours);
constexpr double kLeft = 80, kRight = 870;  // the plot areas' x range

struct Box {
  double left, top, width, height;
  double bottom() const { return top + height; }
  double right() const { return left + width; }
};

// A number at fixed precision; never "nan", "inf" or "-0".
std::string Num(double v, int digits) {
  if (!std::isfinite(v)) v = 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  std::string s = buf;
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

// A coordinate.
std::string C(double v) { return Num(v, 1); }

std::string Percent(double share) { return Num(share * 100, 1) + "%"; }

// A duration in the unit that reads best.
std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) s = 0;
  if (s < 120) return Num(s, 0) + " s";
  if (s < 7200) return Num(s / 60, 1) + " min";
  if (s < 172'800) return Num(s / 3600, 1) + " h";
  return Num(s / 86'400, 1) + " d";
}

// A round step for about `target` ticks over [0, range].
double NiceStep(double range, int target = 5) {
  if (!(range > 0) || !std::isfinite(range)) return 1;
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

// Decimals a tick label needs for `step`.
int StepDigits(double step) {
  if (step >= 1) return 0;
  return static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
}

void Text(std::ostream& out, double x, double y, const std::string& escaped,
          const std::string& attrs = "") {
  out << "<text x=\"" << C(x) << "\" y=\"" << C(y) << "\"" << attrs << ">" << escaped
      << "</text>\n";
}

void Line(std::ostream& out, double x1, double y1, double x2, double y2, const std::string& attrs) {
  out << "<line x1=\"" << C(x1) << "\" y1=\"" << C(y1) << "\" x2=\"" << C(x2) << "\" y2=\"" << C(y2)
      << "\"" << attrs << "/>\n";
}

void Frame(std::ostream& out, const Box& b) {
  out << "<rect x=\"" << C(b.left) << "\" y=\"" << C(b.top) << "\" width=\"" << C(b.width)
      << "\" height=\"" << C(b.height) << "\" fill=\"none\" stroke=\"#888\"/>\n";
}

void Heading(std::ostream& out, const Box& b, const std::string& escaped) {
  Text(out, b.left, b.top - 8, escaped, " class=\"h\"");
}

void YTitle(std::ostream& out, const Box& b, const std::string& escaped) {
  const double x = 22, y = b.top + b.height / 2;
  Text(out, x, y, escaped,
       " text-anchor=\"middle\" transform=\"rotate(-90 " + C(x) + " " + C(y) + ")\"");
}

void NothingToPlot(std::ostream& out, const Box& b, const std::string& escaped) {
  Frame(out, b);
  Text(out, b.left + b.width / 2, b.top + b.height / 2, "nothing to plot: " + escaped,
       " text-anchor=\"middle\" class=\"n\"");
}

// A horizontal grid line and its label at `frac` (0 bottom .. 1 top) of the box's height.
void YTick(std::ostream& out, const Box& b, double frac, const std::string& label) {
  const double y = b.bottom() - frac * b.height;
  Line(out, b.left, y, b.right(), y, " stroke=\"#ddd\"");
  Line(out, b.left - 4, y, b.left, y, " stroke=\"#444\"");
  Text(out, b.left - 7, y + 4, label, " text-anchor=\"end\"");
}

// The time axis: days since the first sample, over [0, span_days].
void DaysAxis(std::ostream& out, const Box& b, double span_days) {
  const double step = NiceStep(span_days, 8);
  const int digits = StepDigits(step);
  for (int i = 0;; ++i) {
    const double d = i * step;
    if (d > span_days * (1 + 1e-9)) break;
    const double x = b.left + d / span_days * b.width;
    Line(out, x, b.top, x, b.bottom(), " stroke=\"#eee\"");
    Line(out, x, b.bottom(), x, b.bottom() + 4, " stroke=\"#444\"");
    Text(out, x, b.bottom() + 17, Num(d, digits), " text-anchor=\"middle\"");
  }
  Text(out, b.left + b.width / 2, b.bottom() + 34, "days since the first sample",
       " text-anchor=\"middle\"");
}

// A series as a path: a line, or an area down to the box's bottom. `top` is the value at the
// box's top; values beyond it are clipped.
std::string SeriesPath(const std::vector<SeriesPoint>& points, bool use_max, const Box& b,
                       double span_s, double top, bool area) {
  std::string d;
  d.reserve(points.size() * 14 + 32);
  auto x_of = [&](const SeriesPoint& p) { return b.left + p.t_s / span_s * b.width; };
  auto y_of = [&](const SeriesPoint& p) {
    const double v = use_max ? p.max : p.mean;
    const double frac = top > 0 && std::isfinite(v) ? std::clamp(v / top, 0.0, 1.0) : 0;
    return b.bottom() - frac * b.height;
  };
  if (area) d += "M" + C(x_of(points.front())) + "," + C(b.bottom());
  for (size_t i = 0; i < points.size(); ++i) {
    // "Mx,y Lx,y x,y ...": the area starts at the bottom, the line at its first point.
    d += i == 0 ? (area ? " L" : "M") : (i == 1 && !area ? " L" : " ");
    d += C(x_of(points[i])) + "," + C(y_of(points[i]));
  }
  if (area) d += " " + C(x_of(points.back())) + "," + C(b.bottom()) + " Z";
  return d;
}

void Path(std::ostream& out, const std::string& d, const std::string& attrs) {
  out << "<path d=\"" << d << "\"" << attrs << "/>\n";
}

// Waits' y axis: linear in a readable unit, or log10(1 + seconds) when one class dwarfs the
// others.
struct WaitAxis {
  bool log = false;
  double top = 1;  // seconds at the box's top
  double Frac(double s) const {
    if (!std::isfinite(s) || s <= 0) return 0;
    const double f = log ? std::log10(1 + s) / std::log10(1 + top) : s / top;
    return std::clamp(f, 0.0, 1.0);
  }
};

void WaitPanel(std::ostream& out, const Box& b, const Metrics& m) {
  const char* unit_name = m.gpu_cluster ? "GPUs" : "CPUs";
  Heading(out, b,
          std::string("Wait by job size (") + unit_name + "): bars the mean, black marks the p95");
  if (m.by_size.empty()) {
    NothingToPlot(out, b, "no job started");
    return;
  }
  double most = 0, least_mean = std::numeric_limits<double>::infinity();
  for (const SizeClass& c : m.by_size) {
    most = std::max({most, c.wait.mean_s, c.wait.p95_s});
    if (c.wait.mean_s > 0) least_mean = std::min(least_mean, c.wait.mean_s);
  }
  WaitAxis axis;
  // Waits under a second count as a second: a wait of 1 ms next to one of 1 s dwarfs nothing.
  axis.log = std::isfinite(least_mean) && most > 20 * std::max(least_mean, 1.0);
  std::string title;
  if (axis.log) {
    static const std::pair<double, const char*> kTicks[] = {
        {0, "0"},      {1, "1 s"},       {10, "10 s"},    {60, "1 min"},     {600, "10 min"},
        {3600, "1 h"}, {36'000, "10 h"}, {86'400, "1 d"}, {864'000, "10 d"}, {8'640'000, "100 d"}};
    axis.top = kTicks[std::size(kTicks) - 1].first;
    for (const auto& [s, label] : kTicks) {
      if (s >= most && s > 0) {
        axis.top = s;
        break;
      }
    }
    double last = -1;  // the fraction of the last tick drawn
    for (const auto& [s, label] : kTicks) {
      if (s > axis.top) break;
      const double frac = axis.Frac(s);
      if (last >= 0 && (frac - last) * b.height < 14) continue;  // labels would touch
      YTick(out, b, frac, label);
      last = frac;
    }
    title = "wait (log scale)";
  } else {
    most = std::max(most, 10.0);  // waits of (nearly) nothing: an axis of 0-10 s
    double unit = 1;
    const char* unit_label = "s";
    if (most >= 172'800) {
      unit = 86'400, unit_label = "days";
    } else if (most >= 7200) {
      unit = 3600, unit_label = "hours";
    } else if (most >= 120) {
      unit = 60, unit_label = "minutes";
    }
    const double step = NiceStep(most / unit);
    const int digits = StepDigits(step);
    const double top = std::max(step, std::ceil(most / unit / step - 1e-9) * step);
    axis.top = top * unit;
    for (int i = 0; i * step <= top * (1 + 1e-9); ++i) {
      YTick(out, b, i * step / top, Num(i * step, digits));
    }
    title = std::string("wait, ") + unit_label;
  }
  YTitle(out, b, title);
  const double slot = b.width / static_cast<double>(m.by_size.size());
  const double bar = std::min(slot * 0.6, 70.0);
  for (size_t i = 0; i < m.by_size.size(); ++i) {
    const SizeClass& c = m.by_size[i];
    const double cx = b.left + slot * (static_cast<double>(i) + 0.5);
    const double y_mean = b.bottom() - axis.Frac(c.wait.mean_s) * b.height;
    const double y_p95 = b.bottom() - axis.Frac(c.wait.p95_s) * b.height;
    out << "<rect x=\"" << C(cx - bar / 2) << "\" y=\"" << C(y_mean) << "\" width=\"" << C(bar)
        << "\" height=\"" << C(b.bottom() - y_mean) << "\" fill=\"#54a24b\"><title>"
        << XmlEscape(c.name) << " " << unit_name << ": " << c.wait.jobs << " jobs, mean wait "
        << Duration(c.wait.mean_s) << ", median " << Duration(c.wait.median_s) << ", p95 "
        << Duration(c.wait.p95_s) << "</title></rect>\n";
    Line(out, cx, y_mean, cx, y_p95, " stroke=\"#222\"");
    Line(out, cx - bar / 2 - 4, y_p95, cx + bar / 2 + 4, y_p95,
         " stroke=\"#000\" stroke-width=\"2\"");
    Text(out, cx, b.bottom() + 16, XmlEscape(c.name), " text-anchor=\"middle\"");
    Text(out, cx, b.bottom() + 30, "n=" + std::to_string(c.wait.jobs),
         " text-anchor=\"middle\" class=\"s\"");
  }
  Frame(out, b);
  Text(out, b.left + b.width / 2, b.bottom() + 48,
       std::string("size class, ") + unit_name + " per job (n: jobs started)",
       " text-anchor=\"middle\"");
}

// Each window's use as stacked bars of the accounts' parts (the heaviest kAccountsDrawn on their
// own, the rest together), with each account's share of the config beside its name.
void AccountsPanel(std::ostream& out, const Box& b, const Metrics& m) {
  Heading(out, b, "Use by account over time: each window's share (config shares in the legend)");
  std::vector<std::pair<double, std::string>> heaviest;
  for (const auto& [name, a] : m.accounts) {
    heaviest.emplace_back(-(m.gpu_cluster ? a.gpu_hours : a.cpu_hours), name);
  }
  std::sort(heaviest.begin(), heaviest.end());
  if (heaviest.size() > kAccountsDrawn) heaviest.resize(kAccountsDrawn);
  for (int p = 0; p <= 100; p += 25) YTick(out, b, p / 100.0, std::to_string(p) + "%");
  DaysAxis(out, b, static_cast<double>(m.usage_over_time.size()) * m.usage_window_s / 86'400);
  YTitle(out, b, "share of the window's use");
  const double w = b.width / static_cast<double>(m.usage_over_time.size());
  for (size_t i = 0; i < m.usage_over_time.size(); ++i) {
    const auto& used = m.usage_over_time[i].unit_hours;
    double total = 0;
    for (const auto& [name, h] : used) total += h;
    if (total <= 0) continue;
    double y = b.bottom(), drawn = 0;
    auto bar = [&](double part, const char* colour) {
      const double h = part / total * b.height;
      out << "<rect x=\"" << C(b.left + w * static_cast<double>(i)) << "\" y=\"" << C(y - h)
          << "\" width=\"" << C(std::max(w - 1, 0.5)) << "\" height=\"" << C(h) << "\" fill=\""
          << colour << "\"/>\n";
      y -= h;
    };
    for (size_t k = 0; k < heaviest.size(); ++k) {
      auto it = used.find(heaviest[k].second);
      if (it == used.end()) continue;
      bar(it->second, kAccountColours[k]);
      drawn += it->second;
    }
    if (total - drawn > 0) bar(total - drawn, "#bbb");
  }
  Frame(out, b);
  // The legend, under the axis.
  double x = b.left;
  const double y = b.bottom() + 42;
  for (size_t k = 0; k < heaviest.size(); ++k) {
    const AccountUsage& a = m.accounts.at(heaviest[k].second);
    const std::string label =
        XmlEscape(heaviest[k].second) + (a.configured ? " (" + Percent(a.share) + ")" : "");
    out << "<rect x=\"" << C(x) << "\" y=\"" << C(y - 10) << "\" width=\"10\" height=\"10\" fill=\""
        << kAccountColours[k] << "\"/>\n";
    Text(out, x + 14, y, label, " class=\"s\"");
    x += 14 + 6.0 * static_cast<double>(label.size()) + 16;
  }
  if (m.accounts.size() > heaviest.size()) Text(out, x, y, "grey: the rest", " class=\"s\"");
}

}  // namespace

std::vector<SeriesPoint> BucketSeries(const std::vector<Sample>& samples,
                                      const std::function<double(const Sample&)>& value,
                                      size_t buckets) {
  std::vector<SeriesPoint> points;
  if (samples.size() < 2 || buckets == 0) return points;
  const int64_t t0 = samples.front().t_ms;
  const int64_t span_ms = samples.back().t_ms - t0;
  if (span_ms <= 0) return points;
  const size_t n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(buckets), span_ms));
  const double span = static_cast<double>(span_ms);
  const double width = span / static_cast<double>(n);
  std::vector<double> sum(n, 0), weight(n, 0);
  std::vector<double> most(n, -std::numeric_limits<double>::infinity());
  for (size_t i = 0; i + 1 < samples.size(); ++i) {
    const double a = std::max(0.0, static_cast<double>(samples[i].t_ms - t0));
    const double e = std::min(span, static_cast<double>(samples[i + 1].t_ms - t0));
    if (e <= a) continue;
    const double v = value(samples[i]);
    for (size_t k = std::min(n - 1, static_cast<size_t>(a / width)); k < n; ++k) {
      const double lo = static_cast<double>(k) * width;
      const double hi = k + 1 == n ? span : static_cast<double>(k + 1) * width;
      const double overlap = std::min(e, hi) - std::max(a, lo);
      if (overlap > 0) {
        sum[k] += v * overlap;
        weight[k] += overlap;
        most[k] = std::max(most[k], v);
      }
      if (e <= hi) break;
    }
  }
  for (size_t k = 0; k < n; ++k) {
    if (!(weight[k] > 0)) continue;
    SeriesPoint p;
    p.t_s = (static_cast<double>(k) + 0.5) * width / 1000.0;
    p.mean = sum[k] / weight[k];
    p.max = most[k];
    points.push_back(p);
  }
  return points;
}

std::string XmlEscape(const std::string& text) {
  std::string o;
  o.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '&':
          o += "&amp;";
          break;
        case '<':
          o += "&lt;";
          break;
        case '>':
          o += "&gt;";
          break;
        case '"':
          o += "&quot;";
          break;
        case '\'':
          o += "&apos;";
          break;
        default:
          if (c >= 0x20 || c == '\t' || c == '\n') o += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // A UTF-8 sequence: its lead byte says how long; each continuation is 10xxxxxx. Overlong
    // forms, surrogates and code points past U+10FFFF are not UTF-8 either.
    size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (c > 0xF4) len = 0;
    bool ok = len > 0 && i + len <= text.size();
    uint32_t cp = ok ? (c & (0xFF >> (len + 1))) : 0;
    for (size_t k = 1; ok && k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(text[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (ok) {
      ok = !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) &&
           !(cp >= 0xD800 && cp <= 0xDFFF) && cp != 0xFFFE && cp != 0xFFFF;
    }
    if (ok) {
      o.append(text, i, len);
      i += len;
    } else {
      o += '?';
      ++i;
    }
  }
  return o;
}

void WritePlotSvg(const ReplayResult& r, const Metrics& m, const std::string& title,
                  std::ostream& out) {
  const std::string esc_title = XmlEscape(title);
  const bool gpus = r.total_gpus > 0;
  const double total = static_cast<double>(gpus ? r.total_gpus : r.total_cpus);
  const char* unit = gpus ? "GPUs" : "CPUs";
  // With accounts in the config, a fourth panel: their use over time.
  const double height = m.usage_over_time.empty() ? kHeight : kHeight + kAccountsHeight;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(kWidth, 0) << "\" height=\""
      << Num(height, 0) << "\" viewBox=\"0 0 " << Num(kWidth, 0) << " " << Num(height, 0)
      << "\">\n";
  out << "<title>" << esc_title << "</title>\n";
  out << "<style>text{font-family:sans-serif;font-size:12px;fill:#222}"
         ".t{font-size:18px;font-weight:bold}.h{font-size:14px;font-weight:bold}"
         ".s{font-size:10px;fill:#555}.n{font-size:14px;fill:#888}</style>\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  Text(out, kLeft, 30, esc_title, " class=\"t\"");
  Text(out, kLeft, 52,
       "utilization " + Percent(m.utilization) + " of " + Num(total, 0) + " " + unit + " over " +
           Num(m.makespan_s / 86'400, 1) + " days  |  " + std::to_string(m.jobs) +
           " jobs: " + std::to_string(m.started) + " started, " + std::to_string(m.refused) +
           " refused, " + std::to_string(m.never_started) + " never started");
  Text(out, kLeft, 70,
       "wait mean " + Duration(m.wait.mean_s) + ", median " + Duration(m.wait.median_s) + ", p99 " +
           Duration(m.wait.p99_s) + "  |  bounded slowdown " + Num(m.bounded_slowdown, 2) +
           " (tau " + Num(kSlowdownTauSeconds, 0) + " s)");

  const Box util{kLeft, 110, kRight - kLeft, 200};
  const Box queue{kLeft, 390, kRight - kLeft, 160};
  const Box waits{kLeft, 630, kRight - kLeft, 200};
  const double span_s =
      r.samples.size() >= 2
          ? static_cast<double>(r.samples.back().t_ms - r.samples.front().t_ms) / 1000.0
          : 0;

  // Utilization over time.
  Heading(out, util,
          std::string("Utilization: busy ") + unit + " / " + Num(total, 0) +
              " (time-weighted mean per bucket)");
  std::vector<SeriesPoint> busy;
  if (span_s > 0 && total > 0) {
    busy = BucketSeries(r.samples, [&](const Sample& s) {
      return static_cast<double>(gpus ? s.busy_gpus : s.busy_cpus) / total * 100.0;
    });
  }
  if (busy.empty()) {
    NothingToPlot(out, util, span_s > 0 ? "the cluster is empty" : "the replay kept no samples");
  } else {
    for (int p = 0; p <= 100; p += 25) YTick(out, util, p / 100.0, std::to_string(p) + "%");
    DaysAxis(out, util, span_s / 86'400);
    YTitle(out, util, std::string("allocated share of the ") + unit);
    Path(out, SeriesPath(busy, false, util, span_s, 100, true),
         " fill=\"#4c78a8\" fill-opacity=\"0.3\" stroke=\"none\"");
    Path(out, SeriesPath(busy, false, util, span_s, 100, false),
         " fill=\"none\" stroke=\"#4c78a8\" stroke-width=\"1\"");
    bool stranded = false;
    for (const Sample& s : r.samples) stranded = stranded || s.stranded_gpus > 0;
    if (gpus && stranded) {
      const auto strand = BucketSeries(r.samples, [&](const Sample& s) {
        return static_cast<double>(s.stranded_gpus) / total * 100.0;
      });
      Path(out, SeriesPath(strand, false, util, span_s, 100, false),
           " fill=\"none\" stroke=\"#e45756\" stroke-width=\"1\"");
      Text(out, util.right(), util.top - 8, "red: GPUs stranded on partly used nodes",
           " text-anchor=\"end\" class=\"s\"");
    }
    const double y = util.bottom() - std::clamp(m.utilization, 0.0, 1.0) * util.height;
    Line(out, util.left, y, util.right(), y, " stroke=\"#222\" stroke-dasharray=\"6 4\"");
    Text(out, util.right() - 4, y - 4, "mean " + Percent(m.utilization),
         " text-anchor=\"end\" class=\"s\"");
    Frame(out, util);
  }

  // Queue length over time.
  Heading(out, queue, "Queued jobs (submitted, not started)");
  std::vector<SeriesPoint> queued;
  if (span_s > 0) {
    queued = BucketSeries(r.samples, [](const Sample& s) { return static_cast<double>(s.queued); });
  }
  if (queued.empty()) {
    NothingToPlot(out, queue, "the replay kept no samples");
  } else {
    double most = 0;
    for (const SeriesPoint& p : queued) most = std::max(most, p.max);
    const double step = std::max(1.0, NiceStep(most, 4));
    const double top = std::max(step, std::ceil(most / step - 1e-9) * step);
    for (int i = 0; i * step <= top * (1 + 1e-9); ++i) {
      YTick(out, queue, i * step / top, Num(i * step, 0));
    }
    DaysAxis(out, queue, span_s / 86'400);
    YTitle(out, queue, "queued jobs (max, mean)");
    Path(out, SeriesPath(queued, true, queue, span_s, top, true),
         " fill=\"#f58518\" fill-opacity=\"0.3\" stroke=\"none\"");
    Path(out, SeriesPath(queued, false, queue, span_s, top, false),
         " fill=\"none\" stroke=\"#b35c00\" stroke-width=\"1\"");
    Text(out, queue.right(), queue.top - 8,
         "shaded: max per bucket; line: time-weighted mean per bucket",
         " text-anchor=\"end\" class=\"s\"");
    Frame(out, queue);
  }

  WaitPanel(out, waits, m);
  if (!m.usage_over_time.empty()) {
    AccountsPanel(out, Box{kLeft, kHeight + 10, kRight - kLeft, kAccountsHeight - 90}, m);
  }
  out << "</svg>\n";
}

}  // namespace muster::sim
