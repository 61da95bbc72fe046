// The framed protocol's assembler: any byte stream, in any chunks, gives frames within the limit
// or an error, and holds no more than it received.
#include "muster/common/framing.h"

#include <string>

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t chunk = 1 + data[0] % 64;  // the first byte says how the stream is cut
  muster::FrameAssembler frames(4096);
  size_t received = 0;
  for (size_t at = 1; at < size; at += chunk) {
    const size_t n = std::min(chunk, size - at);
    received += n;
    if (!frames.Append(reinterpret_cast<const char*>(data + at), n).ok()) return 0;
    FUZZ_CHECK(frames.held_bytes() <= received);
    muster::Frame f;
    while (frames.Pop(&f)) FUZZ_CHECK(f.payload.size() <= 4096);
  }
  return 0;
}
