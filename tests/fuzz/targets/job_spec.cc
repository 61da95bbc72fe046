// The controller's own parsers of a job spec: array ranges and constraint expressions.
#include "job_spec.h"

#include <string>

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  muster::v1::ArrayTask array;
  if (auto tasks = muster::controller::ParseArraySpec(text, 1001, &array); tasks.ok()) {
    FUZZ_CHECK(tasks->size() <= 1001);
    for (uint32_t t : *tasks) FUZZ_CHECK(t < 1001);
  }
  (void)muster::controller::ParseConstraint(text);
  return 0;
}
