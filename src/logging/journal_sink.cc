#include "journal_sink.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "muster/common/strings.h"
#include "muster/logging/logging.h"

namespace muster {
namespace {

// syslog(3)'s priorities, as the journal's PRIORITY takes them.
int PriorityOf(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;
    case spdlog::level::info:
      return 6;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::err:
      return 3;
    default:
      return 2;
  }
}

// One field of the native protocol: NAME=value on a line, or, for a value with a newline,
// NAME, a newline, its length as 64-bit little endian, the value and a newline.
void AppendField(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  if (value.find('\n') == std::string_view::npos) {
    out += '=';
    out.append(value);
  } else {
    out += '\n';
    uint64_t n = value.size();
    for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
    out.append(value);
  }
  out += '\n';
}

}  // namespace

JournalSink::JournalSink(std::string socket_path, std::string program)
    : path_(std::move(socket_path)), program_(std::move(program)) {
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

JournalSink::~JournalSink() {
  if (fd_ >= 0) ::close(fd_);
}

bool JournalSink::StderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (!stream) return false;
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  return dev == static_cast<unsigned long long>(st.st_dev) &&
         ino == static_cast<unsigned long long>(st.st_ino);
}

void JournalSink::sink_it_(const spdlog::details::log_msg& msg) {
  // A datagram the journal takes whole: the message is cut well below its limits.
  constexpr size_t kMaxMessage = 48 * 1024;
  const std::string_view payload(msg.payload.data(), std::min(msg.payload.size(), kMaxMessage));
  // Printable, as the text and JSON formats make it: what a user put in a job name can neither
  // hide the record from journalctl (a control byte makes it a blob) nor start a line of its own.
  std::string message;
  AppendPrintable(message, payload);
  std::string d;
  AppendField(d, "MESSAGE", message);
  AppendField(d, "PRIORITY", std::to_string(PriorityOf(msg.level)));
  AppendField(d, "SYSLOG_IDENTIFIER", program_);
  AppendField(d, "SYSLOG_PID", std::to_string(::getpid()));
  for (const auto& [key, value] : LogFields(payload)) {
    std::string name = "MUSTER_";
    for (char c : key) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    AppendField(d, name, value);
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd_ >= 0 && path_.size() < sizeof(addr.sun_path)) {
    std::memcpy(addr.sun_path, path_.data(), path_.size());
    if (::sendto(fd_, d.data(), d.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
                 sizeof(addr)) == static_cast<ssize_t>(d.size())) {
      return;
    }
  }
  // The journal did not take it: stderr, which systemd also sends there.
  std::string line = "<" + std::to_string(PriorityOf(msg.level)) + ">";
  AppendPrintable(line, payload);
  line += '\n';
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace muster
