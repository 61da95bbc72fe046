#include "muster/common/own_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

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

namespace {

// Walks `path` from / one entry at a time (lstat, never following a link unseen): each directory
// must be root's or ours and writable by no one else (a sticky one of root's, as /tmp, counts:
// no one may replace another's entry there, so every entry must be root's or ours); a link,
// root's or ours and found in such a directory, is followed by walking its target the same way;
// the end must be an executable regular file that only root or we can change.
Status CheckTrustedPath(const std::string& path, int links) {
  if (links > 16) return FailedPrecondition(path + ": too many links");
  if (path.empty() || path[0] != '/') {
    return FailedPrecondition("program '" + path + "' is not an absolute path");
  }
  auto trusted_owner = [](const struct stat& st) {
    return st.st_uid == 0 || st.st_uid == ::geteuid();
  };
  auto check_dir = [&](const std::string& dir) -> Status {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) {
      return FailedPrecondition("cannot examine " + dir + ": " + std::strerror(errno));
    }
    const bool others_write = st.st_mode & (S_IWGRP | S_IWOTH);
    const bool sticky_of_root = (st.st_mode & S_ISVTX) && st.st_uid == 0;
    if (!S_ISDIR(st.st_mode) || !trusted_owner(st) || (others_write && !sticky_of_root)) {
      return FailedPrecondition(
          path + " lies in " + dir + ", which another user could change (uid " +
          std::to_string(st.st_uid) + ", mode " + OctalMode(st.st_mode) + ")");
    }
    return Status::Ok();
  };
  MUSTER_RETURN_IF_ERROR(check_dir("/"));
  std::vector<std::string> parts;
  for (size_t at = 1; at <= path.size();) {
    const size_t next = std::min(path.find('/', at), path.size());
    if (next > at) parts.push_back(path.substr(at, next - at));
    at = next + 1;
  }
  if (parts.empty()) return FailedPrecondition(path + " is not a program");
  std::string prefix;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string parent = prefix.empty() ? "/" : prefix;
    prefix += "/" + parts[i];
    struct stat st {};
    if (::lstat(prefix.c_str(), &st) != 0) {
      return FailedPrecondition("cannot examine " + prefix + ": " + std::strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
      // Another's link, even in a sticky directory such as /tmp, is theirs to replace (with a
      // file of theirs) between this check and the run.
      if (!trusted_owner(st)) {
        return FailedPrecondition(prefix + " is a link that uid " + std::to_string(st.st_uid) +
                                  " owns, who could replace it");
      }
      char target[4096];
      const ssize_t n = ::readlink(prefix.c_str(), target, sizeof(target) - 1);
      if (n <= 0) return FailedPrecondition("cannot read the link " + prefix);
      std::string next(target, static_cast<size_t>(n));
      if (next[0] != '/') next = parent + (parent == "/" ? "" : "/") + next;
      for (size_t k = i + 1; k < parts.size(); ++k) next += "/" + parts[k];
      return CheckTrustedPath(next, links + 1);
    }
    if (i + 1 < parts.size()) {
      MUSTER_RETURN_IF_ERROR(check_dir(prefix));
      continue;
    }
    if (!S_ISREG(st.st_mode) || !(st.st_mode & S_IXUSR)) {
      return FailedPrecondition(prefix + " is not an executable regular file");
    }
    if (!trusted_owner(st) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
      return FailedPrecondition(prefix + " could be changed by another user (uid " +
                                std::to_string(st.st_uid) + ", mode " + OctalMode(st.st_mode) +
                                ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckTrustedProgram(const std::string& path) { return CheckTrustedPath(path, 0); }

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
