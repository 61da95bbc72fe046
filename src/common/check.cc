#include "muster/common/check.h"

#include <cstdio>
#include <cstdlib>

namespace muster::internal {

void CheckFailed(const char* file, int line, const char* expr, const char* msg) {
  std::fprintf(stderr, "FATAL %s:%d: check failed: %s %s\n", file, line, expr, msg);
  std::fflush(stderr);
  std::abort();
}

}  // namespace muster::internal
