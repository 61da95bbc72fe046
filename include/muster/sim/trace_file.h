// Opens a trace file (plain or gzip-compressed) and reads it with the reader its format names.
#pragma once

#include <string>

#include "muster/common/status.h"
#include "muster/sim/trace.h"

namespace muster::sim {

// `format`: "swf", "philly", "openb", "csv"; empty: from the file's name (".swf[.gz]" is SWF,
// ".csv" needs naming). NOT_FOUND for a missing file, INVALID_ARGUMENT for an unknown format or
// a file that is not what its format says at all (no line could be read).
Result<Trace> ReadTraceFile(const std::string& path, std::string format = "");

// The whole file, inflated when it is gzip-compressed (by its magic bytes, not its name).
Result<std::string> ReadMaybeCompressed(const std::string& path);

}  // namespace muster::sim
