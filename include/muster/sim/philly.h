// Microsoft's Philly GPU cluster trace (2017) in its compact job table, philly_df_schedule.csv:
//
//   ,run_time,wait_time,submit_time,gpu_num
//   0,1389243,0,1502114581,1
//
// (the first column is the pandas index; times in seconds, submit_time a unix time). The table
// has no users, virtual clusters, machines or requested times. Pure: the caller opens (and
// decompresses) the file.
#pragma once

#include <cstdint>
#include <string_view>

#include "muster/common/status.h"
#include "muster/sim/trace.h"

namespace muster::sim {

struct PhillyOptions {
  // GPUs on each node of the cluster replayed: a job of more spans ceil(gpus / this) nodes.
  uint32_t gpus_per_node = 8;
};

// The jobs as the replay runs them: trace_id the index column, submit_s from the earliest
// submit, run_s = run_time, gpus = gpu_num, procs = gpus (one task per GPU, at least 1), nodes
// = ceil(gpus / gpus_per_node) (at least 1), req_time_s = run_s (the trace has no requested
// time: perfect estimates), user "philly", account "", traced_wait_s = wait_time; sorted by
// submit time (stable). Jobs with run_time <= 0 or gpu_num < 0 are dropped, malformed lines
// (wrong column count, not numbers) and lines past trace.h's bounds (a submit_time or run_time
// outside 0 to 100 years, gpu_num over 1,000,000) skipped: all counted in Trace::skipped and
// listed by line number in Trace::notes (the first 100), as is what was filled in. A wait_time
// outside 0 to 100 years is unknown (-1). The columns are found by
// their names in the header (index = the unnamed or "index" column, wait_time optional).
// INVALID_ARGUMENT when the header lacks a column it needs, or no line could be read at all.
Result<Trace> ReadPhilly(std::string_view text, const PhillyOptions& options = {});

}  // namespace muster::sim
