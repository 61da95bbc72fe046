// Host lists: an expression expands within its bound, and what it expands to compresses into an
// expression that expands back to the same names.
#include "muster/common/hostlist.h"

#include <set>
#include <string>

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string expr(reinterpret_cast<const char*>(data), size);
  auto names = muster::ExpandHostlist(expr, 10'000);
  if (!names.ok()) return 0;
  FUZZ_CHECK(names->size() <= 10'000);
  std::string compressed = muster::CompressHostlist(*names);
  auto again = muster::ExpandHostlist(compressed, 10'000);
  FUZZ_CHECK(again.ok());
  // The same set of names (compression groups them and drops repeats, so order and count may
  // differ).
  FUZZ_CHECK(std::set<std::string>(names->begin(), names->end()) ==
             std::set<std::string>(again->begin(), again->end()));
  for (const auto& n : *names) {
    for (char c : n) FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
  }
  return 0;
}
