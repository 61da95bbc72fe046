// The spec muster-keeper reads from its memfd: any bytes are refused or decode to a spec whose
// encoding decodes to itself; a decoded spec always names a program, its arguments, the report
// pipe and the exit record.
#include "muster/keeper/keeper_spec.h"

#include <string>

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using muster::keeper::DecodeKeeperSpec;
  using muster::keeper::EncodeKeeperSpec;
  using muster::keeper::KeeperSpec;
  KeeperSpec spec;
  if (!DecodeKeeperSpec(std::string_view(reinterpret_cast<const char*>(data), size), &spec)) {
    return 0;
  }
  FUZZ_CHECK(!spec.path.empty() && !spec.argv.empty() && !spec.exit_name.empty());
  FUZZ_CHECK(spec.report_fd >= 0 && spec.exit_dir_fd >= 0);
  FUZZ_CHECK(spec.stdin_fd >= -1 && spec.stdout_fd >= -1 && spec.stderr_fd >= -1);
  const std::string once = EncodeKeeperSpec(spec);
  KeeperSpec again;
  FUZZ_CHECK(DecodeKeeperSpec(once, &again));
  FUZZ_CHECK(EncodeKeeperSpec(again) == once);
  return 0;
}
