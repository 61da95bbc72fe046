// The smallest cluster the rpc tests need: one CPU node in one partition. No agent registers in
// them; [node_auth] only says where its key would be (a controller without TLS needs it).
#pragma once

#include "muster/common/config.h"

namespace muster::rpc::testing {

inline Result<Config> OneNodeConfig() {
  return ParseConfig(R"(
[node_auth]
key_file = "/nonexistent/muster-test-keys/%n.key"
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
