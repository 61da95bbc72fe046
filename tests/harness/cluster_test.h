// What the integration tests share: the in-process cluster fixture (a real controller and 4 real
// agents; jobs are real processes), and helpers to read what jobs wrote and to run steps.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "harness/in_process_cluster.h"
#include "harness/test_util.h"
#include "muster/client/step_client.h"
#include "muster/common/procfs.h"

namespace muster::testing {

inline std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline v1::JobSpec Gang(uint32_t nodes, uint32_t gpus_per_node) {
  v1::JobSpec s;
  s.set_nodes(nodes);
  s.set_gpus_per_node(gpus_per_node);
  s.add_environment("PATH=/usr/bin:/bin");
  return s;
}

inline bool ProcessGone(const std::string& pid_file) {
  std::string text = Read(pid_file);
  if (text.empty()) return false;
  // A zombie (its reaper is elsewhere) is gone too.
  return !ProcessAlive(std::stoi(text));
}

// Runs a step, returning (exit code, stdout, stderr).
struct StepRun {
  Result<int> rc = 0;
  std::string out, err;
};
inline StepRun RunCapturing(client::ControllerClient& c, const client::StepOptions& o) {
  char* out_buf = nullptr;
  char* err_buf = nullptr;
  size_t out_len = 0, err_len = 0;
  FILE* out = open_memstream(&out_buf, &out_len);
  FILE* err = open_memstream(&err_buf, &err_len);
  StepRun r;
  r.rc = client::RunStep(c, o, out, err);
  std::fclose(out);
  std::fclose(err);
  r.out.assign(out_buf, out_len);
  r.err.assign(err_buf, err_len);
  free(out_buf);
  free(err_buf);
  return r;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = InProcessCluster::Start();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(*c);
    jobs_ = cluster_->dir() + "/jobs/";
  }
  std::unique_ptr<InProcessCluster> cluster_;
  std::string jobs_;
};

}  // namespace muster::testing
