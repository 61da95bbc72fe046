// What jobs used inside a time window, from the controller's job records: the part of each run
// inside [start, end) (running jobs up to now), in CPU- and GPU-seconds. `muster report usage`
// and sreport aggregate it their own ways.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/client/controller_client.h"
#include "muster/common/status.h"

namespace muster::cli {

struct JobUsage {
  std::string account, user, gpu_type;  // gpu_type "-" for jobs without GPUs
  double cpu_s = 0, gpu_s = 0;
};

Result<std::vector<JobUsage>> UsageInWindow(client::ControllerClient& controller, int64_t start,
                                            int64_t end, const std::vector<std::string>& users,
                                            int64_t now);

}  // namespace muster::cli
