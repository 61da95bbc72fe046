// Opens a trace file (plain or gzip-compressed) and reads it with the reader its format names.
#pragma once

#include <cstdint>
#include <string>

#include "muster/common/status.h"
#include "muster/sim/trace.h"

namespace muster::sim {

// What a reader needs besides the file.
struct TraceOptions {
  // philly: GPUs on each node of the replayed cluster (a job of more spans several nodes).
  uint32_t gpus_per_node = 8;
};

// `format`:
//   "swf"     the Standard Workload Format (swf.h)
//   "philly"  Microsoft Philly's philly_df_schedule.csv (philly.h)
//   "openb"   Alibaba openb's pod list, openb_pod_list_*.csv (openb.h; the node list is a
//             cluster, not a trace: ReadOpenbNodesFile)
//   "csv"     a site's own history in the documented CSV (csv.h)
//   "sacct"   `sacct -a -X -P -n --format=JobID,Submit,Start,End,Timelimit,NCPUS,NNodes,
//             AllocTRES,User,Account,State` output (csv.h)
// Empty: from the file's name, without a trailing ".gz": "*.swf" is SWF, "philly*.csv" Philly,
// "openb_pod_list*.csv" openb; other names (other .csv files too) need naming. NOT_FOUND for a
// missing file, INVALID_ARGUMENT for an unknown format or a file that is not what its format
// says at all (no line could be read, a column it needs missing).
Result<Trace> ReadTraceFile(const std::string& path, std::string format = "",
                            const TraceOptions& options = {});

// The most a trace file may hold, inflated: a gzip file of a few megabytes can inflate to
// terabytes, and the reader holds the text whole.
inline constexpr uint64_t kMaxTraceFileBytes = uint64_t{4} << 30;  // 4 GiB

// The whole file, inflated when it is gzip-compressed (by its magic bytes, not its name).
// INVALID_ARGUMENT when it holds more than max_bytes.
Result<std::string> ReadMaybeCompressed(const std::string& path,
                                        uint64_t max_bytes = kMaxTraceFileBytes);

}  // namespace muster::sim
