// Output patterns (-o/-e): a pattern that passes the check expands to a bounded path.
#include "muster/common/output_pattern.h"

#include <string>

#include "fuzz_check.h"
#include "muster/common/job_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string pattern(reinterpret_cast<const char*>(data), size);
  auto vars = muster::JobPatternVars(12345, "name", "user", 12340, 5);
  // Stored before the check existed or not: expansion is bounded either way.
  std::string path = muster::ExpandOutputPattern(pattern.substr(0, 8192), vars, "/work");
  FUZZ_CHECK(path.size() <= 8192 * (muster::kMaxPatternWidth + 32) + 16);
  if (muster::CheckOutputPattern(pattern, "--output").ok()) {
    FUZZ_CHECK(pattern.size() <= muster::kMaxPathBytes);
  }
  return 0;
}
