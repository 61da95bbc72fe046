// A site's own job history, for muster-sim to replay: a documented CSV, or sacct's output.
//
// The CSV (--format csv): a header line, then one job a line, ','-separated, no quoted commas.
// Columns by name, in any order (names are case-insensitive; other columns are ignored and
// named in the notes):
//
//   id        required: the job's number (an integer)
//   submit    required: seconds (an integer) or an ISO-8601 UTC time, 2024-03-01T12:00:00
//   run       required: how long it ran: seconds, or Slurm's [D-]HH:MM:SS / MM:SS
//   procs     required: CPUs (at least 1)
//   req_time  its time limit, in the same forms as run; empty, UNLIMITED or Partition_Limit:
//             none (0). Without the column every job's limit is its run time (perfect estimates)
//   gpus      GPUs in all (default 0)
//   nodes     nodes (default 0: as many as the CPUs and GPUs need)
//   user      the submitting user (default "csv")
//   account   the account charged (default none)
//   wait      seconds it waited on the real machine, for comparison (default unknown)
//
// e.g.  id,submit,run,req_time,procs,gpus,nodes,user,account
//       17,2024-03-01T12:00:00,01:30:00,2:00:00,64,8,1,alice,physics
//
// Slurm's accounting (--format sacct): the output of
//
//   sacct -a -X -P -n -S 2024-01-01 -E 2024-02-01
//         --format=JobID,Submit,Start,End,Timelimit,NCPUS,NNodes,AllocTRES,User,Account,State
//
// (one command line; '|'-separated, no header, exactly these 11 fields in this order; -S and
// -E choose the window). run = End - Start, GPUs from AllocTRES's gres/gpu=N, the limit from
// Timelimit. sacct prints local times: they are read as UTC, so only a daylight-saving change
// inside the window shifts times (by an hour).
//
// Pure: the caller opens (and decompresses) the file.
#pragma once

#include <string_view>

#include "muster/common/status.h"
#include "muster/sim/trace.h"

namespace muster::sim {

// The jobs in submit order (stable), submit_s from the earliest. Jobs with a run <= 0 or no
// CPU are dropped, malformed lines (wrong column count, a value not in its column's forms) and
// lines past trace.h's bounds skipped: all counted in Trace::skipped and listed by line number
// (the first 100) in Trace::notes. The bounds: submit times (seconds, or ISO times: 1970 to
// 2070), runs and time limits 0 to 100 years; at most 10,000,000 CPUs, 1,000,000 GPUs and
// 1,000,000 nodes. A wait outside 0 to 100 years is unknown. A leading UTF-8 byte order mark
// (as spreadsheets write) is passed over. INVALID_ARGUMENT naming the column when a required one is
// missing, for a column named twice, or when no line could be read.
Result<Trace> ReadCsvTrace(std::string_view text);

// sacct's lines (a header line "JobID|Submit|..." is passed over). Jobs that never started
// (Start Unknown or None) or have not ended (End Unknown) are dropped and counted, as are runs
// <= 0, malformed lines and lines past the bounds above (Submit and Start 1970 to 2070). trace_id =
// JobID where it is a number; array tasks (1234_5) and heterogeneous components (1234+0) take their
// line number, the id kept in the notes (the first 100). traced_wait_s = Start - Submit.
// INVALID_ARGUMENT when no line could be read.
Result<Trace> ReadSacct(std::string_view text);

}  // namespace muster::sim
