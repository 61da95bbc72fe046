#include "muster/logging/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace muster {

Status InitLogging(const std::string& program, const std::string& level, const std::string& file) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return InvalidArgument("unknown log level '" + level +
                           "': use trace, debug, info, warn, error");
  }
  std::shared_ptr<spdlog::logger> logger;
  try {
    if (file.empty()) {
      logger = spdlog::stderr_logger_mt(program);
    } else {
      logger = spdlog::basic_logger_mt(program, file);
    }
  } catch (const spdlog::spdlog_ex& e) {
    return Internal(std::string("cannot set up logging: ") + e.what());
  }
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %n: %v");
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return Status::Ok();
}

}  // namespace muster
