#include "metrics_text.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "muster/metrics/metrics_server.h"

namespace muster::rpc {
namespace {

using controller::ServiceStats;
using std::chrono::microseconds;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ServiceStatsHistogramTest, CumulativeAtEveryBoundAndKeptAcrossAReset) {
  ServiceStats stats;
  for (int us : {3, 5, 100, 1'000'000}) stats.Record("scheduler/pass", microseconds(us));
  stats.Reset(1);
  EXPECT_TRUE(stats.Snapshot().empty()) << "diag's counts start again";
  const auto h = stats.Histograms();
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].count, 4u) << "Prometheus' counters only grow";
  EXPECT_NEAR(h[0].sum_us, 1'000'108, 1);
  const auto& bounds = ServiceStats::BoundsUs();
  ASSERT_EQ(h[0].at_or_below.size(), bounds.size());
  EXPECT_EQ(bounds.front(), 4);
  for (size_t i = 0; i < bounds.size(); ++i) {
    uint64_t want = 0;
    for (double v : {3.0, 5.0, 100.0, 1e6}) want += v <= bounds[i];
    EXPECT_EQ(h[0].at_or_below[i], want) << "le " << bounds[i] << " us";
  }
}

ControllerMetrics Sample() {
  ControllerMetrics m;
  m.cluster.jobs[{"pending", "gpu,cpu", "phys\"ics\\\nx"}] = 3;
  m.cluster.jobs[{"running", "gpu", "bio"}] = 1;
  m.cluster.nodes["idle"] = 2;
  m.cluster.gpus[{"allocated", "h100", "gpu"}] = 8;
  m.cluster.passes = 5;
  m.cluster.queue_waits.Add(0.5);
  m.cluster.queue_waits.Add(100);
  m.cluster.heartbeats_late = 3;
  m.cluster.node_gpu_health["node1"] = {8, 1};
  ServiceStats stats;
  for (const char* kind : {"agent/heartbeat", "aaa/other", "api/SUBMIT_JOB", "scheduler/pass",
                           "store/sync", "store/write", "zzz/other"}) {
    stats.Record(kind, microseconds(50));
  }
  stats.CountResult("api/SUBMIT_JOB", "OK");
  stats.CountResult("api/SUBMIT_JOB", "INVALID_ARGUMENT");
  m.timings = stats.Histograms();
  m.results = stats.Results();
  return m;
}

TEST(MetricsTextTest, LabelsEscapedFamiliesOnceSamplesAsCounted) {
  const std::string text = PrometheusText(Sample());
  EXPECT_NE(text.find("muster_jobs{state=\"pending\",partition=\"gpu,cpu\",account=\"phys\\\"ics"
                      "\\\\\\\\nx\"} 3\n"),
            std::string::npos)
      << text << "(the newline made printable first, then escaped)";
  EXPECT_NE(text.find("muster_gpus{state=\"allocated\",type=\"h100\",partition=\"gpu\"} 8\n"),
            std::string::npos);
  EXPECT_NE(text.find("muster_scheduler_passes_total 5\n"), std::string::npos);
  // The two kinds without a family of their own share one, written once.
  EXPECT_EQ(Count(text, "# TYPE muster_work_duration_seconds histogram"), 1u);
  EXPECT_NE(text.find("muster_work_duration_seconds_count{kind=\"zzz/other\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("muster_api_request_duration_seconds_bucket{method=\"SUBMIT_JOB\","
                      "le=\"6.4e-05\"} 1"),
            std::string::npos)
      << "50 us is at or below 64 us";
  EXPECT_NE(
      text.find("muster_api_requests_total{method=\"SUBMIT_JOB\",code=\"INVALID_ARGUMENT\"} 1"),
      std::string::npos);
  EXPECT_NE(text.find("muster_store_commit_duration_seconds_count 1"), std::string::npos);
  EXPECT_NE(text.find("muster_queue_wait_seconds_bucket{le=\"1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("muster_queue_wait_seconds_bucket{le=\"300\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("muster_queue_wait_seconds_sum 100.5\n"), std::string::npos);
  EXPECT_NE(text.find("muster_heartbeats_late_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("muster_node_gpus_unhealthy{node=\"node1\"} 1\n"), std::string::npos);
  for (const char* family : {"muster_jobs", "muster_gpus", "muster_api_requests_total"}) {
    EXPECT_EQ(Count(text, std::string("# TYPE ") + family + " "), 1u) << family;
  }
}

TEST(MetricsTextTest, PromtoolAcceptsIt) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian's prometheus package)";
  }
  const std::string file = std::filesystem::temp_directory_path() /
                           ("muster-metrics-" + std::to_string(::getpid()) + ".txt");
  std::ofstream(file) << PrometheusText(Sample());
  const std::string cmd = "promtool check metrics < " + file + " > " + file + ".out 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream out(file + ".out");
  EXPECT_EQ(rc, 0) << std::string(std::istreambuf_iterator<char>(out), {});
  std::filesystem::remove(file);
  std::filesystem::remove(file + ".out");
}

TEST(MetricsTokenTest, OnlyAPrivateFileOfAProperToken) {
  const std::string file =
      std::filesystem::temp_directory_path() / ("muster-token-" + std::to_string(::getpid()));
  auto write = [&](const std::string& text, mode_t mode) {
    std::filesystem::remove(file);
    std::ofstream(file) << text;
    ::chmod(file.c_str(), mode);
  };
  write("0123456789abcdef0123\nignored\n", 0600);
  auto ok = metrics::ReadMetricsToken(file);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, "0123456789abcdef0123") << "the first line";
  write("0123456789abcdef0123\n", 0644);
  EXPECT_FALSE(metrics::ReadMetricsToken(file).ok()) << "others may read it";
  write("0123456789abcdef0123\n", 0620);
  EXPECT_FALSE(metrics::ReadMetricsToken(file).ok()) << "others may write it";
  write("short\n", 0600);
  auto s = metrics::ReadMetricsToken(file);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("shorter than 16"), std::string::npos);
  write("0123456789abcdef 0123\n", 0600);
  EXPECT_FALSE(metrics::ReadMetricsToken(file).ok()) << "a space cannot go in a header's token";
  std::filesystem::remove(file);
  EXPECT_FALSE(metrics::ReadMetricsToken(file).ok()) << "missing";
}

}  // namespace
}  // namespace muster::rpc
