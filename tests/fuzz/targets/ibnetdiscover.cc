// ibnetdiscover dumps, as admins feed them to `muster topology ibnetdiscover`.
#include "muster/common/ibnetdiscover.h"

#include <string>

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto fabric = muster::ParseIbnetdiscover(text);
  if (fabric.ok()) (void)muster::IbTopologyConfig(*fabric);
  return 0;
}
