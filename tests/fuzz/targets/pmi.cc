// srun's PMI server (PMI-1 lines and PMI-2 frames) fed what hostile tasks write: whatever they
// send, it answers each rank in whole messages of bounded size, or stops serving it, and it
// never crashes. The input is a script: a control byte (rank, and whether that rank ends), a
// length byte, then that many bytes the rank writes; the first byte picks --mpi=pmi1 or pmi2.
#include <string>

#include "fuzz_check.h"
#include "muster/client/pmi2_wire.h"
#include "muster/client/pmi_server.h"

using muster::client::PmiServer;
namespace pmi2 = muster::client::pmi2;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto c = pmi2::ParseCommand(text)) {
    FUZZ_CHECK(!c->cmd.empty() && c->fields.size() <= pmi2::kMaxFields);
    for (const auto& [k, v] : c->fields) FUZZ_CHECK(!k.empty() && k.find(';') == std::string::npos);
  }
  if (size == 0) return 0;
  constexpr uint32_t kRanks = 4;
  bool dropped[kRanks] = {};
  auto send = [&](uint32_t rank, const std::string& bytes) {
    FUZZ_CHECK(rank < kRanks);
    FUZZ_CHECK(!dropped[rank]);  // nothing after the socket closes
    if (bytes.empty()) {
      dropped[rank] = true;
      return;
    }
    FUZZ_CHECK(bytes.size() <= PmiServer::kMaxLine + 1024);
    if (bytes.back() == '\n') return;  // a PMI-1 line
    auto len = pmi2::ParseLength(bytes.substr(0, pmi2::kLengthChars));
    FUZZ_CHECK(len && *len + pmi2::kLengthChars == bytes.size());  // one whole PMI-2 message
    FUZZ_CHECK(pmi2::ParseCommand(bytes.substr(pmi2::kLengthChars)).has_value());
  };
  PmiServer server(kRanks, "1.0", {2, 1, 1}, send,
                   data[0] & 1 ? PmiServer::Wire::kPmi2 : PmiServer::Wire::kPmi1);
  size_t i = 1;
  while (i + 2 <= size) {
    const uint8_t control = data[i], len = data[i + 1];
    i += 2;
    const size_t n = std::min<size_t>(len, size - i);
    const uint32_t rank = control % (kRanks + 1);  // kRanks: nobody's
    if (control & 0x80) {
      server.TaskEnded(rank);
    } else {
      server.FromTask(rank, text.substr(i, n));
      i += n;
    }
  }
  return 0;
}
