// sacct's table: the rows it prints for a job (the job, its batch script, its steps) and the
// fields (-o/--format, -e/--helpformat) that turn a row into text.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"

namespace muster::cli {

// One line of output: a job, its batch script (ID.batch) or one of its steps (ID.N).
struct Row {
  const v1::JobInfo* job = nullptr;
  std::string id;      // 7, 7_3 (a job array's task), 7.batch, 7_3.0
  std::string raw_id;  // the same with the job's own id (JobIDRaw)
  std::string name;
  std::string partition;
  std::string state;
  int32_t exit_code = 0;
  int32_t exit_signal = 0;
  uint32_t cpus = 0;
  uint32_t gpus = 0;
  uint32_t nnodes = 0;
  uint32_t ntasks = 0;
  std::string nodelist;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  bool is_job = false;
};

// The job's row, then (unless `allocations_only`, -X) its batch script's and its steps' rows.
// The rows point into `j`.
std::vector<Row> RowsOf(const v1::JobInfo& j, bool allocations_only);

// What every field's value depends on besides its row: the options that change how it prints.
struct View {
  int64_t now = 0;
  char units = 0;          // --units: K, M, G, T or P; 0: the largest unit that divides exactly
  bool noconvert = false;  // --noconvert: sizes in MiB as recorded
  bool local_uid = false;  // --use-local-uid: UID from this machine's passwd database
  std::string cluster;     // the Cluster field: the config's cluster_name
};

struct Field {
  using Value = std::function<std::string(const Row&, const View&)>;
  std::string name;
  size_t width;
  Value value;          // empty: the field is refused, for `refusal`
  const char* refusal;  // why Muster cannot print it
};

// Every field of Slurm's sacct (and Muster's Restarts), in --helpformat's order. Those with no
// data here are either blank (what is not gathered or not kept: as Slurm prints them then) or
// refused with the reason.
const std::vector<Field>& Fields();

// sacct -l: Slurm's long list (most of its usage fields are blank here).
inline constexpr const char* kLongFormat =
    "JobID,JobIDRaw,JobName,Partition,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,"
    "MaxRSSNode,MaxRSSTask,AveRSS,MaxPages,MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,"
    "MinCPUTask,AveCPU,NTasks,AllocCPUS,Elapsed,State,ExitCode,AveCPUFreq,ReqCPUFreqMin,"
    "ReqCPUFreqMax,ReqCPUFreqGov,ReqMem,ConsumedEnergy,MaxDiskRead,MaxDiskReadNode,"
    "MaxDiskReadTask,AveDiskRead,MaxDiskWrite,MaxDiskWriteNode,MaxDiskWriteTask,AveDiskWrite,"
    "ReqTRES,AllocTRES,TRESUsageInAve,TRESUsageInMax,TRESUsageInMaxNode,TRESUsageInMaxTask,"
    "TRESUsageInMin,TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageInTot,TRESUsageOutMax,"
    "TRESUsageOutMaxNode,TRESUsageOutMaxTask,TRESUsageOutAve,TRESUsageOutTot";

struct Column {
  const Field* field;
  size_t width;
  bool left;  // NAME%-WIDTH
};

// "Name[%[-]WIDTH],...", or ALL for every field there is. Names as Slurm finds them: exactly (any
// case), else the first field whose name starts with it.
Result<std::vector<Column>> ParseFormat(const std::string& spec);

// sacct cuts a long value and marks the cut with '+'.
std::string Fit(const std::string& v, size_t width, bool left);

// A time limit in whole minutes, as Slurm keeps it; UINT64_MAX: none.
uint64_t LimitMinutes(int64_t ms);

// A user's uid and primary group in this machine's passwd database (nullptr: none), looked up once.
const std::pair<uid_t, gid_t>* PasswdOf(const std::string& user);

}  // namespace muster::cli
