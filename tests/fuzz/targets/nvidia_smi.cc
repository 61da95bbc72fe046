// The agent's readers of nvidia-smi's list, topology matrix and query output.
#include "nvidia_smi.h"

#include <string>

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)muster::agent::ParseNvidiaSmiList(text);
  (void)muster::agent::ParseNvidiaSmiTopo(text);
  if (auto q = muster::agent::ParseNvidiaSmiQuery(text); q.ok()) {
    for (const auto& g : *q) (void)muster::agent::HealthFromQuery(g);
  }
  return 0;
}
