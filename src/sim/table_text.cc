#include "table_text.h"

#include <algorithm>
#include <charconv>

#include "muster/common/strings.h"

namespace muster::sim::table {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view Strip(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Digits only, at least one.
std::optional<int64_t> Digits(std::string_view s) {
  if (s.empty()) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Exactly `width` digits.
std::optional<int64_t> Fixed(std::string_view s, size_t width) {
  if (s.size() != width) return std::nullopt;
  return Digits(s);
}

// Days from 1970-01-01 to the given day of the proleptic Gregorian calendar. Years are counted
// from March, so that the leap day ends its year: then a year's days before a month follow
// one formula, (153 * m + 2) / 5 for m months after March.
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  if (m <= 2) y -= 1;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;  // 400-year cycles of 146,097 days
  const int64_t year_of_era = y - era * 400;
  const int64_t month_from_march = m > 2 ? m - 3 : m + 9;
  const int64_t day_of_year = (153 * month_from_march + 2) / 5 + d - 1;
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  // 719,468 days from 0000-03-01 to 1970-01-01.
  return era * 146'097 + day_of_era - 719'468;
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int64_t DaysInMonth(int64_t y, int64_t m) {
  static constexpr int64_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

}  // namespace

bool IsBlank(std::string_view line) { return Strip(line).empty(); }

void SplitFields(std::string_view line, char sep, std::vector<std::string_view>& out) {
  out.clear();
  size_t pos = 0;
  for (;;) {
    size_t end = line.find(sep, pos);
    if (end == std::string_view::npos) end = line.size();
    std::string_view f = Strip(line.substr(pos, end - pos));
    if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
    out.push_back(f);
    if (end == line.size()) return;
    pos = end + 1;
  }
}

std::optional<int64_t> Integer(std::string_view s) {
  const size_t dot = s.find('.');
  if (dot != std::string_view::npos) {
    for (char c : s.substr(dot + 1)) {
      if (c != '0') return std::nullopt;
    }
    s = s.substr(0, dot);
  }
  const bool negative = !s.empty() && s.front() == '-';
  if (negative) s.remove_prefix(1);
  auto v = Digits(s);
  if (!v) return std::nullopt;
  return negative ? -*v : *v;
}

std::optional<int64_t> Duration(std::string_view s) {
  if (s.find_first_of(":-") == std::string_view::npos) return Digits(s);
  int64_t days = 0;
  bool has_days = false;
  if (const size_t dash = s.find('-'); dash != std::string_view::npos) {
    auto d = Digits(s.substr(0, dash));
    if (!d || *d > 1'000'000) return std::nullopt;
    days = *d;
    has_days = true;
    s = s.substr(dash + 1);
  }
  std::vector<int64_t> parts;
  size_t pos = 0;
  for (;;) {
    const size_t colon = std::min(s.find(':', pos), s.size());
    auto v = Digits(s.substr(pos, colon - pos));
    if (!v || parts.size() == 3) return std::nullopt;
    parts.push_back(*v);
    if (colon == s.size()) break;
    pos = colon + 1;
  }
  int64_t h = 0, m = 0, sec = 0;
  if (has_days) {
    // D-HH, D-HH:MM, D-HH:MM:SS
    h = parts[0];
    if (parts.size() > 1) m = parts[1];
    if (parts.size() > 2) sec = parts[2];
  } else if (parts.size() == 2) {  // MM:SS
    m = parts[0];
    sec = parts[1];
  } else if (parts.size() == 3) {  // HH:MM:SS
    h = parts[0];
    m = parts[1];
    sec = parts[2];
  } else {
    return std::nullopt;  // a lone number was handled above
  }
  if (h > 1'000'000 || m > 1'000'000 || sec > 1'000'000) return std::nullopt;
  return days * 86'400 + h * 3600 + m * 60 + sec;
}

std::optional<int64_t> IsoTime(std::string_view s) {
  if (!s.empty() && (s.back() == 'Z' || s.back() == 'z')) s.remove_suffix(1);
  if (s.size() != 10 && s.size() != 19) return std::nullopt;
  if (s[4] != '-' || s[7] != '-') return std::nullopt;
  auto y = Fixed(s.substr(0, 4), 4), mo = Fixed(s.substr(5, 2), 2), d = Fixed(s.substr(8, 2), 2);
  if (!y || !mo || !d || *mo < 1 || *mo > 12 || *d < 1 || *d > DaysInMonth(*y, *mo)) {
    return std::nullopt;
  }
  int64_t secs = DaysFromCivil(*y, *mo, *d) * 86'400;
  if (s.size() == 19) {
    if ((s[10] != 'T' && s[10] != ' ') || s[13] != ':' || s[16] != ':') return std::nullopt;
    auto h = Fixed(s.substr(11, 2), 2), mi = Fixed(s.substr(14, 2), 2),
         se = Fixed(s.substr(17, 2), 2);
    if (!h || !mi || !se || *h > 23 || *mi > 59 || *se > 60) return std::nullopt;
    secs += *h * 3600 + *mi * 60 + *se;
  }
  return secs;
}

std::string Shown(std::string_view s) {
  constexpr size_t kMax = 32;
  std::string out(s.substr(0, kMax));
  if (s.size() > kMax) out += "...";
  return out;
}

std::string TimeOutOfRange(std::string_view what, int64_t s) {
  return std::string(what) + " " + std::to_string(s) + " s is not within 0 and 100 years (" +
         std::to_string(kMaxTraceSeconds) + " s)";
}

std::string CountOutOfRange(std::string_view what, int64_t n, uint64_t max) {
  return std::string(what) + " " + std::to_string(n) + " is more than " + std::to_string(max);
}

std::optional<size_t> Header::Find(const std::string& name) const {
  auto it = index.find(name);
  if (it == index.end()) return std::nullopt;
  return it->second;
}

Result<Header> ReadHeader(std::string_view line, char sep, const std::string& what) {
  Header h;
  std::vector<std::string_view> fields;
  SplitFields(line, sep, fields);
  h.columns = fields.size();
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string name = ToLower(fields[i]);
    h.names.push_back(name);
    if (name.empty()) continue;  // pandas' unnamed index column, for one
    if (!h.index.emplace(name, i).second) {
      return InvalidArgument(what + ": the header names column '" + name + "' twice");
    }
  }
  return h;
}

void Skips::Add(uint64_t line, const std::string& reason, std::string detail) {
  ++total_;
  if (listed_.size() < kMaxListed) {
    listed_.push_back("line " + std::to_string(line) + ": " + reason +
                      (detail.empty() ? "" : " (" + detail + ")"));
  }
  for (auto& [r, n] : counts_) {
    if (r == reason) {
      ++n;
      return;
    }
  }
  counts_.emplace_back(reason, 1);
}

uint64_t Skips::count(const std::string& reason) const {
  for (const auto& [r, n] : counts_) {
    if (r == reason) return n;
  }
  return 0;
}

void Skips::AppendNotes(std::vector<std::string>& notes) const {
  for (const std::string& l : listed_) notes.push_back(l);
  if (total_ > listed_.size()) {
    notes.push_back(std::to_string(total_ - listed_.size()) + " more lines skipped");
  }
  for (const auto& [r, n] : counts_) {
    notes.push_back(std::to_string(n) + (n == 1 ? " line: " : " lines: ") + r);
  }
}

std::string Skips::First() const { return listed_.empty() ? "" : listed_.front(); }

void SortAndRebase(Trace& t) {
  if (t.jobs.empty()) return;
  int64_t earliest = t.jobs.front().submit_s;
  for (const SimJob& j : t.jobs) earliest = std::min(earliest, j.submit_s);
  for (SimJob& j : t.jobs) j.submit_s -= earliest;
  std::stable_sort(t.jobs.begin(), t.jobs.end(),
                   [](const SimJob& a, const SimJob& b) { return a.submit_s < b.submit_s; });
}

}  // namespace muster::sim::table
