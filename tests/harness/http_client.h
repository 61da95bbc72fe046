// A plain HTTP/1.1 client over loopback for the daemons' /metrics: one request per connection,
// the whole response read until the server closes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace muster::testing {

inline int ConnectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends until it closes (or 5 s pass).
inline std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

inline std::string Http(int port, const std::string& request) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  (void)!::write(fd, request.data(), request.size());
  std::string out = ReadAll(fd);
  ::close(fd);
  return out;
}

inline std::string HttpGet(int port, const std::string& path, const std::string& authorization) {
  return Http(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                        (authorization.empty() ? "" : "Authorization: " + authorization + "\r\n") +
                        "\r\n");
}

inline std::string StatusLine(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

inline std::string Body(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

// The value of the sample `name{labels}` (labels exactly as written) in a /metrics body, or -1.
inline double MetricSample(const std::string& body, const std::string& series) {
  const std::string prefix = series + " ";
  size_t at = 0;
  while ((at = body.find(prefix, at)) != std::string::npos) {
    if (at == 0 || body[at - 1] == '\n') return std::stod(body.substr(at + prefix.size()));
    at += prefix.size();
  }
  return -1;
}

}  // namespace muster::testing
