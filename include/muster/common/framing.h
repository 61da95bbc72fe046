// The framed protocol used on the controller's Unix socket (the CLI's fast path) and on the agents'
// step port: [u32 length][u32 type][payload], big-endian, length = 4 + payload size.
// In a request, type is the method; in a reply, type is the status code (0 = OK, payload = the
// response message; otherwise payload = an error message). Plain blocking POSIX I/O for clients.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "muster/common/status.h"

namespace muster {

inline constexpr uint32_t kMaxFramePayload = 64u << 20;

struct Frame {
  uint32_t type = 0;
  std::string payload;
};

// Frames out of a byte stream as it arrives, for servers: what is held grows with the bytes
// received, never with what a header promises, and a header over the limit is refused before
// its body is read. Thread-compatible.
class FrameAssembler {
 public:
  explicit FrameAssembler(uint32_t max_payload) : max_payload_(max_payload) {}

  // The limit for frames whose header has not arrived yet (a protocol's later frames may be
  // smaller than its first).
  void set_max_payload(uint32_t max_payload) { max_payload_ = max_payload; }
  // Takes received bytes; complete frames queue up for Pop. INVALID_ARGUMENT for a header with a
  // bad or oversized length: the stream is unusable after it (close the connection).
  Status Append(const char* data, size_t n);
  // The oldest complete frame, if any.
  bool Pop(Frame* frame);
  // Whether part of a frame has arrived and the rest has not.
  bool mid_frame() const { return !partial_.empty(); }
  // The bytes of that part held now (what was received, not what its header promised).
  size_t held_bytes() const { return partial_.size(); }
  // Everything held, as the bytes that arrived (queued frames encoded again, then the partial
  // one), for another reader to take over the stream; empty afterwards.
  std::string TakeBytes();

 private:
  uint32_t max_payload_;
  std::string partial_;  // the incomplete frame at the end of what arrived, header included
  uint32_t need_ = 0;    // its payload length, once its header is complete
  std::deque<Frame> ready_;
};

// Encodes a frame into bytes.
std::string EncodeFrame(uint32_t type, const std::string& payload);
// Decodes the 8-byte header. INVALID_ARGUMENT for a length that is too small or too large.
Status DecodeFrameHeader(const char header[8], uint32_t* payload_len, uint32_t* type);

// Blocking helpers. UNAVAILABLE when the peer went away (EOF, reset); DEADLINE_EXCEEDED when
// timeout_ms (>= 0) passes first.
Status WriteFrame(int fd, uint32_t type, const std::string& payload);
Result<Frame> ReadFrame(int fd, int timeout_ms = -1);

// Connects to a Unix socket. UNAVAILABLE (with the path) when nobody listens there.
Result<int> ConnectUnix(const std::string& path);
// Connects to host:port over TCP (numeric IPv4/IPv6 or a resolvable name). A refused connection
// is tried again for up to refused_retry_ms (a daemon restarting: an agent being upgraded).
Result<int> ConnectTcp(const std::string& host_port, int timeout_ms, int refused_retry_ms = 0);
// Splits "host:port" / "[v6]:port". INVALID_ARGUMENT when malformed.
Status SplitHostPort(const std::string& host_port, std::string* host, uint16_t* port);

}  // namespace muster
