#include "sacct_time.h"

#include <ctime>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "muster/common/duration.h"
#include "muster/common/strings.h"

namespace muster::cli {
namespace {

// `s` as a number of `digits` digits (1 or 2 when digits is 0) within [lo, hi].
bool Number(std::string_view s, size_t digits, int lo, int hi, int* out) {
  if (s.empty() || (digits ? s.size() != digits : s.size() > 2)) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return v >= lo && v <= hi;
}

// HH:MM[:SS][AM|PM], the whole of `s`.
bool TimeOfDay(std::string_view s, struct tm* tm) {
  int half = -1;  // 0: AM, 1: PM
  if (s.size() > 2) {
    const std::string tail = ToLower(s.substr(s.size() - 2));
    if (tail == "am" || tail == "pm") {
      half = tail == "pm";
      s.remove_suffix(2);
    }
  }
  const std::vector<std::string> p = Split(s, ':');
  int h = 0, m = 0, sec = 0;
  if (p.size() < 2 || p.size() > 3 || !Number(p[0], 0, 0, 23, &h) || !Number(p[1], 2, 0, 59, &m) ||
      (p.size() == 3 && !Number(p[2], 2, 0, 60, &sec))) {
    return false;
  }
  if (half >= 0) {
    if (h < 1 || h > 12) return false;
    h = h % 12 + 12 * half;
  }
  tm->tm_hour = h;
  tm->tm_min = m;
  tm->tm_sec = sec;
  return true;
}

// MMDD[YY], MM.DD[.YY], MM/DD[/YY] (YY: 2 or 4 digits), the whole of `s`.
bool MonthDay(std::string_view s, struct tm* tm) {
  std::vector<std::string> p;
  if (s.find_first_of("./") != std::string_view::npos) {
    const char sep = s.find('.') != std::string_view::npos ? '.' : '/';
    p = Split(s, sep);
    if (p.size() < 2 || p.size() > 3) return false;
  } else if (s.size() == 4 || s.size() == 6) {
    p = {std::string(s.substr(0, 2)), std::string(s.substr(2, 2))};
    if (s.size() == 6) p.emplace_back(s.substr(4));
  } else {
    return false;
  }
  int mon = 0, day = 0, year = 0;
  if (!Number(p[0], 0, 1, 12, &mon) || !Number(p[1], 0, 1, 31, &day)) return false;
  if (p.size() == 3) {
    if (!Number(p[2], 2, 0, 99, &year) && !Number(p[2], 4, 1970, 9999, &year)) return false;
    tm->tm_year = (year < 100 ? year + 2000 : year) - 1900;
  }
  tm->tm_mon = mon - 1;
  tm->tm_mday = day;
  return true;
}

}  // namespace

Result<int64_t> ParseAcctTime(const std::string& v, int64_t now) {
  const time_t now_s = static_cast<time_t>(now / 1000);
  struct tm tm;
  localtime_r(&now_s, &tm);
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  auto at = [](struct tm t) {
    t.tm_isdst = -1;
    return static_cast<int64_t>(std::mktime(&t)) * 1000;
  };
  const std::string word = ToLower(v);
  for (const auto& [name, hour] : std::initializer_list<std::pair<const char*, int>>{
           {"today", 0}, {"midnight", 0}, {"noon", 12}, {"fika", 15}, {"teatime", 16}}) {
    if (word == name) {
      tm.tm_hour = hour;
      return at(tm);
    }
  }
  if (StartsWith(word, "now")) return ParseWhen(word, now);
  bool ok = false;
  struct tm date = tm;
  int y = 0, mon = 0, d = 0;
  if (v.size() >= 10 && v[4] == '-' && v[7] == '-' &&
      Number(std::string_view(v).substr(0, 4), 4, 1970, 9999, &y) &&
      Number(std::string_view(v).substr(5, 2), 2, 1, 12, &mon) &&
      Number(std::string_view(v).substr(8, 2), 2, 1, 31, &d)) {
    // YYYY-MM-DD, then THH:MM[:SS] (or -HH:MM[:SS], as sacct also takes it)
    date.tm_year = y - 1900;
    date.tm_mon = mon - 1;
    date.tm_mday = d;
    ok = v.size() == 10 ||
         ((v[10] == 'T' || v[10] == '-') && TimeOfDay(std::string_view(v).substr(11), &date));
  } else if (TimeOfDay(v, &date)) {
    ok = true;
  } else {
    const size_t dash = v.find('-');
    ok = MonthDay(std::string_view(v).substr(0, dash), &date) &&
         (dash == std::string::npos || TimeOfDay(std::string_view(v).substr(dash + 1), &date));
  }
  if (!ok) {
    return InvalidArgument("bad time '" + v +
                           "' (expected HH:MM[:SS][AM|PM], MMDD[YY][-HH:MM[:SS]], "
                           "MM.DD[.YY][-HH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]], "
                           "YYYY-MM-DD[THH:MM[:SS]], today, midnight, noon, fika, teatime or "
                           "now[{+|-}N[seconds|minutes|hours|days|weeks]])");
  }
  return at(date);
}

}  // namespace muster::cli
