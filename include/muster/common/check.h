// Invariant checks. MUSTER_CHECK is always fatal and reserved for "cannot continue";
// MUSTER_DCHECK is checked in debug builds only.
#pragma once

namespace muster::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const char* msg);
}

#define MUSTER_CHECK(cond)                                                       \
  do {                                                                           \
    if (!(cond)) ::muster::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define MUSTER_CHECK_MSG(cond, msg)                                               \
  do {                                                                            \
    if (!(cond)) ::muster::internal::CheckFailed(__FILE__, __LINE__, #cond, msg); \
  } while (0)

#ifdef NDEBUG
#define MUSTER_DCHECK(cond) \
  do {                      \
  } while (0)
#else
#define MUSTER_DCHECK(cond) MUSTER_CHECK(cond)
#endif
