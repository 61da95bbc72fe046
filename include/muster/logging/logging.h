// Logging setup for the daemons. Log lines use key=value fields (job=, node=, user=), which the
// JSON format and the journal lift into fields of their own. No module under src/core logs.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "muster/common/status.h"

namespace muster {

struct LogOptions {
  std::string program;
  std::string level = "info";  // trace, debug, info, warn, error
  std::string file;            // empty: stderr, or the journal (below)
  // "text": `TIME LEVEL program: message`; "json": an object a line, {"time", "level",
  // "program", "msg", and each key=value field of the message}.
  std::string format = "text";
  // Without a file, in text, when systemd's journal holds stderr (JOURNAL_STREAM names it):
  // records go to the journal through its native socket, with PRIORITY and the message's fields
  // as MUSTER_JOB=, MUSTER_NODE=, ... (`journalctl MUSTER_JOB=42`). Tests give their own socket.
  std::string journal_socket = "/run/systemd/journal/socket";
};

Status InitLogging(const LogOptions& options);
Status InitLogging(const std::string& program, const std::string& level, const std::string& file);

// The key=value fields of a log message the JSON format and the journal lift, in order: job (42,
// 42_7), step, node, user, account, partition, uid, epoch, each only with a value of its shape
// (digits, or a name's characters), at most 128 bytes. They are read from the message's head
// only: the first quote that opens a word, or a ": " after a field, ends it, since what a user
// chose is logged quoted or after a colon. A key given twice with two values is dropped.
std::vector<std::pair<std::string, std::string>> LogFields(std::string_view message);

// What a daemon says to a SIGHUP (a reload request) until reloading exists: it keeps running.
void WarnReloadNotSupported();

}  // namespace muster
