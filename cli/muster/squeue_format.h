// squeue's format language over a job's row: the fields of -o (%i %j %T ...) and -O (JobId,
// Name, State, ...), their headers and values, and how a job array's pending tasks collapse into
// one row ("7_[4-15%2]").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format_spec.h"
#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"

namespace muster::cli {

// squeue's own default -o.
inline constexpr char kSqueueDefaultFormat[] = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
// squeue -l/--long: the state in full and the time limit.
inline constexpr char kSqueueLongFormat[] = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
// The -o letters squeue supports here.
inline constexpr char kSqueueLetters[] = "iAjutTDCMlPRrNQVSbaFKqv";

// -o/--format.
Result<std::vector<FormatItem>> ParseSqueueFormat(const std::string& format);
// -O/--Format: "Name[:[.]width],..." (default width 20, left-justified; '.' right-justifies).
Result<std::vector<FormatItem>> ParseSqueueLongFormat(const std::string& format);

// How a row names its job: "7", a job array's task "7_3", or its pending tasks as one row.
struct RowId {
  std::string id;     // %i
  std::string tasks;  // %K: "3", "4-15%2"; "N/A" outside arrays
};
RowId RowIdOf(const v1::JobInfo& j);
// The row of a job array's pending tasks `tasks` (ascending), `first` being the first of them:
// "7_[4-6,9%2]" as squeue prints it without -r.
RowId CollapsedRowId(const v1::JobInfo& first, std::vector<uint32_t> tasks);

std::string SqueueHeader(char letter);
std::string SqueueField(char letter, const v1::JobInfo& j, const RowId& row, int64_t now_ms);
// One line (the header when `j` is null), appended to `out`.
void RenderSqueue(const std::vector<FormatItem>& items, const v1::JobInfo* j, const RowId& row,
                  int64_t now_ms, std::string& out);

}  // namespace muster::cli
