#include "muster/sim/trace_file.h"

#include <zlib.h>

#include <sstream>

#include "muster/sim/swf.h"

namespace muster::sim {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<std::string> ReadMaybeCompressed(const std::string& path) {
  // gzopen reads plain files as they are, so one path serves both.
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return NotFound("cannot open " + path);
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      std::string what = gzerror(f, &err);
      gzclose(f);
      return InvalidArgument(path + ": " + what);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  gzclose(f);
  return text;
}

Result<Trace> ReadTraceFile(const std::string& path, std::string format) {
  if (format.empty()) {
    std::string base = EndsWith(path, ".gz") ? path.substr(0, path.size() - 3) : path;
    if (EndsWith(base, ".swf")) {
      format = "swf";
    } else {
      return InvalidArgument("cannot tell the format of " + path +
                             " from its name: give --format swf|philly|openb|csv");
    }
  }
  MUSTER_ASSIGN_OR_RETURN(std::string text, ReadMaybeCompressed(path));
  std::istringstream in(std::move(text));
  if (format == "swf") {
    SwfTrace swf = ReadSwf(in);
    if (swf.jobs.empty() && swf.skipped_count > 0) {
      return InvalidArgument(
          path + " is not in the Standard Workload Format: " + std::to_string(swf.skipped_count) +
          " lines and no job (line " + std::to_string(swf.skipped.front().line) + ": " +
          swf.skipped.front().why + ")");
    }
    return SwfToTrace(swf);
  }
  return InvalidArgument("unknown trace format '" + format + "' (swf, philly, openb, csv)");
}

}  // namespace muster::sim
