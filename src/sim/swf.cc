#include "muster/sim/swf.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <string_view>

namespace muster::sim {
namespace {

constexpr size_t kFields = 18;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// The line's whitespace-separated words, at most kFields + 1 (one more means "too many").
size_t Words(std::string_view line, std::array<std::string_view, kFields + 1>& out) {
  size_t n = 0, i = 0;
  while (i < line.size() && n < out.size()) {
    while (i < line.size() && IsSpace(line[i])) ++i;
    if (i == line.size()) break;
    const size_t start = i;
    while (i < line.size() && !IsSpace(line[i])) ++i;
    out[n++] = line.substr(start, i - start);
  }
  return n;
}

// An integer field. Some archive files write whole numbers as "12.00": the fraction must be 0.
std::optional<int64_t> Integer(std::string_view w) {
  const size_t dot = w.find('.');
  std::string_view whole = w.substr(0, dot);
  if (dot != std::string_view::npos) {
    for (char c : w.substr(dot + 1)) {
      if (c != '0') return std::nullopt;
    }
  }
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), v);
  if (ec != std::errc() || end != whole.data() + whole.size() || whole.empty()) return std::nullopt;
  return v;
}

// A measured value that may carry a fraction ("7.38"): its whole part.
std::optional<int64_t> Whole(std::string_view w) {
  const size_t dot = w.find('.');
  if (dot == std::string_view::npos) return Integer(w);
  for (char c : w.substr(dot + 1)) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  std::string_view whole = w.substr(0, dot);
  if (whole.empty() || whole == "-") return int64_t{0};
  return Integer(whole);
}

void Skip(SwfTrace& t, uint64_t line, std::string why) {
  ++t.skipped_count;
  if (t.skipped.size() < kMaxSkippedKept) t.skipped.push_back({line, std::move(why)});
}

// "; MaxProcs: 128" -> the value of a header key this reader keeps. A machine of more than
// kMaxTraceNodes processors or nodes is not kept (the line is counted as skipped): muster-sim
// builds a node for each (as many as its --nodes takes), and a larger one costs gigabytes
// before the config refuses it.
void ReadHeader(std::string_view line, uint64_t number, SwfTrace& t) {
  line.remove_prefix(1);  // ';'
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  std::string_view key = line.substr(0, colon);
  while (!key.empty() && IsSpace(key.front())) key.remove_prefix(1);
  while (!key.empty() && IsSpace(key.back())) key.remove_suffix(1);
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && IsSpace(value.front())) value.remove_prefix(1);
  while (!value.empty() && IsSpace(value.back())) value.remove_suffix(1);
  std::optional<int64_t>* slot = key == "MaxProcs"        ? &t.max_procs
                                 : key == "MaxNodes"      ? &t.max_nodes
                                 : key == "UnixStartTime" ? &t.unix_start_time
                                                          : nullptr;
  if (!slot) return;
  auto v = Integer(value);
  if (!v || *v < 0) return;
  const int64_t max = slot == &t.unix_start_time ? kMaxTraceSeconds : int64_t{kMaxTraceNodes};
  if (*v > max) {
    Skip(t, number,
         std::string(key) + " " + std::to_string(*v) + " is more than " + std::to_string(max) +
             ": not kept");
    return;
  }
  *slot = *v;
}

// What of a job line is past trace.h's bounds, or "". Fields that the replay does not use
// (memory, status, ids) may hold any integer.
std::string OutOfRange(const std::array<int64_t, kFields>& f) {
  struct Bound {
    size_t field;  // from 0
    const char* what;
    int64_t max;
  };
  static constexpr Bound kBounds[] = {{1, "submit time", kMaxTraceSeconds},
                                      {3, "run time", kMaxTraceSeconds},
                                      {4, "processors", kMaxTraceProcs},
                                      {7, "requested processors", kMaxTraceProcs},
                                      {8, "requested time", kMaxTraceSeconds}};
  for (const Bound& b : kBounds) {
    if (f[b.field] > b.max) {
      return "field " + std::to_string(b.field + 1) + " (" + b.what + ") " +
             std::to_string(f[b.field]) + " is more than " + std::to_string(b.max) +
             (b.max == kMaxTraceSeconds ? " (100 years)" : "");
    }
  }
  return "";
}

}  // namespace

SwfTrace ReadSwf(std::istream& in) {
  SwfTrace t;
  std::string text;
  uint64_t number = 0;
  std::array<std::string_view, kFields + 1> words;
  while (std::getline(in, text)) {
    ++number;
    std::string_view line = text;
    // A UTF-8 byte order mark, as some editors write before the first line.
    if (number == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
    size_t first = 0;
    while (first < line.size() && IsSpace(line[first])) ++first;
    if (first == line.size()) continue;  // blank
    if (line[first] == ';') {
      ReadHeader(line.substr(first), number, t);
      continue;
    }
    const size_t n = Words(line, words);
    if (n != kFields) {
      Skip(t, number,
           n > kFields ? "more than 18 fields"
                       : "18 fields expected, " + std::to_string(n) + " found");
      continue;
    }
    std::array<int64_t, kFields> f{};
    size_t bad = kFields;
    for (size_t k = 0; k < kFields && bad == kFields; ++k) {
      // The archive writes average CPU time and used memory (fields 6 and 7) with fractions.
      const bool measured = k == 5 || k == 6;
      if (auto v = measured ? Whole(words[k]) : Integer(words[k])) {
        f[k] = *v;
      } else {
        bad = k;
      }
    }
    if (bad != kFields) {
      Skip(t, number,
           "field " + std::to_string(bad + 1) + " is not an integer: '" +
               std::string(words[bad].substr(0, 32)) + "'");
      continue;
    }
    if (f[1] < 0) {
      Skip(t, number, "a negative submit time");
      continue;
    }
    if (std::string why = OutOfRange(f); !why.empty()) {
      Skip(t, number, std::move(why));
      continue;
    }
    SwfJob j{f[0], f[1],  f[2],  f[3],  f[4],  f[5],  f[6],  f[7],  f[8],
             f[9], f[10], f[11], f[12], f[13], f[14], f[15], f[16], f[17]};
    if (j.req_time_s < 0 && j.run_s >= 0) {
      j.req_time_s = j.run_s;
      ++t.time_filled;
    }
    t.jobs.push_back(j);
  }
  return t;
}

Trace SwfToTrace(const SwfTrace& swf) {
  Trace t;
  t.format = "swf";
  t.max_procs = swf.max_procs.value_or(0);
  t.max_nodes = swf.max_nodes.value_or(0);
  t.skipped = swf.skipped_count;
  for (const SwfSkipped& s : swf.skipped) {
    t.notes.push_back("line " + std::to_string(s.line) + ": " + s.why);
  }
  if (swf.skipped_count > swf.skipped.size()) {
    t.notes.push_back(std::to_string(swf.skipped_count - swf.skipped.size()) +
                      " more malformed lines");
  }
  if (swf.time_filled > 0) {
    t.notes.push_back(std::to_string(swf.time_filled) +
                      " jobs had no requested time (-1): their run time was used");
  }
  uint64_t no_run = 0;
  t.jobs.reserve(swf.jobs.size());
  for (const SwfJob& j : swf.jobs) {
    const int64_t procs = std::max(j.procs, j.req_procs);
    if (j.run_s <= 0 || procs <= 0) {
      ++no_run;
      continue;
    }
    SimJob s;
    s.trace_id = j.id;
    s.submit_s = j.submit_s;
    s.run_s = j.run_s;
    s.req_time_s = j.req_time_s > 0 ? j.req_time_s : j.run_s;
    s.procs = static_cast<uint32_t>(std::min<int64_t>(procs, kMaxTraceProcs));
    s.user = "u" + std::to_string(j.user);
    s.account = j.group >= 0 ? "g" + std::to_string(j.group) : "";
    s.traced_wait_s = j.wait_s >= 0 && j.wait_s <= kMaxTraceSeconds ? j.wait_s : -1;
    t.jobs.push_back(std::move(s));
  }
  if (no_run > 0) {
    t.skipped += no_run;
    t.notes.push_back(std::to_string(no_run) +
                      " jobs with no run time or no processors were dropped");
  }
  std::stable_sort(t.jobs.begin(), t.jobs.end(),
                   [](const SimJob& a, const SimJob& b) { return a.submit_s < b.submit_s; });
  return t;
}

}  // namespace muster::sim
