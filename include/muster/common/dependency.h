// sbatch --dependency: "afterok:12:13,afterany:14", "afterok:12?afternotok:13", "after:12+10",
// "singleton". Terms joined by ',' must all be satisfied, by '?' any one of them (not both
// separators in one expression). Pure parsing; the controller decides what is satisfied.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "muster/common/status.h"

namespace muster {

struct DependencyTerm {
  // In the order of the records' DependencyRecord::Kind.
  enum class Kind { kAfter, kAfterAny, kAfterOk, kAfterNotOk, kSingleton, kAfterCorr };
  Kind kind = Kind::kAfterAny;
  uint64_t job_id = 0;   // 0 for singleton
  int64_t delay_ms = 0;  // after:ID+MINUTES
};

struct Dependency {
  std::vector<DependencyTerm> terms;
  bool any = false;  // '?': one satisfied term is enough
};

// INVALID_ARGUMENT naming the part that does not parse; afterburstbuffer and expand are refused
// as not supported.
Result<Dependency> ParseDependency(std::string_view text);
// Slurm's form: "afterok:12:13,afterany:14" (ids of one kind grouped, in order).
std::string FormatDependency(const Dependency& d);
const char* DependencyKindName(DependencyTerm::Kind kind);

}  // namespace muster
