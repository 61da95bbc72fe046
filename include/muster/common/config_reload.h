// What a running controller takes from its config file when told to read it again (`muster
// reconfigure`, `scontrol reconfigure`, SIGHUP / systemctl reload), and what waits for a restart.
#pragma once

#include <string>
#include <vector>

#include "muster/common/config.h"

namespace muster {

struct ConfigReload {
  // What the controller runs from now on: the new file, except the keys below, which keep
  // their running values.
  Config config;
  // The keys that changed but take effect only at the next start ("controller.api_address",
  // "tls", "cluster_name"): the listeners, the credentials and the store are set up once.
  std::vector<std::string> restart_only;
  // What changed, one line each ("partition gpu added", "node n3 changed: gpus, features",
  // "scheduling.backfill_depth"), in a stable order; empty when nothing did.
  std::vector<std::string> changes;
};

// `running` is the config the controller runs, `next` the file as it reads now (already parsed
// and checked on its own). The controller's own [agent] section is the agents' business: they
// read their copy of the file themselves.
ConfigReload MergeReloadedConfig(const Config& running, Config next);

}  // namespace muster
