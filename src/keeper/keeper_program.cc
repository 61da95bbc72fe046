// muster-keeper: the keeper of one batch script, as a program of its own. The agent starts it
// with vfork + exec (no copy of the agent's address space, whose page tables cost more to copy
// than everything else a short job does) and hands it what to start in a memfd.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>

#include "muster/keeper/child.h"
#include "muster/keeper/keeper_spec.h"
#include "muster/keeper/task_spec.h"

namespace muster::keeper {
namespace {

constexpr size_t kMaxSpec = 64u << 20;  // arguments and environment are bounded far lower
constexpr size_t kTaskStack = 64 * 1024;
alignas(64) char task_stack[kTaskStack];

bool ReadSpec(int fd, std::string* out) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
      static_cast<size_t>(st.st_size) > kMaxSpec) {
    return false;
  }
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    ssize_t n = ::pread(fd, out->data() + done, out->size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int KeeperProgramMain(int argc, char** argv) {
  int spec_fd = -1;
  if (argc == 2) {
    const char* end = argv[1] + std::strlen(argv[1]);
    auto [p, ec] = std::from_chars(argv[1], end, spec_fd);
    if (ec != std::errc() || p != end) spec_fd = -1;
  }
  if (spec_fd < 3) {
    std::fprintf(stderr, "usage: muster-keeper SPEC_FD (started by musterd)\n");
    return 127;
  }
  std::string bytes;
  static KeeperSpec spec;  // lives as long as the keeper: the task's child reads it
  if (!ReadSpec(spec_fd, &bytes) || !DecodeKeeperSpec(bytes, &spec)) {
    std::fprintf(stderr, "muster-keeper: the spec on fd %d is unreadable or malformed\n", spec_fd);
    return 127;
  }
  ::close(spec_fd);
  bytes.clear();
  bytes.shrink_to_fit();

  static const std::string exit_tmp = spec.exit_name + ".tmp";
  static ChildArrays arrays;
  static ChildArgs child;
  FillChildArgs(spec, &arrays, &child);
  static KeeperArgs k{&child,           task_stack + kTaskStack, spec.exit_dir_fd,
                      exit_tmp.c_str(), spec.exit_name.c_str(),  spec.report_fd};
  return KeeperMain(&k);  // never returns
}

}  // namespace muster::keeper
