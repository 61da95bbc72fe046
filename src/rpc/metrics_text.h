// The controller's metrics in Prometheus' text exposition format (version 0.0.4): the engine's
// counts (controller::ClusterMetrics) and the runner's timings, as `/metrics` serves them.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "muster/controller/cluster_metrics.h"
#include "muster/controller/service_stats.h"

namespace muster::rpc {

struct ControllerMetrics {
  controller::ClusterMetrics cluster;
  std::vector<controller::ServiceStats::Histogram> timings;
  std::map<std::pair<std::string, std::string>, uint64_t> results;  // (api kind, code)
  bool replicating = false;
  size_t standbys_in_sync = 0;
};

std::string PrometheusText(const ControllerMetrics& m);

}  // namespace muster::rpc
