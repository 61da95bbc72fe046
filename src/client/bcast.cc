#include "muster/client/bcast.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "muster/common/framing.h"
#include "muster/common/job_limits.h"
#include "muster/common/strings.h"

namespace muster::client {

Result<std::string> FindProgram(const std::string& name, const std::string& path) {
  if (name.empty()) return NotFound("--bcast: no program to copy");
  if (name.find('/') != std::string::npos) return name;
  for (const std::string& dir : Split(path, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return NotFound("--bcast: " + name + ": no such program in PATH");
}

Result<BcastSource> OpenBcastSource(const std::string& path) {
  // Without blocking: a FIFO must be refused, not waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return ErrnoStatus("--bcast: cannot read " + path, errno, StatusCode::kFailedPrecondition);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("--bcast: " + path, err, StatusCode::kFailedPrecondition);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return FailedPrecondition("--bcast: " + path +
                              " is not a regular file: only a program file can be copied");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > kMaxBcastBytes) {
    ::close(fd);
    return FailedPrecondition("--bcast: " + path + " is " + std::to_string(size) +
                              " bytes; --bcast copies at most 1 GiB (" +
                              std::to_string(kMaxBcastBytes) +
                              " bytes): run larger programs from a file system the nodes share");
  }
  return BcastSource{fd, size};
}

Result<std::string> BcastDestination(const std::string& dest, const std::string& work_dir) {
  std::string path = dest;
  if (path.empty()) {
    path = work_dir + "/";
  } else if (path[0] != '/') {
    path = work_dir + "/" + path;
  }
  for (const std::string& part : Split(path, '/')) {
    if (part == "..") {
      return InvalidArgument("--bcast=" + dest + ": a destination with a '..' component (" + path +
                             ") is refused: name its directory directly");
    }
  }
  if (path.size() > kMaxPathBytes) {
    return InvalidArgument("--bcast: the destination " + path + " is longer than " +
                           std::to_string(kMaxPathBytes) + " bytes");
  }
  return path;
}

std::string BcastPathOnNode(const std::string& dest, uint64_t job_id, uint32_t step_id,
                            const std::string& node) {
  if (dest.empty() || dest.back() != '/') return dest;
  return dest + "slurm_bcast_" + std::to_string(job_id) + "." + std::to_string(step_id) + "_" +
         node;
}

Status SendBcast(const BcastSource& source, std::vector<int>* fds,
                 const std::function<bool()>& interrupted) {
  std::string chunk;
  for (uint64_t sent = 0; sent < source.size;) {
    if (interrupted && interrupted()) {
      return Aborted("interrupted while copying the program to the step's nodes (--bcast)");
    }
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kBcastChunk, source.size - sent));
    chunk.resize(want);
    for (size_t got = 0; got < want;) {
      const ssize_t n =
          ::pread(source.fd, chunk.data() + got, want - got, static_cast<off_t>(sent + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus("--bcast: reading the program", errno, StatusCode::kDataLoss);
      if (n == 0) {
        return DataLoss("--bcast: the program ended after " + std::to_string(sent + got) +
                        " of its " + std::to_string(source.size) +
                        " bytes (it changed while it was being copied)");
      }
      got += static_cast<size_t>(n);
    }
    // A node that has spoken before its tasks started has given up (or gone): it gets no more.
    std::vector<pollfd> polled;
    for (int fd : *fds) polled.push_back({fd, static_cast<short>(fd >= 0 ? POLLIN : 0), 0});
    if (::poll(polled.data(), polled.size(), 0) > 0) {
      for (size_t i = 0; i < polled.size(); ++i) {
        if (polled[i].revents & (POLLIN | POLLHUP | POLLERR)) (*fds)[i] = -1;
      }
    }
    for (int& fd : *fds) {
      if (fd >= 0 && !WriteFrame(fd, 5, chunk).ok()) fd = -1;
    }
    sent += want;
  }
  return Status::Ok();
}

}  // namespace muster::client
