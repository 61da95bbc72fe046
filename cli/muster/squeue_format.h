// squeue's format language over a job's row: the fields of -o (%i %j %T ...) and -O (JobId,
// Name, State, ...), their headers and values, how a job array's pending tasks collapse into
// one row ("7_[4-15%2]"), the -S/--sort keys, and the rows of -s/--steps.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format_spec.h"
#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"

namespace muster::cli {

// squeue's own default -o.
inline constexpr char kSqueueDefaultFormat[] = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
// squeue -l/--long: the state in full and the time limit.
inline constexpr char kSqueueLongFormat[] = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
// squeue -s/--steps.
inline constexpr char kSqueueStepFormat[] = "%.15i %.8j %.9P %.8u %.9M %N";
// The -o letters squeue supports here, in the order %all prints them.
inline constexpr char kSqueueLetters[] = "abcefijlmnpqrtuvxyABCDEFKLMNPQRSTUVWYZ";
// ...and those of a step's row (-s).
inline constexpr char kSqueueStepLetters[] = "AijlMNPSuU";
// -O fields without an -o letter stand for themselves with these (digits: never a letter).
inline constexpr char kFieldNumTasks = '0';
inline constexpr char kFieldCpusPerTask = '1';
inline constexpr char kFieldStdout = '2';
inline constexpr char kFieldStderr = '3';
inline constexpr char kFieldBatchFlag = '4';
inline constexpr char kFieldRequeue = '5';
inline constexpr char kFieldRestartCnt = '6';
inline constexpr char kFieldExitCode = '7';
inline constexpr char kFieldPendingTime = '8';
inline constexpr char kFieldCluster = '9';

// -o/--format (steps: the letters of a step's row). "%all" is every field, '|' between them.
Result<std::vector<FormatItem>> ParseSqueueFormat(const std::string& format, bool steps = false);
// -O/--Format: "Name[:[.]width[suffix]],..." (default width 20, left-justified; '.' right).
Result<std::vector<FormatItem>> ParseSqueueLongFormat(const std::string& format,
                                                      bool steps = false);
// Whether the fields need what only the controller's full listing carries (memory, paths,
// dependencies, ...); the brief one has the rest.
bool NeedsFullListing(const std::vector<FormatItem>& items);

// How a row names its job: "7", a job array's task "7_3", or its pending tasks as one row.
struct RowId {
  std::string id;     // %i
  std::string tasks;  // %K: "3", "4-15%2"; "N/A" outside arrays
};
RowId RowIdOf(const v1::JobInfo& j);
// The row of a job array's pending tasks `tasks` (ascending), `first` being the first of them:
// "7_[4-6,9%2]" as squeue prints it without -r.
RowId CollapsedRowId(const v1::JobInfo& first, std::vector<uint32_t> tasks);

// What a row's values depend on besides the job.
struct SqueueContext {
  int64_t now_ms = 0;
  std::string cluster;     // -O Cluster
  bool noconvert = false;  // --noconvert: %m in megabytes as asked, not 4G
};

std::string SqueueHeader(char letter);
std::string SqueueField(char letter, const v1::JobInfo& j, const RowId& row,
                        const SqueueContext& ctx);
inline std::string SqueueField(char letter, const v1::JobInfo& j, const RowId& row,
                               int64_t now_ms) {
  return SqueueField(letter, j, row, SqueueContext{now_ms});
}
// One line (the header when `j` is null), appended to `out`.
void RenderSqueue(const std::vector<FormatItem>& items, const v1::JobInfo* j, const RowId& row,
                  const SqueueContext& ctx, std::string& out);
inline void RenderSqueue(const std::vector<FormatItem>& items, const v1::JobInfo* j,
                         const RowId& row, int64_t now_ms, std::string& out) {
  RenderSqueue(items, j, row, SqueueContext{now_ms}, out);
}

// Memory in megabytes as squeue shows it: "4G", "1.50G", "1000M" (--noconvert: "4096M").
std::string MemoryText(uint64_t mb, bool noconvert);

// -S/--sort: format letters, each ascending or, after '-', descending; the first is the most
// significant. `letters` are the keys taken; a letter in `inert` is taken and orders nothing
// (Slurm's own no-op keys, and data Muster's jobs do not carry); "cluster" is taken and orders
// nothing (one cluster). INVALID_ARGUMENT naming any other character.
struct SortKey {
  char letter = 0;
  bool descending = false;
};
Result<std::vector<SortKey>> ParseSortKeys(const std::string& spec, std::string_view letters,
                                           std::string_view inert = {});
// A row's value under one key: numbers compare first, then text.
struct SortValue {
  double number = 0;
  double number2 = 0;
  std::string text;
};
// Orders `rows` by `keys`; rows equal in every key keep their order.
template <typename Row>
void SortRows(std::vector<Row>& rows, const std::vector<SortKey>& keys,
              const std::function<SortValue(char, const Row&)>& value);
// squeue's job keys (the letters of -S for jobs) and a job row's value under one.
inline constexpr char kSqueueSortLetters[] = "BbcCdDefgGhHiIjJlLmMnNOpPQStTuUvVWz";
inline constexpr char kSqueueInertSortLetters[] = "bcdfgGhHIJnOz";
SortValue SqueueSortValue(char letter, const v1::JobInfo& j, int64_t now_ms);

// A job step's row (-s/--steps): the step of `job`, or its batch script ("N.batch").
struct StepRow {
  const v1::JobInfo* job = nullptr;
  const v1::StepRecord* step = nullptr;  // null: the batch step
};
inline constexpr char kSqueueStepSortLetters[] = "bilMNPSuU";
std::string SqueueStepHeader(char letter);
std::string SqueueStepField(char letter, const StepRow& s, int64_t now_ms);
SortValue SqueueStepSortValue(char letter, const StepRow& s, int64_t now_ms);
// -s/--steps LIST: "7.0", "7_3.1", "7.batch", or "7" (every step of job 7).
struct StepRef {
  uint64_t job = 0;
  int64_t task = -1;  // a job array's task; -1: none named
  int64_t step = -1;  // -1: every step; kBatchStep: the batch script
};
inline constexpr int64_t kBatchStep = -2;
Result<std::vector<StepRef>> ParseStepRefs(const std::string& list);
bool StepRefsMatch(const std::vector<StepRef>& refs, const StepRow& s);

template <typename Row>
void SortRows(std::vector<Row>& rows, const std::vector<SortKey>& keys,
              const std::function<SortValue(char, const Row&)>& value) {
  if (keys.empty()) return;
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    for (const SortKey& k : keys) {
      SortValue va = value(k.letter, a), vb = value(k.letter, b);
      if (k.descending) std::swap(va, vb);
      if (va.number != vb.number) return va.number < vb.number;
      if (va.number2 != vb.number2) return va.number2 < vb.number2;
      if (va.text != vb.text) return va.text < vb.text;
    }
    return false;
  });
}

}  // namespace muster::cli
