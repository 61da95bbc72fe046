// What the controller counts for Prometheus (`/metrics`, rpc/metrics_text.h) and `muster diag`:
// read from the engine on its strand, so both show the same numbers.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

namespace muster::controller {

// Queue wait (submission, or --begin when later, to start) histogram's upper bounds, seconds.
inline constexpr std::array<double, 14> kQueueWaitBoundsS = {
    1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14'400, 28'800, 86'400, 259'200, 604'800};

struct QueueWaits {
  std::array<uint64_t, kQueueWaitBoundsS.size()> at_or_below{};  // cumulative
  uint64_t count = 0;
  double sum_s = 0;
  void Add(double wait_s) {
    ++count;
    sum_s += wait_s;
    for (size_t i = 0; i < kQueueWaitBoundsS.size(); ++i)
      at_or_below[i] += wait_s <= kQueueWaitBoundsS[i];
  }
};

struct ClusterMetrics {
  // Jobs by (state, partition, account): PENDING counts an array's waiting tasks one by one.
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> jobs;
  // Nodes by state: idle, mixed, allocated, draining, drained, not_responding, down, unknown.
  std::map<std::string, uint64_t> nodes;
  uint32_t nodes_responding = 0;  // with an agent session now
  // GPUs by (state, type, partition): allocated, idle, drained (free on a drained node), down
  // (on a node down, not responding or never registered). A node in two partitions counts in
  // both.
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> gpus;
  // The scheduler since this controller started.
  uint64_t passes = 0;
  uint64_t jobs_started = 0;
  uint64_t jobs_backfilled = 0;         // started below a reservation
  uint64_t forecasts = 0;               // start-time searches (reservations and estimates)
  uint32_t last_pass_considered = 0;    // pending jobs the last pass looked at
  uint32_t last_pass_reservations = 0;  // how deep its backfill reserved
  uint64_t preemptions = 0;             // running jobs the scheduler preempted
  QueueWaits queue_waits;               // of the jobs the scheduler started
  // Nodes.
  uint64_t heartbeats_late = 0;  // more than two heartbeat intervals after the one before
  // Per node with GPUs: (GPUs it reports, those unhealthy).
  std::map<std::string, std::pair<uint32_t, uint32_t>> node_gpu_health;
  // The controller.
  uint64_t epoch = 0;
  int64_t start_time_ms = 0;
  uint64_t store_bytes = 0;  // jobs' scripts and environments held in the state store
};

}  // namespace muster::controller
