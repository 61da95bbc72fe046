#include "json_formatter.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string_view>

#include "muster/common/strings.h"
#include "muster/logging/logging.h"

namespace muster {
namespace {

// A JSON string of `s`: printable first (no control characters, invalid UTF-8 as \xNN), then
// the two characters JSON escapes among what is left.
void AppendJsonString(std::string& out, std::string_view s) {
  std::string text;
  AppendPrintable(text, s);
  out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

const char* LevelName(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "off";
  }
}

}  // namespace

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  using namespace std::chrono;
  const auto since = msg.time.time_since_epoch();
  const std::time_t secs = duration_cast<seconds>(since).count();
  const int ms = static_cast<int>(duration_cast<milliseconds>(since).count() % 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char when[64];
  std::snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  const std::string_view payload(msg.payload.data(), msg.payload.size());
  std::string out = "{\"time\":\"";
  out += when;
  out += "\",\"level\":\"";
  out += LevelName(msg.level);
  out += "\",\"program\":";
  AppendJsonString(out, program_);
  out += ",\"msg\":";
  AppendJsonString(out, payload);
  for (const auto& [key, value] : LogFields(payload)) {
    // Keys the record has already are not repeated.
    if (key == "time" || key == "level" || key == "program" || key == "msg") continue;
    out += ',';
    AppendJsonString(out, key);
    out += ':';
    AppendJsonString(out, value);
  }
  out += "}\n";
  dest.append(out.data(), out.data() + out.size());
}

}  // namespace muster
