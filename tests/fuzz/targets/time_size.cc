// Time limits, durations and memory sizes: parsed or refused, never wrapped around.
#include <string>

#include "fuzz_check.h"
#include "muster/common/duration.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (auto t = muster::ParseTimeLimit(text); t.ok()) {
    FUZZ_CHECK(*t >= 0);
    (void)muster::FormatDuration(*t);
  }
  if (auto d = muster::ParseDurationMs(text); d.ok()) FUZZ_CHECK(*d >= 0);
  if (auto m = muster::ParseMemoryMb(text); m.ok()) FUZZ_CHECK(*m <= (1ULL << 40));
  return 0;
}
