// srun --multi-prog's configuration file and each rank's command it comes to: every rank of the
// step gets a non-empty command, or the file is refused.
#include "muster/client/multi_prog.h"

#include <string>

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = muster::client::ParseMultiProg(text, "fuzz.conf");
  if (!config.ok()) return 0;
  for (uint32_t ntasks : {1u, 4u, 17u}) {
    auto commands = muster::client::MultiProgCommands(*config, ntasks, {"extra"});
    if (!commands.ok()) continue;
    FUZZ_CHECK(commands->size() == ntasks);
    for (const auto& argv : *commands) FUZZ_CHECK(argv.size() >= 2 && argv.back() == "extra");
  }
  return 0;
}
