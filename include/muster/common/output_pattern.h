// Slurm's output file name patterns (%j %x %u %N %A %a %n %t %s %%).
#pragma once

#include <cstdint>
#include <string>

#include "muster/common/status.h"

namespace muster {

struct PatternVars {
  uint64_t job_id = 0;
  uint64_t array_job_id = 0;   // 0: not an array job (%A = %j)
  int64_t array_task_id = -1;  // -1: not an array job (%a = 4294967294, as Slurm prints)
  std::string job_name;
  std::string user;
  std::string node;            // %N: the node running the batch script
  uint32_t node_id = 0;        // %n
  uint32_t task_id = 0;        // %t
  std::string step = "batch";  // %s
};

// The job's part of the variables (the node's, step's and task's are the caller's to set).
PatternVars JobPatternVars(uint64_t job_id, const std::string& job_name, const std::string& user,
                           uint64_t array_job_id = 0, int64_t array_task_id = -1);

// Whether a pattern may be stored: at most kMaxPathBytes, no NUL, padding widths of at most
// kMaxPatternWidth. `what` names it in the message ("--output").
Status CheckOutputPattern(const std::string& pattern, const std::string& what);

// Expands the pattern; unknown %X sequences are kept literally. A padding width over
// kMaxPatternWidth is cut to it (patterns stored before the check existed). Relative results are
// joined to work_dir. An empty pattern means Slurm's default "slurm-%j.out".
std::string ExpandOutputPattern(const std::string& pattern, const PatternVars& vars,
                                const std::string& work_dir);

}  // namespace muster
