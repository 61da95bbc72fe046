// Slurm's time and size formats.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "muster/common/status.h"

namespace muster {

// A time limit in Slurm's forms: "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S", and
// "UNLIMITED"/"infinite" (returned as 0 = no limit). Returns milliseconds.
Result<int64_t> ParseTimeLimit(std::string_view text);

// A duration for people, as squeue prints it: "M:SS", "H:MM:SS", "D-HH:MM:SS".
std::string FormatDuration(int64_t ms);

// A memory size: plain number = MiB; suffixes K, M, G, T (binary). Returns MiB.
Result<uint64_t> ParseMemoryMb(std::string_view text);

// A duration with a unit for config files: "500ms", "30s", "5m", "2h", "1d".
Result<int64_t> ParseDurationMs(std::string_view text);

// A point in time as Slurm's commands take it (sbatch --begin, sacct -S): YYYY-MM-DD[THH:MM[:SS]],
// HH:MM[:SS] (the next such time), MM/DD[/YY], now[+-N[unit]] (seconds unless a unit is given:
// s, min, h, d, w and their longer forms), today, midnight, noon, teatime, tomorrow. Local time;
// returns unix milliseconds.
Result<int64_t> ParseWhen(const std::string& v, int64_t now);

// ISO-like local time for people: 2026-11-22T10:33:14 (Slurm's format). "N/A" for 0.
std::string FormatTimestamp(int64_t unix_ms);

}  // namespace muster
