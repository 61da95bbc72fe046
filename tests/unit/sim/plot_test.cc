// muster-sim's --plot: the SVG is well formed, says what it is about, keeps its series small
// however many samples there are, and is the same bytes for the same replay.
#include "muster/sim/plot.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace muster::sim {
namespace {

// Checks that every tag opened is closed in order (the SVG's own tags: no comments, no CDATA),
// that the document is one <svg> element and nothing but white space follows it. Empty when so,
// else what is wrong.
std::string TagProblem(const std::string& svg) {
  std::vector<std::string> open;
  size_t i = 0;
  bool seen_root = false;
  while ((i = svg.find('<', i)) != std::string::npos) {
    const size_t end = svg.find('>', i);
    if (end == std::string::npos) return "a tag never ends at " + std::to_string(i);
    std::string tag = svg.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return "a '<' inside a tag at " + std::to_string(i);
    if (open.empty() && seen_root) return "something after the root element";
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "</" + name + "> closes nothing open";
      open.pop_back();
    } else if (!tag.empty() && tag.back() == '/') {
      if (open.empty()) return "a root that is not <svg>";
    } else {
      const std::string name = tag.substr(0, tag.find_first_of(" \n\t"));
      if (open.empty() && name != "svg") return "a root that is not <svg>: " + name;
      open.push_back(name);
      seen_root = true;
    }
    i = end + 1;
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  return "";
}

// Stray '&' that start no entity would make the XML invalid.
bool AmpersandsAreEntities(const std::string& svg) {
  for (size_t i = svg.find('&'); i != std::string::npos; i = svg.find('&', i + 1)) {
    const size_t semi = svg.find(';', i);
    if (semi == std::string::npos || semi - i > 6) return false;
    const std::string e = svg.substr(i, semi - i + 1);
    if (e != "&amp;" && e != "&lt;" && e != "&gt;" && e != "&quot;" && e != "&apos;") return false;
  }
  return true;
}

// Each path's d attribute.
std::vector<std::string> Paths(const std::string& svg) {
  std::vector<std::string> out;
  for (size_t i = svg.find("<path d=\""); i != std::string::npos;
       i = svg.find("<path d=\"", i + 1)) {
    const size_t from = i + 9;
    out.push_back(svg.substr(from, svg.find('"', from) - from));
  }
  return out;
}

size_t Points(const std::string& d) {
  size_t n = 0;
  for (char c : d) n += c == ',';
  return n;
}

std::string Svg(const ReplayResult& r, const Metrics& m, const std::string& title) {
  std::ostringstream out;
  WritePlotSvg(r, m, title, out);
  return out.str();
}

void ExpectWellFormed(const std::string& svg) {
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 80);
  ASSERT_GE(svg.size(), 7u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(TagProblem(svg), "");
  EXPECT_TRUE(AmpersandsAreEntities(svg));
  for (const char* bad : {"nan", "NaN", "inf", "Inf"}) {
    EXPECT_EQ(svg.find(bad), std::string::npos) << bad;
  }
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos);  // nothing from outside the file
}

// A small cluster's day: 8 CPUs, the queue filling and draining, three size classes.
ReplayResult SmallReplay() {
  ReplayResult r;
  r.total_cpus = 8;
  r.total_nodes = 8;
  const int64_t hour = 3'600'000;
  r.samples = {{0, 0, 0, 0, 0},        {hour, 4, 0, 2, 0},      {2 * hour, 8, 0, 5, 0},
               {6 * hour, 8, 0, 1, 0}, {10 * hour, 2, 0, 0, 0}, {24 * hour, 0, 0, 0, 0}};
  return r;
}

Metrics SmallMetrics() {
  Metrics m;
  m.jobs = 12;
  m.started = 11;
  m.refused = 1;
  m.utilization = 0.43;
  m.makespan_s = 86'400;
  m.wait = {11, 900, 300, 5000, 7000, 7200};
  m.bounded_slowdown = 3.25;
  m.by_size = {{"1", {6, 60, 30, 200, 200, 200}, 1.5},
               {"2-4", {4, 1200, 900, 3000, 3000, 3000}, 2.5},
               {"5-16", {1, 7200, 7200, 7200, 7200, 7200}, 9.0}};
  return m;
}

TEST(PlotTest, WellFormedWithTitleLabelsAndHeadline) {
  const std::string svg = Svg(SmallReplay(), SmallMetrics(), "SP2 <b> & \"x\", policy fcfs");
  ExpectWellFormed(svg);
  EXPECT_NE(svg.find("SP2 &lt;b&gt; &amp; &quot;x&quot;, policy fcfs"), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  for (const char* label : {">1<", ">2-4<", ">5-16<", ">n=6<", ">n=4<", ">n=1<"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
  EXPECT_NE(svg.find("utilization 43.0%"), std::string::npos);
  EXPECT_NE(svg.find("wait mean 15.0 min, median 5.0 min, p99 116.7 min"), std::string::npos);
  EXPECT_NE(svg.find("bounded slowdown 3.25"), std::string::npos);
  EXPECT_EQ(svg.find("nothing to plot"), std::string::npos);
  // The area and line of utilization, the queue's max area and mean line.
  EXPECT_EQ(Paths(svg).size(), 4u);
  // 7200 s is over 20 times the smallest mean (60 s): the waits' axis is logarithmic.
  EXPECT_NE(svg.find("wait (log scale)"), std::string::npos);
}

TEST(PlotTest, LinearWaitAxisWhenNoClassDwarfsTheOthers) {
  Metrics m = SmallMetrics();
  m.by_size = {{"1", {6, 3000, 3000, 4000, 4000, 4000}, 1.5},
               {"2-4", {4, 3600, 3600, 5000, 5000, 5000}, 2.5}};
  const std::string svg = Svg(SmallReplay(), m, "t");
  ExpectWellFormed(svg);
  EXPECT_EQ(svg.find("log scale"), std::string::npos);
  EXPECT_NE(svg.find("wait, minutes"), std::string::npos);
}

TEST(PlotTest, SameInputSameBytes) {
  const std::string a = Svg(SmallReplay(), SmallMetrics(), "trace.swf, policy muster");
  const std::string b = Svg(SmallReplay(), SmallMetrics(), "trace.swf, policy muster");
  EXPECT_EQ(a, b);
}

TEST(PlotTest, ManySamplesAreBucketedToTheLimit) {
  ReplayResult r;
  r.total_gpus = 64;
  r.total_cpus = 512;
  for (int64_t i = 0; i < 100'000; ++i) {
    Sample s;
    s.t_ms = i * 37'000 + (i % 7) * 1000;
    s.busy_gpus = static_cast<uint64_t>((i * 13) % 65);
    s.queued = static_cast<uint32_t>(i % 300);
    s.stranded_gpus = i % 5 == 0 ? 3 : 0;
    r.samples.push_back(s);
  }
  Metrics m = SmallMetrics();
  m.gpu_cluster = true;
  const std::string svg = Svg(r, m, "big");
  ExpectWellFormed(svg);
  const auto paths = Paths(svg);
  ASSERT_EQ(paths.size(), 5u);  // with the stranded GPUs' line
  for (const std::string& d : paths) {
    EXPECT_GT(Points(d), kPlotMaxPoints / 2);
    EXPECT_LE(Points(d), kPlotMaxPoints + 2);  // an area adds its two corners at the bottom
  }
  EXPECT_LT(svg.size(), 200'000u);
  EXPECT_NE(svg.find("red: GPUs stranded"), std::string::npos);
}

TEST(PlotTest, BucketsAreTimeWeighted) {
  // 0 for 3 s, then 10 for 1 s, then 4 until the end at 8 s; two buckets of 4 s.
  const std::vector<Sample> s = {
      {0, 0, 0, 0, 0}, {3000, 10, 0, 0, 0}, {4000, 4, 0, 0, 0}, {8000, 0, 0, 0, 0}};
  const auto pts = BucketSeries(
      s, [](const Sample& x) { return double(x.busy_cpus); }, 2);
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_DOUBLE_EQ(pts[0].t_s, 2.0);
  EXPECT_DOUBLE_EQ(pts[0].mean, 2.5);  // (0*3 + 10*1) / 4
  EXPECT_DOUBLE_EQ(pts[0].max, 10);
  EXPECT_DOUBLE_EQ(pts[1].t_s, 6.0);
  EXPECT_DOUBLE_EQ(pts[1].mean, 4);
  EXPECT_DOUBLE_EQ(pts[1].max, 4);  // the last sample holds for no time
  // A sample held across buckets counts in each; never more buckets than milliseconds.
  const auto fine = BucketSeries(
      s, [](const Sample& x) { return double(x.busy_cpus); }, 1'000'000);
  EXPECT_EQ(fine.size(), 8000u);
  EXPECT_TRUE(BucketSeries({s[0]}, [](const Sample&) { return 1.0; }).empty());
}

TEST(PlotTest, NothingToPlotIsStillAnSvg) {
  const std::string svg = Svg(ReplayResult{}, Metrics{}, "empty.swf, policy muster");
  ExpectWellFormed(svg);
  EXPECT_NE(svg.find("nothing to plot"), std::string::npos);
  EXPECT_TRUE(Paths(svg).empty());
  EXPECT_NE(svg.find("empty.swf, policy muster"), std::string::npos);
}

TEST(PlotTest, XmlEscapeKeepsUtf8AndDropsWhatXmlCannotHold) {
  EXPECT_EQ(XmlEscape("a<b>&'\""), "a&lt;b&gt;&amp;&apos;&quot;");
  EXPECT_EQ(XmlEscape("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(XmlEscape("x\x01y"), "xy");
  EXPECT_EQ(XmlEscape("bad\xff\xc3"), "bad??");
  EXPECT_EQ(XmlEscape("\xe0\x80\x80"), "???");  // an overlong form
}

}  // namespace
}  // namespace muster::sim
