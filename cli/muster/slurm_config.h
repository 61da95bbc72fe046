// scontrol show config: Muster's settings under Slurm 22.05's names, in its "Key = value" lines,
// for tools that read them (a workflow engine's Slurm batch system reads it at start-up). What
// Muster has is shown as it is set; what it has no setting for shows Slurm's default or (null).
#pragma once

#include <cstdint>
#include <string>

#include "muster/common/config.h"

namespace muster::cli {

// The host of a "host:port" address (the whole text when it has no port).
std::string HostOf(const std::string& address);

// Every line up to (not including) the controllers' status lines; `path` is the config file.
std::string SlurmConfigLines(const Config& c, const std::string& path, int64_t now_ms);

}  // namespace muster::cli
