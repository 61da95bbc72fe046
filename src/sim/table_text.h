// What the table readers (Philly, openb, CSV, sacct) share: lines and fields of delimited text,
// strict numbers, Slurm's time forms, and the list of lines a reader skipped or dropped. Private
// to src/sim.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "muster/common/status.h"
#include "muster/sim/trace.h"

namespace muster::sim::table {

// A UTF-8 byte order mark, as spreadsheets write before the first line.
inline constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// Calls fn(line_number, line) for each line of `text` (numbered from 1, '\r' removed, a leading
// byte order mark passed over), blank lines included; stops early when fn returns false.
template <typename Fn>
void ForEachLine(std::string_view text, Fn&& fn) {
  if (text.substr(0, kUtf8Bom.size()) == kUtf8Bom) text.remove_prefix(kUtf8Bom.size());
  uint64_t number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = end + 1;
    if (!fn(++number, line)) return;
  }
}

bool IsBlank(std::string_view line);

// The line's fields between `sep`s, each without surrounding blanks or one pair of surrounding
// double quotes (no quoted separators: these tables have none).
void SplitFields(std::string_view line, char sep, std::vector<std::string_view>& out);

// A whole number ("42", "-3"; "12.00" too: some exports write whole numbers with a fraction of
// zeros). Nothing else: no blanks, no other fraction, no overflow.
std::optional<int64_t> Integer(std::string_view s);

// A duration in seconds: a plain number of seconds, or Slurm's forms MM:SS, HH:MM:SS, D-HH,
// D-HH:MM, D-HH:MM:SS (as sacct prints Elapsed and Timelimit).
std::optional<int64_t> Duration(std::string_view s);

// An ISO-8601 time "2024-03-01T12:00:00" (also with ' ' for 'T', a trailing 'Z', or the date
// alone) as seconds since the epoch, read as UTC.
std::optional<int64_t> IsoTime(std::string_view s);

// The first bytes of a field, for a message.
std::string Shown(std::string_view s);

// Values past trace.h's bounds: the reason lines holding them are skipped under, and what a
// message says of one ("run 4000000000 s is not within 0 and 100 years (3155760000 s)", "gpus
// 2000000 is more than 1000000").
inline constexpr const char* kOutOfRange = "out of range: skipped";
inline bool InTimeRange(int64_t s) { return s >= 0 && s <= kMaxTraceSeconds; }
std::string TimeOutOfRange(std::string_view what, int64_t s);
std::string CountOutOfRange(std::string_view what, int64_t n, uint64_t max);

// Column positions in a header line, by lowercased name.
struct Header {
  std::vector<std::string> names;  // lowercased, in order ("" for an unnamed column)
  std::map<std::string, size_t> index;
  size_t columns = 0;
  std::optional<size_t> Find(const std::string& name) const;
};
// INVALID_ARGUMENT when a name appears twice.
Result<Header> ReadHeader(std::string_view line, char sep, const std::string& what);

// What a reader left out, by line: the first kMaxListed lines listed with the reason, and a
// count for each reason ("malformed" and each drop rule), in the order they first happened.
class Skips {
 public:
  static constexpr size_t kMaxListed = 100;
  void Add(uint64_t line, const std::string& reason, std::string detail = "");
  uint64_t total() const { return total_; }
  uint64_t count(const std::string& reason) const;
  // The listed lines ("line 7: <reason>: <detail>"), "N more lines skipped" when some were not
  // listed, then one line per reason with its count.
  void AppendNotes(std::vector<std::string>& notes) const;
  // The first listed line's "line N: reason: detail", for an error message.
  std::string First() const;

 private:
  uint64_t total_ = 0;
  std::vector<std::string> listed_;
  std::vector<std::pair<std::string, uint64_t>> counts_;
};

// Sorts by submit time (stable) and makes submit times relative to the earliest.
void SortAndRebase(Trace& t);

}  // namespace muster::sim::table
