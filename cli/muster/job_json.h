// Jobs as JSON: Muster's own schema (muster queue --json, muster job show --json; documented in
// docs/user-guide.md) and Slurm 22.05's (squeue --json, OpenAPI v0.0.38's field names and types).
#pragma once

#include <string>

#include "muster/v1/controller.pb.h"
#include "output.h"

namespace muster::cli {

void JobJson(JsonWriter& w, const v1::JobInfo& j);
// Slurm's shape: times in Unix seconds, time_limit in minutes (null for none).
void SlurmJobJson(JsonWriter& w, const v1::JobInfo& j, const std::string& cluster);

}  // namespace muster::cli
