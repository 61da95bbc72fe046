#include "muster/common/own_files.h"

#include <fcntl.h>
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

Result<std::string> ReadProtectedFile(const std::string& path, const std::string& what, bool secret,
                                      size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return FailedPrecondition("cannot read " + what + " " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    problem = "belongs to uid " + std::to_string(st.st_uid) + ", neither root nor uid " +
              std::to_string(::geteuid()) + " that runs this";
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    problem = "can be changed by other users (mode " + OctalMode(st.st_mode) + ")";
  } else if (secret && (st.st_mode & (S_IRWXG | S_IRWXO))) {
    problem = "is a secret that others can read (mode " + OctalMode(st.st_mode) + "; make it 0600)";
  } else if (static_cast<size_t>(st.st_size) > max_bytes) {
    problem = "is larger than " + std::to_string(max_bytes) + " bytes";
  }
  std::string data;
  if (problem.empty()) {
    data.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < data.size()) {
      ssize_t n = ::read(fd, data.data() + got, data.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        problem = n < 0 ? std::strerror(errno) : "changed while it was read";
        break;
      }
      got += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!problem.empty()) return FailedPrecondition("refusing " + what + " " + path + ": " + problem);
  return data;
}

}  // namespace muster
