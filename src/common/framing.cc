#include "muster/common/framing.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "muster/common/strings.h"

namespace muster {
namespace {

void PutU32(char* p, uint32_t v) {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
}

uint32_t GetU32(const char* p) {
  auto b = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

Status WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOTSOCK) {
        w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
      }
      if (w < 0) {
        if (errno == EPIPE || errno == ECONNRESET) return Unavailable("connection closed by peer");
        return ErrnoStatus("write", errno, StatusCode::kUnavailable);
      }
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status ReadAll(int fd, char* p, size_t n, int timeout_ms, bool* eof_at_start) {
  size_t got = 0;
  while (got < n) {
    if (timeout_ms >= 0) {
      struct pollfd pfd {
        fd, POLLIN, 0
      };
      int r = ::poll(&pfd, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return DeadlineExceeded("no reply within " + std::to_string(timeout_ms) + " ms");
    }
    ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read", errno, StatusCode::kUnavailable);
    }
    if (r == 0) {
      if (eof_at_start) *eof_at_start = got == 0;
      return Unavailable("connection closed by peer");
    }
    got += static_cast<size_t>(r);
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeFrame(uint32_t type, const std::string& payload) {
  std::string out(8 + payload.size(), '\0');
  PutU32(out.data(), static_cast<uint32_t>(4 + payload.size()));
  PutU32(out.data() + 4, type);
  std::memcpy(out.data() + 8, payload.data(), payload.size());
  return out;
}

Status DecodeFrameHeader(const char header[8], uint32_t* payload_len, uint32_t* type) {
  uint32_t len = GetU32(header);
  if (len < 4 || len - 4 > kMaxFramePayload) {
    return InvalidArgument("bad frame length " + std::to_string(len));
  }
  *payload_len = len - 4;
  *type = GetU32(header + 4);
  return Status::Ok();
}

Status FrameAssembler::Append(const char* data, size_t n) {
  while (n > 0) {
    if (partial_.size() < 8) {  // the header, byte by byte as it comes
      const size_t take = std::min(n, 8 - partial_.size());
      partial_.append(data, take);
      data += take;
      n -= take;
      if (partial_.size() < 8) break;
      uint32_t type = 0;
      MUSTER_RETURN_IF_ERROR(DecodeFrameHeader(partial_.data(), &need_, &type));
      if (need_ > max_payload_) {
        return InvalidArgument("frame of " + std::to_string(need_) + " bytes; at most " +
                               std::to_string(max_payload_) + " here");
      }
    }
    const size_t take = std::min(n, size_t{need_} - (partial_.size() - 8));
    partial_.append(data, take);
    data += take;
    n -= take;
    if (partial_.size() - 8 == need_) {
      Frame f;
      f.type = GetU32(partial_.data() + 4);
      f.payload = partial_.substr(8);
      ready_.push_back(std::move(f));
      partial_.clear();
      need_ = 0;
    }
  }
  return Status::Ok();
}

std::string FrameAssembler::TakeBytes() {
  std::string out;
  for (const Frame& f : ready_) out += EncodeFrame(f.type, f.payload);
  out += partial_;
  ready_.clear();
  partial_.clear();
  need_ = 0;
  return out;
}

bool FrameAssembler::Pop(Frame* frame) {
  if (ready_.empty()) return false;
  *frame = std::move(ready_.front());
  ready_.pop_front();
  return true;
}

Status WriteFrame(int fd, uint32_t type, const std::string& payload) {
  std::string f = EncodeFrame(type, payload);
  return WriteAll(fd, f.data(), f.size());
}

Result<Frame> ReadFrame(int fd, int timeout_ms) {
  char header[8];
  MUSTER_RETURN_IF_ERROR(ReadAll(fd, header, 8, timeout_ms, nullptr));
  Frame f;
  uint32_t len = 0;
  MUSTER_RETURN_IF_ERROR(DecodeFrameHeader(header, &len, &f.type));
  f.payload.resize(len);
  MUSTER_RETURN_IF_ERROR(ReadAll(fd, f.payload.data(), len, timeout_ms, nullptr));
  return f;
}

Result<int> ConnectUnix(const std::string& path) {
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return InvalidArgument("socket path is too long (max 107 bytes): " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd);
    return Unavailable("cannot reach the controller at " + path + ": " + std::strerror(err) +
                       " (is musterctld running? is MUSTER_CONF right?)");
  }
  return fd;
}

Status SplitHostPort(const std::string& hp, std::string* host, uint16_t* port) {
  size_t colon = hp.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return InvalidArgument("expected host:port, got '" + hp + "'");
  std::string h = hp.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  auto p = ParseUint(hp.substr(colon + 1));
  if (!p || *p > 65535) return InvalidArgument("bad port in '" + hp + "'");
  *host = h;
  *port = static_cast<uint16_t>(*p);
  return Status::Ok();
}

namespace {

// One pass over the resolved addresses; errno is the last failure's.
int ConnectOnce(const addrinfo* res, int timeout_ms) {
  for (auto* ai = res; ai; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) continue;
    int r = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      struct pollfd pfd {
        fd, POLLOUT, 0
      };
      r = ::poll(&pfd, 1, timeout_ms) == 1 ? 0 : -1;
      int err = 0;
      socklen_t len = sizeof err;
      if (r == 0 && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) {
        errno = err;
        r = -1;
      } else if (r != 0) {
        errno = ETIMEDOUT;
      }
    }
    if (r == 0) {
      int flags = ::fcntl(fd, F_GETFL);
      ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    const int e = errno;
    ::close(fd);
    errno = e;
  }
  return -1;
}

}  // namespace

Result<int> ConnectTcp(const std::string& host_port, int timeout_ms, int refused_retry_ms) {
  std::string host;
  uint16_t port = 0;
  MUSTER_RETURN_IF_ERROR(SplitHostPort(host_port, &host, &port));
  struct addrinfo hints {};
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) return Unavailable("cannot resolve " + host + ": " + ::gai_strerror(rc));
  const auto give_up_at =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(refused_retry_ms);
  int pause_ms = 50;
  errno = EADDRNOTAVAIL;
  int fd = ConnectOnce(res, timeout_ms);
  while (fd < 0 && errno == ECONNREFUSED && std::chrono::steady_clock::now() < give_up_at) {
    ::usleep(static_cast<useconds_t>(pause_ms) * 1000);
    pause_ms = std::min(pause_ms * 2, 500);
    fd = ConnectOnce(res, timeout_ms);
  }
  const int e = errno;
  ::freeaddrinfo(res);
  if (fd >= 0) return fd;
  return Unavailable("cannot connect to " + host_port + ": " + std::strerror(e));
}

}  // namespace muster
