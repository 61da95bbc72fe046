#include "muster/common/duration.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>

#include "muster/common/strings.h"

namespace muster {
namespace {

constexpr int64_t kSec = 1000, kMin = 60 * kSec, kHour = 60 * kMin, kDay = 24 * kHour;
// Bounds that keep every product below int64's range: a limit of 100,000 days is unlimited
// in all but name, and a node of 2^40 MiB (1 EiB) is beyond any machine.
constexpr uint64_t kMaxDays = 100'000;
constexpr uint64_t kMaxMemoryMb = uint64_t{1} << 40;

Status BadTime(std::string_view text) {
  return InvalidArgument("invalid time '" + std::string(text) +
                         "': use M, M:S, H:M:S, D-H, D-H:M or D-H:M:S");
}

}  // namespace

Result<int64_t> ParseTimeLimit(std::string_view text) {
  std::string t = ToLower(Trim(text));
  if (t == "unlimited" || t == "infinite" || t == "-1") return int64_t{0};
  if (t.empty()) return BadTime(text);
  int64_t days = 0;
  std::string rest = t;
  size_t dash = t.find('-');
  bool has_days = dash != std::string::npos;
  if (has_days) {
    auto d = ParseUint(t.substr(0, dash));
    if (!d || *d > kMaxDays) return BadTime(text);
    days = static_cast<int64_t>(*d);
    rest = t.substr(dash + 1);
  }
  std::vector<std::string> f = Split(rest, ':');
  std::vector<int64_t> v;
  for (const auto& s : f) {
    auto n = ParseUint(s);
    if (!n || *n > 10'000'000) return BadTime(text);
    v.push_back(static_cast<int64_t>(*n));
  }
  int64_t ms = 0;
  if (has_days) {
    // D-H, D-H:M, D-H:M:S
    if (v.empty() || v.size() > 3) return BadTime(text);
    ms = days * kDay + v[0] * kHour;
    if (v.size() > 1) ms += v[1] * kMin;
    if (v.size() > 2) ms += v[2] * kSec;
  } else {
    switch (v.size()) {
      case 1:
        ms = v[0] * kMin;
        break;  // M
      case 2:
        ms = v[0] * kMin + v[1] * kSec;
        break;  // M:S
      case 3:
        ms = v[0] * kHour + v[1] * kMin + v[2] * kSec;
        break;  // H:M:S
      default:
        return BadTime(text);
    }
  }
  if (ms == 0) return InvalidArgument("time limit '" + std::string(text) + "' is zero");
  return ms;
}

std::string FormatDuration(int64_t ms) {
  // squeue prints this for every job: digits by hand, no printf.
  if (ms < 0) ms = 0;
  const int64_t s = ms / 1000;
  const int64_t d = s / 86400, h = (s / 3600) % 24, m = (s / 60) % 60, sec = s % 60;
  char buf[48];
  char* p = buf;
  auto two = [&p](int64_t v) {
    *p++ = static_cast<char>('0' + v / 10);
    *p++ = static_cast<char>('0' + v % 10);
  };
  if (d > 0) {
    p = std::to_chars(p, buf + 24, d).ptr;
    *p++ = '-';
    two(h);
    *p++ = ':';
    two(m);
  } else if (h > 0) {
    p = std::to_chars(p, buf + 24, h).ptr;
    *p++ = ':';
    two(m);
  } else {
    p = std::to_chars(p, buf + 24, m).ptr;
  }
  *p++ = ':';
  two(sec);
  return std::string(buf, p);
}

Result<uint64_t> ParseMemoryMb(std::string_view text) {
  std::string t(Trim(text));
  if (t.empty()) return InvalidArgument("empty memory size");
  char unit = 'M';
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(t.back())));
  if (last == 'K' || last == 'M' || last == 'G' || last == 'T') {
    unit = last;
    t.pop_back();
    if (!t.empty() && (t.back() == 'i' || t.back() == 'I')) t.pop_back();  // tolerate "Gi"
  } else if (last == 'B' && t.size() >= 2) {
    char u = static_cast<char>(std::toupper(static_cast<unsigned char>(t[t.size() - 2])));
    if (u == 'K' || u == 'M' || u == 'G' || u == 'T') {
      unit = u;
      t.resize(t.size() - 2);
    }
  }
  auto n = ParseUint(t);
  if (!n) {
    return InvalidArgument("invalid memory size '" + std::string(text) +
                           "': use a number of MiB or a suffix K, M, G, T");
  }
  const uint64_t v = *n;
  const uint64_t mb_per_unit = unit == 'G' ? 1024 : unit == 'T' ? 1024 * 1024 : 1;
  const uint64_t mb = unit == 'K' ? (v + 1023) / 1024 : v;
  if (mb > kMaxMemoryMb / mb_per_unit) {
    return InvalidArgument("memory size '" + std::string(text) + "' is too large (at most " +
                           std::to_string(kMaxMemoryMb >> 20) + "T)");
  }
  return mb * mb_per_unit;
}

Result<int64_t> ParseDurationMs(std::string_view text) {
  std::string t(Trim(text));
  size_t i = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  auto n = ParseUint(t.substr(0, i));
  std::string unit = t.substr(i);
  if (!n) return InvalidArgument("invalid duration '" + t + "': use e.g. 500ms, 30s, 5m, 2h, 1d");
  int64_t ms_per_unit = 0;
  if (unit == "ms") ms_per_unit = 1;
  if (unit == "s" || unit.empty()) ms_per_unit = kSec;
  if (unit == "m") ms_per_unit = kMin;
  if (unit == "h") ms_per_unit = kHour;
  if (unit == "d") ms_per_unit = kDay;
  if (ms_per_unit == 0) {
    return InvalidArgument("invalid duration unit in '" + t + "': use ms, s, m, h or d");
  }
  if (*n > kMaxDays * static_cast<uint64_t>(kDay / ms_per_unit)) {
    return InvalidArgument("duration '" + t + "' is too long");
  }
  return static_cast<int64_t>(*n) * ms_per_unit;
}

std::string FormatTimestamp(int64_t unix_ms) {
  if (unix_ms <= 0) return "N/A";
  time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm tm;
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

Result<int64_t> ParseWhen(const std::string& v, int64_t now) {
  if (v.size() > 64) return InvalidArgument("bad time: longer than 64 characters");
  auto local = [](struct tm tm) {
    tm.tm_isdst = -1;
    return static_cast<int64_t>(std::mktime(&tm)) * 1000;
  };
  const time_t now_s = static_cast<time_t>(now / 1000);
  struct tm today;
  localtime_r(&now_s, &today);
  today.tm_hour = today.tm_min = today.tm_sec = 0;
  if (v == "today" || v == "midnight") return local(today);
  if (v == "noon" || v == "teatime" || v == "tomorrow") {
    struct tm tm = today;
    if (v == "tomorrow") tm.tm_mday += 1;
    tm.tm_hour = v == "noon" ? 12 : v == "teatime" ? 16 : 0;
    int64_t t = local(tm);
    if (t < now && v != "tomorrow") {  // the next one
      tm.tm_mday += 1;
      t = local(tm);
    }
    return t;
  }
  if (StartsWith(v, "now")) {
    if (v == "now") return now;
    const char sign = v[3];
    std::string rest = v.substr(4);
    size_t digits = 0;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
    auto n = ParseUint(rest.substr(0, digits));
    std::string unit = rest.substr(digits);
    int64_t mult = 1000;
    if (unit.empty() || StartsWith(unit, "s")) {
      mult = 1000;
    } else if (StartsWith(unit, "min")) {
      mult = 60'000;
    } else if (StartsWith(unit, "h")) {
      mult = 3'600'000;
    } else if (StartsWith(unit, "d")) {
      mult = 86'400'000;
    } else if (StartsWith(unit, "w")) {
      mult = 7LL * 86'400'000;
    } else {
      n.reset();
    }
    if ((sign != '-' && sign != '+') || !n) return InvalidArgument("bad time '" + v + "'");
    return now + (sign == '-' ? -1 : 1) * static_cast<int64_t>(*n) * mult;
  }
  struct tm tm = today;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char tail = 0;
  if (std::sscanf(v.c_str(), "%d-%d-%dT%d:%d:%d%c", &y, &mo, &d, &h, &mi, &s, &tail) >= 3 &&
      tail == 0 && y > 1900) {
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    return local(tm);
  }
  // HH:MM[:SS]: today, or tomorrow when that time has passed.
  h = mi = s = 0;
  tail = 0;
  if (v.find(':') != std::string::npos && v.find('-') == std::string::npos &&
      std::sscanf(v.c_str(), "%d:%d:%d%c", &h, &mi, &s, &tail) >= 2 && tail == 0 && h >= 0 &&
      h < 24 && mi >= 0 && mi < 60 && s >= 0 && s < 61) {
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    int64_t t = local(tm);
    if (t < now) {
      tm.tm_mday += 1;
      t = local(tm);
    }
    return t;
  }
  y = -1;
  if (std::sscanf(v.c_str(), "%d/%d/%d%c", &mo, &d, &y, &tail) >= 2 && tail == 0) {
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    if (y >= 0) tm.tm_year = y < 100 ? y + 100 : y - 1900;
    return local(tm);
  }
  return InvalidArgument(
      "bad time '" + v +
      "' (expected YYYY-MM-DD[THH:MM[:SS]], HH:MM[:SS], MM/DD[/YY], "
      "now[+-N{seconds,minutes,hours,days,weeks}], midnight, noon, teatime or tomorrow)");
}

}  // namespace muster
