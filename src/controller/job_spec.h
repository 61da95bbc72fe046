// Turning what a user asked for (v1::JobSpec) into what the scheduler places (core::JobRequest).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/core/types.h"
#include "muster/v1/common.pb.h"
#include "muster/v1/records.pb.h"
#include "partition_limits.h"

namespace muster::controller {

// Fills in partitions, node and task counts (block distribution), GPUs per node and the effective
// time limit. Does not check whether the request fits (core::Place(kEver) does).
// Errors: INVALID_ARGUMENT for contradictory counts, NOT_FOUND for an unknown partition,
// UNIMPLEMENTED for requests this version cannot express (with what to use instead).
Status NormalizeJobSpec(v1::JobSpec& spec, const Config& config, const PartitionLimitMap& limits,
                        int64_t* time_limit_ms);

core::JobRequest ToCoreRequest(const v1::JobRecord& rec);

// sbatch --array: "0-15", "0-15:4", "1,3,5-7", each with an optional "%N" (at most N tasks run
// at once). Task ids are below max_array_size. The tasks come back ascending, without
// duplicates; `out` gets count/min/max/step/max_running/spec (array_job_id and task_id are the
// caller's). INVALID_ARGUMENT, naming the problem, for anything else.
Result<std::vector<uint32_t>> ParseArraySpec(const std::string& spec, uint32_t max_array_size,
                                             v1::ArrayTask* out);

// --constraint "a&b|c" as an OR of ANDs ({{a,b},{c}}); ',' is AND as in Slurm. UNIMPLEMENTED for
// Slurm's brackets, parentheses and counts; INVALID_ARGUMENT for a malformed feature name.
Result<std::vector<std::vector<std::string>>> ParseConstraint(const std::string& expr);

}  // namespace muster::controller
