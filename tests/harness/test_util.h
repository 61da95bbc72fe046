// Test helpers: polling for a condition instead of sleeping for a guessed time.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace muster::testing {

// Polls `pred` every few milliseconds until it holds or `timeout_ms` passes.
inline bool WaitFor(const std::function<bool()>& pred, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A TCP connection to 127.0.0.1:port from loopback address `source` (127.0.0.2, ...): how a test
// stands for several hosts, as per-address limits see them. -1 when it cannot connect.
inline int ConnectLoopbackFrom(const std::string& source, uint16_t port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    if (s >= 0) ::close(s);
    return -1;
  }
  return s;
}

}  // namespace muster::testing

// Asserts that `cond` becomes true within timeout_ms (Kudu's ASSERT_EVENTUALLY, simplified).
#define ASSERT_EVENTUALLY(cond, timeout_ms) \
  ASSERT_TRUE(::muster::testing::WaitFor([&]() -> bool { return (cond); }, (timeout_ms))) << #cond
