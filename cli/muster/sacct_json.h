// sacct --json / --yaml: the jobs and their steps as one JSON document (which is also YAML).
#pragma once

#include <cstdint>
#include <vector>

#include "muster/v1/controller.pb.h"

namespace muster::cli {

// Prints the document for `jobs` to stdout; `now` ends the elapsed time of what still runs. The
// schema is documented in docs/user-guide.md.
void PrintSacctJson(const std::vector<v1::JobInfo>& jobs, int64_t now);

}  // namespace muster::cli
