// The smallest cluster the rpc tests need: one CPU node in one partition.
#pragma once

#include "muster/common/config.h"

namespace muster::rpc::testing {

inline Result<Config> OneNodeConfig() {
  return ParseConfig(R"(
[[nodes]]
names = "node1"
cpus = 8
memory_mb = 16000
[[partition]]
name = "cpu"
nodes = "node1"
)",
                     "t.toml");
}

}  // namespace muster::rpc::testing
