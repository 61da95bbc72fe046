// The controller's /metrics as Prometheus scrapes it: only with the bearer token, only GET
// /metrics, the counts the same as `muster diag`'s and the cluster's, the text valid for
// promtool, and a peer holding connections open cannot take more than its bound.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <thread>

#include "harness/cluster_test.h"
#include "harness/http_client.h"

namespace muster::testing {
namespace {

// Whether the server closes (or resets) `fd` within `ms` without a word.
bool ClosedWithin(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return false;
  char c;
  return ::read(fd, &c, 1) <= 0;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessClusterOptions o;
    o.metrics = true;
    auto c = InProcessCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    port_ = cluster_->metrics_port();
    ASSERT_GT(port_, 0);
  }
  std::string Scrape() { return HttpGet(port_, "/metrics", "Bearer " + cluster_->metrics_token()); }
  std::unique_ptr<InProcessCluster> cluster_;
  int port_ = 0;
};

TEST_F(MetricsTest, OnlyAScraperWithTheTokenGetsThem) {
  EXPECT_EQ(StatusLine(HttpGet(port_, "/metrics", "")), "HTTP/1.1 401 Unauthorized");
  EXPECT_EQ(StatusLine(HttpGet(port_, "/metrics", "Bearer wrong")), "HTTP/1.1 401 Unauthorized");
  EXPECT_EQ(StatusLine(HttpGet(port_, "/metrics", "Bearer " + cluster_->metrics_token() + "x")),
            "HTTP/1.1 401 Unauthorized");
  EXPECT_EQ(StatusLine(HttpGet(port_, "/metrics", "Basic " + cluster_->metrics_token())),
            "HTTP/1.1 401 Unauthorized");
  const std::string denied = HttpGet(port_, "/metrics", "");
  EXPECT_EQ(Body(denied).find("muster_"), std::string::npos) << "nothing leaks with a refusal";
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 200 OK");
}

TEST_F(MetricsTest, OnlyGetOfMetrics) {
  const std::string auth = "Authorization: Bearer " + cluster_->metrics_token() + "\r\n";
  EXPECT_EQ(StatusLine(HttpGet(port_, "/", "Bearer " + cluster_->metrics_token())),
            "HTTP/1.1 404 Not Found");
  EXPECT_EQ(StatusLine(Http(port_, "POST /metrics HTTP/1.1\r\nHost: x\r\n" + auth +
                                       "Content-Length: 0\r\n\r\n")),
            "HTTP/1.1 405 Method Not Allowed");
  // Headers beyond 8 KiB: refused without reading on.
  const std::string big =
      "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(10000, 'a') + "\r\n" + auth + "\r\n";
  EXPECT_EQ(Http(port_, big).find("200 OK"), std::string::npos);
  // Not HTTP at all.
  EXPECT_EQ(Http(port_, "\x16\x03\x01 garbage\r\n\r\n").find("200 OK"), std::string::npos);
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 200 OK") << "the server still serves";
}

TEST_F(MetricsTest, CountsAreWhatTheClusterAndMusterDiagSay) {
  // 4 nodes of 8 GPUs, idle.
  std::string body = Body(Scrape());
  EXPECT_EQ(MetricSample(body, "muster_nodes{state=\"idle\"}"), 4) << body;
  EXPECT_EQ(MetricSample(body, "muster_nodes_responding"), 4);
  const std::string& part = cluster_->config().partitions.front().name;
  const std::string type = cluster_->config().nodes.front().gpu_type;
  const std::string gpus = "{state=\"%s\",type=\"" + type + "\",partition=\"" + part + "\"}";
  auto gpu_series = [&](const char* state) {
    return "muster_gpus" + std::regex_replace(gpus, std::regex("%s"), state);
  };
  EXPECT_EQ(MetricSample(body, gpu_series("idle")), 32) << body;

  // A 2-node gang of 16 GPUs runs.
  v1::JobSpec spec;
  spec.set_nodes(2);
  spec.set_gpus_per_node(8);
  auto id = cluster_->Submit("#!/bin/sh\nsleep 30\n", spec);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EVENTUALLY(cluster_->State(*id) == v1::RUNNING, 10000);
  body = Body(Scrape());
  EXPECT_EQ(MetricSample(body, gpu_series("allocated")), 16) << body;
  EXPECT_EQ(MetricSample(body, gpu_series("idle")), 16);
  EXPECT_EQ(std::max(0.0, MetricSample(body, "muster_nodes{state=\"allocated\"}")) +
                std::max(0.0, MetricSample(body, "muster_nodes{state=\"mixed\"}")),
            2)
      << "the gang's two nodes are busy";
  EXPECT_GE(MetricSample(body, "muster_scheduler_jobs_started_total"), 1);
  EXPECT_GE(MetricSample(body, "muster_scheduler_passes_total"), 1);
  EXPECT_GE(MetricSample(body, "muster_api_requests_total{method=\"SUBMIT_JOB\",code=\"OK\"}"), 1);
  EXPECT_NE(body.find("muster_scheduler_pass_duration_seconds_bucket{le=\"+Inf\"}"),
            std::string::npos);
  EXPECT_NE(body.find("muster_api_request_duration_seconds_count{method=\"SUBMIT_JOB\"}"),
            std::string::npos);

  // One source with `muster diag`: the running jobs it counts are the metrics' running jobs.
  auto client = cluster_->Client();
  ASSERT_TRUE(client.ok());
  auto diag = client->Diagnostics(false);
  ASSERT_TRUE(diag.ok()) << diag.status().ToString();
  double running = 0;
  std::smatch match;
  std::string rest = body;
  const std::regex jobs_line("muster_jobs\\{state=\"running\"[^}]*\\} ([0-9]+)");
  while (std::regex_search(rest, match, jobs_line)) {
    running += std::stod(match[1]);
    rest = match.suffix();
  }
  EXPECT_EQ(running, diag->jobs_running());
  EXPECT_EQ(running, 1);

  // The exposition is valid (promtool, from Debian's prometheus), when this host has it.
  if (::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian's prometheus package)";
  }
  const std::string file = cluster_->dir() + "/scrape.txt";
  std::ofstream(file) << body;
  const std::string cmd = "promtool check metrics < " + file + " > " + file + ".out 2>&1";
  const int rc = ::system(cmd.c_str());
  std::ifstream out(file + ".out");
  EXPECT_EQ(rc, 0) << std::string(std::istreambuf_iterator<char>(out), {});
}

TEST_F(MetricsTest, APeerHoldingConnectionsOpenCannotBlockAScrape) {
  // Sixteen connections, each with half a request, held open: the most the server keeps.
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) {
    int fd = ConnectLoopback(port_);
    ASSERT_GE(fd, 0);
    (void)!::write(fd, "GET /metrics HTTP/1.1\r\n", 23);
    idle.push_back(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // their order, oldest first
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int fd : idle) EXPECT_FALSE(ClosedWithin(fd, 10)) << "held while there is room";
  // A scraper still gets through: the oldest of those that never finished their request goes.
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 200 OK");
  EXPECT_TRUE(ClosedWithin(idle.front(), 2000)) << "the oldest made room";
  EXPECT_FALSE(ClosedWithin(idle[1], 10)) << "only the oldest";
  // Full again: the next scrape takes the next oldest's place.
  int refill = ConnectLoopback(port_);
  ASSERT_GE(refill, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 200 OK");
  EXPECT_TRUE(ClosedWithin(idle[1], 2000)) << "then the next";
  ::close(refill);
  // And a request never finished is dropped after 5 s whatever happens.
  EXPECT_TRUE(ClosedWithin(idle.back(), 7000)) << "the header deadline";
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace muster::testing
