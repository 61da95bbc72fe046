// What recovery reads from the store: any bytes under any key are a record or quarantined,
// never a crash. The input is cut into (family, key, value) records.
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "muster/store/state_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<muster::store::RawRecord> raw;
  size_t at = 0;
  while (at + 3 <= size) {
    const auto family = static_cast<muster::store::Family>(data[at] % muster::store::kNumFamilies);
    const size_t key_len = data[at + 1] % 16, value_len = data[at + 2];
    at += 3;
    if (at + key_len + value_len > size) break;
    std::string key(reinterpret_cast<const char*>(data + at), key_len);
    std::string value(reinterpret_cast<const char*>(data + at + key_len), value_len);
    at += key_len + value_len;
    raw.push_back({family, std::move(key), std::move(value)});
  }
  std::vector<muster::store::RawRecord> quarantine;
  muster::store::LoadedState state = muster::store::DecodeAll(raw, &quarantine);
  FUZZ_CHECK(state.jobs.size() + state.nodes.size() + quarantine.size() <= raw.size() + 1);
  return 0;
}
