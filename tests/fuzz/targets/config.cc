// The TOML configuration: any text gives a Config or an error naming file and line.
#include "muster/common/config.h"

#include <string>

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto c = muster::ParseConfig(text, "fuzz.toml");
  if (!c.ok()) {
    FUZZ_CHECK(c.status().message().rfind("fuzz.toml", 0) == 0);
  } else {
    for (const auto& n : c->nodes) FUZZ_CHECK(muster::IsValidNodeName(n.name));
  }
  return 0;
}
