#include "muster/logging/logging.h"

#include <fcntl.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "journal_sink.h"
#include "json_formatter.h"
#include "muster/common/own_files.h"
#include "muster/common/strings.h"

namespace muster {
namespace {

// The message with what another user chose in it (a job name, a node name from an unproven
// registration) made printable: one record stays one line, and a terminal that shows the log
// obeys nothing in it.
class PrintablePayload final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    text_.clear();
    AppendPrintable(text_, payload);
    dest.append(text_.data(), text_.data() + text_.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PrintablePayload>();
  }

 private:
  std::string text_;
};

// A log file the daemon (often root) appends to: never through a link, never one another user
// owns or can change, and readable by its owner and group only (jobs' names, users and paths
// are in it). Made 0640 when missing; an existing one is tightened to 0640 if others may read it.
Status PrepareLogFile(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  struct stat st {};
  if (!dir.empty() && ::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) &&
      !(st.st_mode & S_ISVTX)) {
    return FailedPrecondition("log_file " + path + ": its directory can be written by anyone");
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
  if (fd < 0) {
    return FailedPrecondition("cannot open log_file " + path + ": " + std::strerror(errno) +
                              (errno == ELOOP ? " (a link: refused)" : ""));
  }
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (st.st_uid != ::geteuid()) {
    problem = "belongs to uid " + std::to_string(st.st_uid) + ", not to uid " +
              std::to_string(::geteuid()) + " that runs this";
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    problem = "can be changed by other users (mode " + OctalMode(st.st_mode) + ")";
  } else if ((st.st_mode & S_IRWXO) && ::fchmod(fd, 0640) != 0) {
    problem = std::string("others may read it and it cannot be made 0640: ") + std::strerror(errno);
  }
  ::close(fd);
  if (!problem.empty()) return FailedPrecondition("refusing log_file " + path + ": " + problem);
  return Status::Ok();
}

}  // namespace

Status InitLogging(const LogOptions& o) {
  auto lvl = spdlog::level::from_str(o.level);
  if (lvl == spdlog::level::off && o.level != "off") {
    return InvalidArgument("unknown log level '" + o.level +
                           "': use trace, debug, info, warn, error");
  }
  if (o.format != "text" && o.format != "json") {
    return InvalidArgument("unknown log format '" + o.format + "': use text or json");
  }
  if (!o.file.empty()) MUSTER_RETURN_IF_ERROR(PrepareLogFile(o.file));
  const bool journal = o.file.empty() && o.format == "text" && JournalSink::StderrIsJournal();
  std::shared_ptr<spdlog::logger> logger;
  try {
    spdlog::drop(o.program);
    if (journal) {
      logger = std::make_shared<spdlog::logger>(
          o.program, std::make_shared<JournalSink>(o.journal_socket, o.program));
      spdlog::register_logger(logger);
    } else if (o.file.empty()) {
      logger = spdlog::stderr_logger_mt(o.program);
    } else {
      logger = spdlog::basic_logger_mt(o.program, o.file);
    }
  } catch (const spdlog::spdlog_ex& e) {
    return Internal(std::string("cannot set up logging: ") + e.what());
  }
  if (o.format == "json") {
    logger->set_formatter(std::make_unique<JsonLogFormatter>(o.program));
  } else if (!journal) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<PrintablePayload>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %n: %*");
    logger->set_formatter(std::move(formatter));
  }
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return Status::Ok();
}

Status InitLogging(const std::string& program, const std::string& level, const std::string& file) {
  LogOptions o;
  o.program = program;
  o.level = level;
  o.file = file;
  return InitLogging(o);
}

void WarnReloadNotSupported() {
  spdlog::warn(
      "SIGHUP: reloading the configuration is not supported yet; still running with the one it "
      "started with (restart the daemon to apply a changed muster.toml)");
}

}  // namespace muster
