// What the agent counts for its own `/metrics` ([agent] metrics_address): launches and how long
// they took (LaunchJob received to the job started: prolog, cgroup, user environment and the
// batch script's spawn), and reboots asked for. The rest of what it exports is read from its
// parts when scraped (AgentMetricsText). Io thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "muster/v1/node.pb.h"

namespace muster::agent {

// Launch latency histogram's upper bounds, seconds.
inline constexpr std::array<double, 12> kLaunchBoundsS = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                          0.5,   1,    2.5,   5,    10,  30};

struct AgentCounters {
  uint64_t launches_started = 0;
  uint64_t launches_failed = 0;  // of them, those the node was to blame for:
  uint64_t launches_node_fault = 0;
  std::array<uint64_t, kLaunchBoundsS.size()> launch_at_or_below{};  // cumulative
  double launch_sum_s = 0;
  uint64_t reboots_issued = 0;

  void Started(double seconds) {
    ++launches_started;
    launch_sum_s += seconds;
    for (size_t i = 0; i < kLaunchBoundsS.size(); ++i) {
      launch_at_or_below[i] += seconds <= kLaunchBoundsS[i];
    }
  }
};

// Everything one scrape shows, gathered on the io thread.
struct AgentMetrics {
  std::string node;
  std::string version;
  int64_t start_time_ms = 0;
  AgentCounters counters;
  std::map<std::string, uint32_t> jobs_by_phase;  // "running", "suspended", "prolog", ...
  uint32_t steps = 0;                             // step supervisors of this node's jobs
  bool cgroups = false;                           // jobs contained by cgroup v2
  uint32_t job_cgroups = 0;                       // jobs that have one now
  bool connected = false;
  uint64_t epoch = 0;
  uint64_t commands_refused = 0;  // from an older controller epoch (the fence)
  int health_check = -1;          // -1 none yet, 0 failing, 1 passing
  std::vector<v1::GpuDevice> gpus;
};

std::string AgentMetricsText(const AgentMetrics& m);

}  // namespace muster::agent
