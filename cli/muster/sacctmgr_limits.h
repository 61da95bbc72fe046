// sacctmgr's limit and QoS words: GrpTRES=gres/gpu:h100=16, MaxJobs=4, MaxWall=1-00:00:00,
// Priority=, Preempt=, ... read into the requests, and `sacctmgr show qos`.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>

#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"

namespace muster::cli {

// A value by any of its spellings (sacctmgr accepts name, names, account, accounts, ...), taken
// out of `m`.
std::optional<std::string> TakeKey(std::map<std::string, std::string>& m,
                                   std::initializer_list<const char*> keys);

// Takes the limit keys out of `values` (case-folded keys) into `out`; "-1" clears a limit.
// `qos` allows the QoS-only keys (MaxTRESPerUser). INVALID_ARGUMENT for a bad value.
Status TakeLimits(std::map<std::string, std::string>& values, bool qos, v1::UsageLimits* out);

// The limits as sacctmgr prints them, by column: "GrpTRES", "GrpJobs", "GrpSubmit", "MaxJobs"
// (MaxJobsPU for a QoS), "MaxSubmit", "MaxTRES", "MaxTRESPU", "MaxWall".
std::string LimitColumn(const v1::UsageLimits& l, const std::string& column);

// sacctmgr add|modify|remove qos: `values` are the spec words (where, or set for modify).
Status UpdateQos(v1::AccountOp op, const std::string& name,
                 std::map<std::string, std::string>& values);

// sacctmgr show qos [name] [format=...].
int ShowQos(const std::vector<std::string>& names, const std::string& format, bool header,
            const std::string& sep, bool trailing_sep);

}  // namespace muster::cli
