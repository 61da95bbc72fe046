// The "json" log format: one object a line, {"time":"2026-11-29T10:00:00.123Z","level":"info",
// "program":"musterctld","msg":"...","job":"7","node":"gpu1"}, the message's key=value fields
// (LogFields) as keys after its text. Everything another user chose is made printable first
// (one record stays one line) and escaped as JSON wants. Used under its sink's lock, as spdlog's
// formatters are.
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <string>

namespace muster {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  explicit JsonLogFormatter(std::string program) : program_(std::move(program)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>(program_);
  }

 private:
  std::string program_;
};

}  // namespace muster
