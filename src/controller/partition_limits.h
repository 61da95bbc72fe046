// The largest node of each partition, per GPU type: what sizing a request needs, computed once
// from the configuration, so a submission never walks every node.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "muster/common/config.h"

namespace muster::controller {

struct PartitionLimits {
  uint32_t max_cpus = 0;
  uint32_t max_gpus = 0;                          // any type
  std::map<std::string, uint32_t> max_gpus_type;  // by lower-case type
  std::set<std::string> mig_types;                // MIG profiles some node offers
};
using PartitionLimitMap = std::map<std::string, PartitionLimits>;

PartitionLimitMap ComputePartitionLimits(const Config& config);

}  // namespace muster::controller
