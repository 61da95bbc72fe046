#include "bcast_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "muster/common/job_limits.h"
#include "muster/common/strings.h"
#include "spawn.h"

namespace muster::agent {
namespace {

// Where the child stopped (Report::stage); kDone: the file is written whole.
enum Stage : int32_t {
  kDone = 0,
  kGroups,
  kGid,
  kUid,
  kOpen,
  kNotRegular,
  kMode,
  kRead,
  kWrite,
  kTooLong,
  kShort,
  kClose,
};

// What the child writes to its result pipe just before it exits.
struct Report {
  int32_t stage;
  int32_t err;
  uint64_t written;
};

// Everything the child needs, prepared by the parent (the child works on its own copy).
struct WriterArgs {
  const char* path;
  uint64_t size;
  bool change_user;
  uid_t uid;
  gid_t gid;
  const gid_t* groups;
  size_t ngroups;
  int in_fd;
  int report_fd;
  int procs_fd;
  char* buf;
  size_t buf_size;
};

long Sys(long nr, long a = 0, long b = 0, long c = 0, long d = 0) {
  return ::syscall(nr, a, b, c, d);
}

// The child is a copy of a process that may have many threads (the agent): raw system calls only
// (glibc's credential wrappers would wait for threads that are not there), and no sanitizer
// bookkeeping, as in muster/keeper/child.h.
#if defined(__clang__) || defined(__GNUC__)
#define MUSTER_BCAST_CHILD __attribute__((no_sanitize("address", "undefined")))
#else
#define MUSTER_BCAST_CHILD
#endif

[[noreturn]] MUSTER_BCAST_CHILD void Finish(WriterArgs* a, int32_t stage, int err, uint64_t written,
                                            bool remove) {
  // A copy that stopped part way is no program to run: it goes (as the user, like the rest).
  if (remove) Sys(SYS_unlinkat, AT_FDCWD, reinterpret_cast<long>(a->path), 0);
  Report r{stage, err, written};
  Sys(SYS_write, a->report_fd, reinterpret_cast<long>(&r), sizeof r);
  Sys(SYS_exit_group, stage == kDone ? 0 : 1);
  __builtin_unreachable();
}

// Every descriptor but `a` and `b`: the parent's others (its client's socket, the write end of
// this child's own input) must not be held open here.
MUSTER_BCAST_CHILD void CloseAllBut(int a, int b) {
  const long lo = std::min(a, b), hi = std::max(a, b);
  const long ranges[3][2] = {{0, lo - 1}, {lo + 1, hi - 1}, {hi + 1, 0xffffffffL}};
  for (const auto& r : ranges) {
    if (r[0] > r[1]) continue;
    if (Sys(SYS_close_range, r[0], r[1], 0) != 0) {  // before Linux 5.9
      for (long fd = r[0]; fd <= std::min(r[1], 4095L); ++fd) Sys(SYS_close, fd);
    }
  }
}

MUSTER_BCAST_CHILD int WriterMain(void* arg) {
  auto* a = static_cast<WriterArgs*>(arg);
  // Signals held (SIGKILL still ends it): the handlers here are the parent's, meant for it.
  uint64_t all = ~uint64_t{0};
  Sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&all), 0, 8);
  // Into the step's cgroup where it can go; where it cannot, the copy is made from ours all the
  // same (the cgroup only accounts for it).
  if (a->procs_fd >= 0) Sys(SYS_write, a->procs_fd, reinterpret_cast<long>("0"), 1);
  CloseAllBut(a->in_fd, a->report_fd);
  if (a->change_user) {
    if (Sys(SYS_setgroups, static_cast<long>(a->ngroups), reinterpret_cast<long>(a->groups)) != 0) {
      Finish(a, kGroups, errno, 0, false);
    }
    if (Sys(SYS_setresgid, a->gid, a->gid, a->gid) != 0) Finish(a, kGid, errno, 0, false);
    if (Sys(SYS_setresuid, a->uid, a->uid, a->uid) != 0) Finish(a, kUid, errno, 0, false);
  }
  Sys(SYS_umask, 077);
  // Never through a link, and never waiting on a FIFO (which O_NONBLOCK fails at once).
  const long fd = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(a->path),
                      O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0700);
  if (fd < 0) Finish(a, kOpen, errno, 0, false);
  struct stat st {};
  if (Sys(SYS_fstat, fd, reinterpret_cast<long>(&st)) != 0) Finish(a, kOpen, errno, 0, false);
  if (!S_ISREG(st.st_mode)) Finish(a, kNotRegular, 0, 0, false);
  // A file that was there keeps its mode through O_TRUNC: the copy is the user's alone.
  if (Sys(SYS_fchmod, fd, 0700) != 0) Finish(a, kMode, errno, 0, false);
  const long flags = Sys(SYS_fcntl, fd, F_GETFL);
  if (flags >= 0) Sys(SYS_fcntl, fd, F_SETFL, flags & ~O_NONBLOCK);
  uint64_t written = 0;
  for (;;) {
    const long n =
        Sys(SYS_read, a->in_fd, reinterpret_cast<long>(a->buf), static_cast<long>(a->buf_size));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Finish(a, kRead, errno, written, true);
    if (n == 0) break;
    if (static_cast<uint64_t>(n) > a->size - written) Finish(a, kTooLong, 0, written, true);
    for (long off = 0; off < n;) {
      const long w = Sys(SYS_write, fd, reinterpret_cast<long>(a->buf + off), n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) Finish(a, kWrite, w < 0 ? errno : ENOSPC, written, true);
      off += w;
      written += static_cast<uint64_t>(w);
    }
  }
  if (written != a->size) Finish(a, kShort, 0, written, true);
  // Some file systems (NFS, quotas) report a failed write only here.
  if (Sys(SYS_close, fd) != 0) Finish(a, kClose, errno, written, true);
  Finish(a, kDone, 0, written, false);
}

}  // namespace

Status CheckBcastRequest(const std::string& path, uint64_t size) {
  if (path.empty() || path[0] != '/') {
    return InvalidArgument("--bcast: the destination " + path + " is not an absolute path");
  }
  if (path.find('\0') != std::string::npos) {
    return InvalidArgument("--bcast: the destination holds a NUL byte");
  }
  if (path.size() > kMaxPathBytes) {
    return InvalidArgument("--bcast: the destination is longer than " +
                           std::to_string(kMaxPathBytes) + " bytes");
  }
  for (const std::string& part : Split(path, '/')) {
    if (part == "..") {
      return InvalidArgument("--bcast: the destination " + path + " has a '..' component");
    }
  }
  if (size > kMaxBcastBytes) {
    return InvalidArgument("--bcast: the program is " + std::to_string(size) +
                           " bytes; a node takes at most " + std::to_string(kMaxBcastBytes));
  }
  return Status::Ok();
}

Result<BcastWriter> StartBcastWriter(const BcastWriterSpec& spec) {
  int data[2], result[2];
  if (::pipe2(data, O_CLOEXEC) != 0) return ErrnoStatus("--bcast: pipe", errno);
  if (::pipe2(result, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(data[0]);
    ::close(data[1]);
    return ErrnoStatus("--bcast: pipe", err);
  }
  ::fcntl(data[1], F_SETPIPE_SZ, 1 << 20);  // fewer wake-ups; the default size works too
  constexpr size_t kStack = 64 * 1024, kBuffer = 256 * 1024;
  void* mem = ::mmap(nullptr, kStack + kBuffer, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  pid_t pid = -1;
  int err = ENOMEM;
  if (mem != MAP_FAILED) {
    char* base = static_cast<char*>(mem);
    WriterArgs a{spec.path.c_str(),  spec.size,
                 spec.change_user,   spec.uid,
                 spec.gid,           spec.groups.data(),
                 spec.groups.size(), data[0],
                 result[1],          spec.cgroup_procs_fd,
                 base + kStack,      kBuffer};
    // A copy of this process (no glibc fork handlers), on its own stack below the buffer.
    pid = ::clone(WriterMain, base + kStack, SIGCHLD, &a);
    err = errno;
    ::munmap(mem, kStack + kBuffer);  // the child has its own copy
  }
  ::close(data[0]);
  ::close(result[1]);
  if (pid < 0) {
    ::close(data[1]);
    ::close(result[0]);
    return ErrnoStatus("--bcast: cannot start the process that writes the program", err,
                       StatusCode::kResourceExhausted);
  }
  return BcastWriter{pid, data[1], result[0]};
}

Status BcastOutcome(const std::string& report, int wait_status, const BcastWriterSpec& spec) {
  const std::string& p = spec.path;
  Report r{};
  if (report.size() != sizeof r) {
    int code = 0, sig = 0;
    DecodeWaitStatus(wait_status, &code, &sig);
    return Internal("--bcast: the process writing " + p +
                    (sig ? " was killed by signal " + std::to_string(sig)
                         : " ended with exit code " + std::to_string(code) + " and said nothing"));
  }
  std::memcpy(&r, report.data(), sizeof r);
  const std::string why = r.err ? std::strerror(r.err) : "";
  const std::string after = " after " + std::to_string(r.written) + " of the program's " +
                            std::to_string(spec.size) + " bytes";
  switch (r.stage) {
    case kDone:
      if (r.written == spec.size) return Status::Ok();
      return Internal("--bcast: " + p + " got " + std::to_string(r.written) + " of the program's " +
                      std::to_string(spec.size) + " bytes");
    case kGroups:
    case kGid:
    case kUid:
      return PermissionDenied("--bcast: cannot switch to uid " + std::to_string(spec.uid) +
                              " to write " + p + ": " + why);
    case kOpen:
      if (r.err == ELOOP) {
        return FailedPrecondition("--bcast: " + p + " is a symbolic link (" + why +
                                  "): the program is never written through one");
      }
      if (r.err == EISDIR) {
        return FailedPrecondition("--bcast: " + p +
                                  " is a directory: end the destination with '/' to write the "
                                  "program into it");
      }
      return FailedPrecondition("--bcast: cannot create " + p + ": " + why);
    case kNotRegular:
      return FailedPrecondition("--bcast: " + p + " is there already and is not a regular file");
    case kMode:
      return FailedPrecondition("--bcast: cannot make " + p + " mode 0700: " + why);
    case kRead:
      return Internal("--bcast: reading the program's bytes" + after + ": " + why);
    case kWrite:
    case kClose:
      return FailedPrecondition("--bcast: writing " + p + " failed" + after + ": " + why +
                                " (the partial copy was removed)");
    case kTooLong:
      return InvalidArgument("--bcast: more than the program's " + std::to_string(spec.size) +
                             " bytes arrived for " + p);
    case kShort:
      return Unavailable("--bcast: the copy to " + p + " stopped" + after +
                         " (the partial copy was removed)");
    default:
      return Internal("--bcast: the process writing " + p + " reported stage " +
                      std::to_string(r.stage));
  }
}

}  // namespace muster::agent
