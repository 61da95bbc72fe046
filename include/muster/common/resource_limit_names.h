// Slurm's names of the resource limits --propagate and PropagateResourceLimits take, with their
// RLIMIT_*, in Slurm's order: one table for the client that reads them, the config that names
// them, the controller that bounds a job's list and the agent that sets them.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>

namespace muster {

struct ResourceLimitName {
  const char* name;
  int resource;
};

inline constexpr ResourceLimitName kResourceLimitNames[] = {
    {"CPU", RLIMIT_CPU},     {"FSIZE", RLIMIT_FSIZE},   {"DATA", RLIMIT_DATA},
    {"STACK", RLIMIT_STACK}, {"CORE", RLIMIT_CORE},     {"RSS", RLIMIT_RSS},
    {"NPROC", RLIMIT_NPROC}, {"NOFILE", RLIMIT_NOFILE}, {"MEMLOCK", RLIMIT_MEMLOCK},
    {"AS", RLIMIT_AS},
};

// Its index in kResourceLimitNames ("NOFILE"; no RLIMIT_ prefix), or nullopt.
inline std::optional<size_t> ResourceLimitIndex(std::string_view name) {
  auto it = std::find_if(std::begin(kResourceLimitNames), std::end(kResourceLimitNames),
                         [&](const ResourceLimitName& l) { return name == l.name; });
  if (it == std::end(kResourceLimitNames)) return std::nullopt;
  return static_cast<size_t>(it - std::begin(kResourceLimitNames));
}

}  // namespace muster
