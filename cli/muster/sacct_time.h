// The points in time sacct's -S/--starttime and -E/--endtime take.
#pragma once

#include <cstdint>
#include <string>

#include "muster/common/status.h"

namespace muster::cli {

// A point in time as sacct's -S/-E take it, in local time: HH:MM[:SS][AM|PM] (today's, even when
// later than now: sacct looks back), MMDD[YY][-HH:MM[:SS]], MM.DD[.YY][-HH:MM[:SS]],
// MM/DD[/YY][-HH:MM[:SS]], YYYY-MM-DD[THH:MM[:SS]], today, midnight, noon, fika (15:00), teatime
// (16:00), now[{+|-}N[seconds|minutes|hours|days|weeks]]. Unix milliseconds; INVALID_ARGUMENT
// listing the forms otherwise.
Result<int64_t> ParseAcctTime(const std::string& v, int64_t now);

}  // namespace muster::cli
