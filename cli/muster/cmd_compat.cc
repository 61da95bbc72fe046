// muster compat install|remove DIR: links named like Slurm's commands, pointing at this binary,
// which then behaves as that command (argv[0]). Never replaces anything that is not its own link.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli.h"

namespace muster::cli {

int CmdCompat(int argc, char** argv) {
  const std::string usage =
      "expected 'muster compat install DIR' or 'muster compat remove DIR' (links for: " +
      [] {
        std::string s;
        for (const auto& n : FrontEnds()) s += (s.empty() ? "" : ", ") + n;
        return s;
      }() +
      ")";
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("Usage: muster compat install|remove DIR\n%s\n", usage.c_str());
    return kExitOk;
  }
  if (argc != 3) return Usage("compat", usage);
  const std::string action = argv[1], dir = argv[2];
  if (action != "install" && action != "remove") return Usage("compat", usage);
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return Fail("compat", ErrnoStatus("readlink /proc/self/exe", errno));
  self[n] = 0;
  if (action == "install" && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Fail("compat", ErrnoStatus("mkdir " + dir, errno));
  }
  int rc = kExitOk;
  for (const std::string& name : FrontEnds()) {
    const std::string path = dir + "/" + name;
    char target[PATH_MAX];
    ssize_t len = ::readlink(path.c_str(), target, sizeof target - 1);
    const bool ours = len > 0 && std::string(target, static_cast<size_t>(len)) == self;
    struct stat st {};
    const bool exists = ::lstat(path.c_str(), &st) == 0;
    if (action == "remove") {
      if (ours && ::unlink(path.c_str()) == 0) std::printf("removed %s\n", path.c_str());
      continue;
    }
    if (ours) {
      std::printf("%s already points to %s\n", path.c_str(), self);
    } else if (exists) {
      std::fprintf(stderr,
                   "muster compat: %s exists and is not muster's (a real Slurm?); left alone\n",
                   path.c_str());
      rc = kExitFailed;
    } else if (::symlink(self, path.c_str()) != 0) {
      std::fprintf(stderr, "muster compat: cannot create %s: %s\n", path.c_str(),
                   std::strerror(errno));
      rc = kExitFailed;
    } else {
      std::printf("%s -> %s\n", path.c_str(), self);
    }
  }
  return rc;
}

}  // namespace muster::cli
