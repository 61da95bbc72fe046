#include "muster/common/procfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>

namespace muster {
namespace {

// A small /proc file in one read (they are generated whole).
std::string ReadSmall(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// The stat line after "(command) ": the command may hold spaces and parentheses, so the fields
// start after the last ')'.
std::optional<ProcStat> ParseStat(pid_t pid, const std::string& line) {
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  const char* p = line.c_str() + close + 2;
  ProcStat s;
  s.pid = pid;
  s.state = *p;
  int field = 3;  // the state
  char* end = nullptr;
  for (; *p && field < 22; ++p) {
    if (*p != ' ') continue;
    ++field;
    if (field == 4) s.ppid = static_cast<pid_t>(std::strtol(p + 1, &end, 10));
    if (field == 5) s.pgrp = static_cast<pid_t>(std::strtol(p + 1, &end, 10));
  }
  if (field < 22 || !*p) return std::nullopt;
  s.start_time = std::strtoull(p, nullptr, 10);
  return s;
}

}  // namespace

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  return ParseStat(pid, ReadSmall("/proc/" + std::to_string(pid) + "/stat"));
}

std::vector<ProcStat> ListProcesses() {
  std::vector<ProcStat> out;
  DIR* dir = ::opendir("/proc");
  if (!dir) return out;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const pid_t pid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    if (auto s = ReadProcStat(pid)) out.push_back(*s);
  }
  ::closedir(dir);
  return out;
}

bool GroupHasLiveProcess(pid_t pgid) {
  for (const ProcStat& p : ListProcesses()) {
    if (p.pgrp == pgid && !p.zombie()) return true;
  }
  return false;
}

std::vector<pid_t> DescendantsOf(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  for (const ProcStat& p : ListProcesses()) children.emplace(p.ppid, p.pid);
  std::vector<pid_t> out, todo{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

bool ProcessAlive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  auto s = ReadProcStat(pid);
  return s && !s->zombie();
}

std::string ProcessProgram(pid_t pid) {
  std::string cmdline = ReadSmall("/proc/" + std::to_string(pid) + "/cmdline");
  return cmdline.substr(0, cmdline.find('\0'));
}

std::string Cgroup2Mount() {
  // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ... - cgroup2 SOURCE SUPER_OPTIONS"
  const std::string text = ReadSmall("/proc/self/mountinfo");
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    const size_t dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    size_t field = 0, pos = 0;
    while (field < 4 && pos != std::string::npos) {  // skip ID, PARENT, MAJ:MIN, ROOT
      pos = line.find(' ', pos);
      if (pos != std::string::npos) ++pos;
      ++field;
    }
    if (pos == std::string::npos) continue;
    return line.substr(pos, line.find(' ', pos) - pos);
  }
  return "";
}

std::string OwnCgroup2() {
  const std::string text = ReadSmall("/proc/self/cgroup");
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, 3, "0::") == 0) return text.substr(at + 3, end - at - 3);
    at = end + 1;
  }
  return "";
}

}  // namespace muster
