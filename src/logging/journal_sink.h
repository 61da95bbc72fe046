// Log records to systemd's journal through its native datagram socket (systemd.journal-fields(7)):
// MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, SYSLOG_PID, and each key=value field of the message as
// MUSTER_<KEY> (`journalctl MUSTER_JOB=42`). No libsystemd needed. A record the journal does not
// take (it is gone, the socket is full) goes to stderr as a text line instead. Thread-safe, as
// spdlog's sinks are (base_sink's mutex).
#pragma once

#include <spdlog/sinks/base_sink.h>

#include <mutex>
#include <string>

namespace muster {

class JournalSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  JournalSink(std::string socket_path, std::string program);
  ~JournalSink() override;

  // Whether systemd's journal holds this process's stderr: JOURNAL_STREAM (systemd.exec(5))
  // names its device and inode.
  static bool StderrIsJournal();

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}

 private:
  std::string path_;
  std::string program_;
  int fd_ = -1;
};

}  // namespace muster
