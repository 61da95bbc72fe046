#include "muster/common/own_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace muster {
namespace {

Status CheckOwn(const std::string& path, bool want_dir) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return NotFound("cannot examine " + path + ": " + std::strerror(errno));
  }
  if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    return PermissionDenied(path + " is not a " + (want_dir ? "directory" : "regular file") +
                            " (a link?)");
  }
  if (st.st_uid != ::geteuid()) {
    return PermissionDenied(path + " belongs to uid " + std::to_string(st.st_uid) +
                            ", not to uid " + std::to_string(::geteuid()) + " that runs this");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return PermissionDenied(path + " can be written by other users (mode " + OctalMode(st.st_mode) +
                            ")");
  }
  return Status::Ok();
}

}  // namespace

std::string OctalMode(unsigned m) {
  return "0" + std::to_string((m >> 6) & 7) + std::to_string((m >> 3) & 7) + std::to_string(m & 7);
}

Status CheckOwnDirectory(const std::string& dir) { return CheckOwn(dir, true); }
Status CheckOwnFile(const std::string& path) { return CheckOwn(path, false); }

}  // namespace muster
