// A page of the controller's job listing as the CLI reads it (squeue, muster queue): rows parsed
// one at a time into a reused message, an array's waiting tasks expanded from their runs. A page
// names no more rows than it has bytes for, each with at most one array's waiting tasks.
#include <string_view>

#include "fuzz_check.h"
#include "muster/client/controller_client.h"
#include "muster/common/job_limits.h"

namespace {
struct Enough {};  // a page of millions of array tasks is legal; the fuzzer need not walk it all
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view page(reinterpret_cast<const char*>(data), size);
  uint64_t next = 0, rows = 0, plain = 0;
  try {
    (void)muster::client::ForEachJobInPage(page, &next, [&](const muster::v1::JobInfo& row) {
      ++rows;
      plain += row.has_array() ? 0 : 1;  // only a carrier's runs expand into array tasks
      if (rows > 2'000'000) throw Enough{};
    });
  } catch (const Enough&) {
    return 0;
  }
  // Each row takes at least two bytes of the page (its tag and length).
  FUZZ_CHECK(plain <= size / 2 + 1);
  FUZZ_CHECK(rows <= (size / 2 + 1) * (uint64_t{muster::kMaxArrayTasks} + 1));
  return 0;
}
