#include "muster/sim/trace_file.h"

#include <zlib.h>

#include <sstream>

#include "muster/sim/csv.h"
#include "muster/sim/openb.h"
#include "muster/sim/philly.h"
#include "muster/sim/swf.h"

namespace muster::sim {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The format a file's name says, or "".
std::string FormatFromName(const std::string& path) {
  const std::string full = EndsWith(path, ".gz") ? path.substr(0, path.size() - 3) : path;
  const size_t slash = full.rfind('/');
  const std::string base = slash == std::string::npos ? full : full.substr(slash + 1);
  if (EndsWith(base, ".swf")) return "swf";
  if (EndsWith(base, ".csv") && StartsWith(base, "philly")) return "philly";
  if (EndsWith(base, ".csv") && StartsWith(base, "openb_pod_list")) return "openb";
  return "";
}

}  // namespace

Result<std::string> ReadMaybeCompressed(const std::string& path, uint64_t max_bytes) {
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
    if (text.size() + static_cast<uint64_t>(n) > max_bytes) {
      gzclose(f);
      return InvalidArgument(path + " holds more than " + std::to_string(max_bytes) +
                             " bytes (after inflating): too large a trace to read");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  gzclose(f);
  return text;
}

Result<Trace> ReadTraceFile(const std::string& path, std::string format,
                            const TraceOptions& options) {
  if (format.empty()) {
    format = FormatFromName(path);
    if (format.empty()) {
      return InvalidArgument("cannot tell the format of " + path +
                             " from its name: give --format swf|philly|openb|csv|sacct");
    }
  }
  if (format != "swf" && format != "philly" && format != "openb" && format != "csv" &&
      format != "sacct") {
    return InvalidArgument("unknown trace format '" + format +
                           "' (swf, philly, openb, csv, sacct)");
  }
  MUSTER_ASSIGN_OR_RETURN(std::string text, ReadMaybeCompressed(path));
  if (format != "swf") {
    Result<Trace> t = format == "philly"  ? ReadPhilly(text, {options.gpus_per_node})
                      : format == "openb" ? ReadOpenbPods(text)
                      : format == "csv"   ? ReadCsvTrace(text)
                                          : ReadSacct(text);
    if (!t.ok()) return t.status().Prepend(path);
    return t;
  }
  std::istringstream in(std::move(text));
  SwfTrace swf = ReadSwf(in);
  if (swf.jobs.empty() && swf.skipped_count > 0) {
    return InvalidArgument(path + " is not in the Standard Workload Format: no job, " +
                           std::to_string(swf.skipped_count) +
                           (swf.skipped_count == 1 ? " line" : " lines") + " skipped (line " +
                           std::to_string(swf.skipped.front().line) + ": " +
                           swf.skipped.front().why + ")");
  }
  return SwfToTrace(swf);
}

}  // namespace muster::sim
