// Logging setup for the daemons. Log lines use key=value fields (job=, node=, user=).
// No module under src/core logs.
#pragma once

#include <string>

#include "muster/common/status.h"

namespace muster {

// level: trace, debug, info, warn, error. file empty: stderr.
Status InitLogging(const std::string& program, const std::string& level, const std::string& file);

// What a daemon says to a SIGHUP (a reload request) until reloading exists: it keeps running.
void WarnReloadNotSupported();

}  // namespace muster
