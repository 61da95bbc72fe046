// The web view's /api answers: the user API's, as JSON with the field names `muster queue
// --json` and `muster nodes --json` use (times in Unix seconds, time limits in seconds), only the
// fields the pages' script reads. Pure.
#pragma once

#include <string>

#include "muster/v1/controller.pb.h"

namespace muster::web {

std::string JobsJson(const v1::ListJobsResponse& jobs);        // {"jobs": [...], "complete": bool}
std::string JobJson(const v1::JobInfo& job);                   // {"job": {...}}
std::string NodesJson(const v1::ListNodesResponse& nodes);     // {"nodes": [...]}
std::string SharesJson(const v1::ListSharesResponse& shares);  // {"shares": [...]}

// A node's state as the pages show it: "idle", "mixed+draining", "down+drained", ...
std::string NodeStateText(const v1::NodeInfo& n);

}  // namespace muster::web
