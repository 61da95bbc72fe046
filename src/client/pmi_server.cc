#include "muster/client/pmi_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "muster/common/strings.h"

namespace muster::client {
namespace {

// "cmd=put kvsname=k key=a value=b c" -> {cmd: put, kvsname: k, key: a, value: "b c"}. A value
// is the rest of its line, so it may hold spaces (MPI business cards do not, but be lenient).
std::map<std::string, std::string> ParseLine(const std::string& line) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t eq = line.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = line.substr(i, eq - i);
    size_t end = key == "value" ? line.size() : line.find(' ', eq + 1);
    if (end == std::string::npos) end = line.size();
    out[key] = line.substr(eq + 1, end - eq - 1);
    i = end;
  }
  return out;
}

}  // namespace

PmiServer::PmiServer(uint32_t size, std::string kvs, const std::vector<uint32_t>& tasks_per_node,
                     uint32_t id_base)
    : size_(size), kvs_(std::move(kvs)), id_base_(id_base & 0x7fffffff), claimed_(size, false) {
  kv_["PMI_process_mapping"] = ProcessMapping(tasks_per_node);
}

uint32_t PmiServer::RandomIdBase() {
  uint32_t v = 0;
  while (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
  }
  return v & 0x7fffffff;
}

void PmiServer::Stranger(int fd) {
  Close(fd);
  if (++strangers_ >= kMaxStrangers && listener_ >= 0) {
    // Someone is guessing: the tasks that have not connected yet will fail, the step with them.
    ::close(listener_);
    listener_ = -1;
  }
}

PmiServer::~PmiServer() {
  for (auto& [fd, c] : conns_) ::close(fd);
  if (listener_ >= 0) ::close(listener_);
}

std::string PmiServer::ProcessMapping(const std::vector<uint32_t>& tasks_per_node) {
  std::string out = "(vector";
  for (size_t i = 0; i < tasks_per_node.size();) {
    size_t j = i;
    while (j < tasks_per_node.size() && tasks_per_node[j] == tasks_per_node[i]) ++j;
    out += ",(" + std::to_string(i) + "," + std::to_string(j - i) + "," +
           std::to_string(tasks_per_node[i]) + ")";
    i = j;
  }
  return out + ")";
}

Result<std::string> PmiServer::Listen(const std::string& host) {
  const bool v6 = host.find(':') != std::string::npos;
  listener_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0) return ErrnoStatus("socket", errno);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    if (::inet_pton(AF_INET6, host.c_str(), &a->sin6_addr) != 1) {
      return InvalidArgument("PMI: bad address " + host);
    }
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    if (::inet_pton(AF_INET, host.c_str(), &a->sin_addr) != 1) {
      return InvalidArgument("PMI: bad address " + host);
    }
    len = sizeof *a;
  }
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::listen(listener_, 1024) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return ErrnoStatus("PMI listen on " + host, errno);
  }
  uint16_t port = v6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                     : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::vector<int> PmiServer::Fds() const {
  std::vector<int> fds;
  if (listener_ >= 0) fds.push_back(listener_);
  for (const auto& [fd, c] : conns_) fds.push_back(fd);
  return fds;
}

void PmiServer::Handle(int fd) {
  if (fd == listener_) {
    int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    // At most one connection per rank, and a few unproven ones at a time.
    size_t unproven = 0;
    for (const auto& [other, conn] : conns_) unproven += conn.rank < 0;
    if (unproven >= static_cast<size_t>(kMaxStrangers)) {
      ::close(c);
      return;
    }
    conns_[c] = Conn();
    return;
  }
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n <= 0) {
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    Close(fd);
    return;
  }
  it->second.in.append(buf, static_cast<size_t>(n));
  // A PMI line is a command with a key and a value of at most vallen_max: anything much longer
  // is not PMI, and must not grow without bound.
  if (it->second.in.size() > 64 * 1024 && it->second.in.find('\n') == std::string::npos) {
    Close(fd);
    return;
  }
  if (it->second.rank < 0 && it->second.in.size() > 256 &&
      it->second.in.find('\n') == std::string::npos) {
    return Stranger(fd);  // an initack line is short
  }
  size_t nl;
  while (conns_.count(fd) && (nl = conns_[fd].in.find('\n')) != std::string::npos) {
    std::string line = conns_[fd].in.substr(0, nl);
    conns_[fd].in.erase(0, nl + 1);
    Command(fd, conns_[fd], line);
  }
}

void PmiServer::Command(int fd, Conn& c, const std::string& line) {
  auto f = ParseLine(line);
  const std::string cmd = f.count("cmd") ? f["cmd"] : "";
  if (c.rank < 0) {
    // PMI_PORT mode: the task names itself first, with the PMI_ID only the step's tasks have.
    auto id = cmd == "initack" ? ParseUint(f["pmiid"]) : std::nullopt;
    const uint32_t rank =
        id && *id <= 0x7fffffff ? (static_cast<uint32_t>(*id) - id_base_) & 0x7fffffff : size_;
    if (rank >= size_ || claimed_[rank]) return Stranger(fd);
    claimed_[rank] = true;
    c.rank = static_cast<int>(rank);
    Reply(fd, "cmd=initack");
    Reply(fd, "cmd=set size=" + std::to_string(size_));
    Reply(fd, "cmd=set rank=" + std::to_string(c.rank));
    Reply(fd, "cmd=set debug=0");
  } else if (cmd == "init") {
    Reply(fd, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
  } else if (cmd == "get_maxes") {
    Reply(fd, "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024");
  } else if (cmd == "get_appnum") {
    Reply(fd, "cmd=appnum appnum=0");
  } else if (cmd == "get_my_kvsname") {
    Reply(fd, "cmd=my_kvsname kvsname=" + kvs_);
  } else if (cmd == "get_universe_size") {
    Reply(fd, "cmd=universe_size size=" + std::to_string(size_));
  } else if (cmd == "put") {
    kv_[f["key"]] = f["value"];
    Reply(fd, "cmd=put_result rc=0 msg=success");
  } else if (cmd == "get") {
    auto it = kv_.find(f["key"]);
    if (it == kv_.end()) {
      Reply(fd, "cmd=get_result rc=-1 msg=key_" + f["key"] + "_not_found value=unknown");
    } else {
      Reply(fd, "cmd=get_result rc=0 msg=success value=" + it->second);
    }
  } else if (cmd == "barrier_in") {
    if (!c.in_barrier) {
      c.in_barrier = true;
      ++in_barrier_;
    }
    if (in_barrier_ >= size_) {
      for (auto& [other_fd, other] : conns_) {
        if (!other.in_barrier) continue;
        other.in_barrier = false;
        Reply(other_fd, "cmd=barrier_out");
      }
      in_barrier_ = 0;
    }
  } else if (cmd == "finalize") {
    Reply(fd, "cmd=finalize_ack");
  } else if (cmd == "abort") {
    aborted_ = true;
    abort_message_ = "rank " + std::to_string(c.rank) + " called MPI_Abort" +
                     (f.count("exitcode") ? " (exit code " + f["exitcode"] + ")" : "");
  } else {
    // spawn, publish_name, ...: not offered; the library reports the failure.
    Reply(fd, "cmd=" + cmd + "_result rc=-1 msg=not_supported_by_muster");
  }
}

void PmiServer::Reply(int fd, const std::string& line) {
  std::string out = line + "\n";
  size_t off = 0;
  while (off < out.size()) {
    ssize_t n = ::write(fd, out.data() + off, out.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the task went away; its connection closes on the next read
    off += static_cast<size_t>(n);
  }
}

void PmiServer::Close(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (it->second.in_barrier) --in_barrier_;
  ::close(fd);
  conns_.erase(it);
}

}  // namespace muster::client
