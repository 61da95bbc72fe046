#include "bcast_writer.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
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

// Where the child stopped (Report::stage); kDone: the file is written whole, at its path.
enum Stage : int32_t {
  kDone = 0,
  kGroups,
  kGid,
  kUid,
  kOpen,        // the destination's directory cannot be looked at, or the copy not created
  kSymlink,     // the destination is a symbolic link
  kDirectory,   // ... a directory
  kNotRegular,  // ... something else that is not a regular file
  kMode,
  kRead,
  kWrite,
  kTooLong,
  kShort,
  kClose,
  kRename,   // the whole copy could not take the destination's name
  kStopped,  // SIGTERM, SIGINT or SIGHUP (the job's end) stopped it
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
  const char* temp_path;
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

long Sys(long nr, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  return ::syscall(nr, a, b, c, d, e);
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
  // A copy that stopped part way is no program to run: it goes (as the user, like the rest). It
  // is the child's own new file; the destination was never touched.
  if (remove) Sys(SYS_unlinkat, AT_FDCWD, reinterpret_cast<long>(a->temp_path), 0);
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
  // Signals held (SIGKILL still ends it): the handlers here are the parent's, meant for it. Those
  // that end a job are read from a signalfd below instead.
  uint64_t all = ~uint64_t{0};
  Sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&all), 0, 8);
  // A process group of its own (the parent makes it one too, whichever runs first): the job's
  // signals reach it by its group, as they reach the tasks.
  Sys(SYS_setpgid, 0, 0);
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
  const uint64_t stop_signals = (uint64_t{1} << (SIGTERM - 1)) | (uint64_t{1} << (SIGINT - 1)) |
                                (uint64_t{1} << (SIGHUP - 1));
  // Without one (no fds left?) only SIGKILL stops it, and its temporary file stays.
  const long stop_fd =
      Sys(SYS_signalfd4, -1, reinterpret_cast<long>(&stop_signals), 8, SFD_CLOEXEC);
  // What is at the destination now: it is replaced only by a regular file, never followed. (What
  // is there at the rename may differ; rename(2) replaces a name, and never writes through it.)
  struct stat st {};
  if (Sys(SYS_newfstatat, AT_FDCWD, reinterpret_cast<long>(a->path), reinterpret_cast<long>(&st),
          AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) Finish(a, kSymlink, 0, 0, false);
    if (S_ISDIR(st.st_mode)) Finish(a, kDirectory, 0, 0, false);
    if (!S_ISREG(st.st_mode)) Finish(a, kNotRegular, 0, 0, false);
  } else if (errno != ENOENT) {
    Finish(a, kOpen, errno, 0, false);
  }
  // A new file, the child's alone: never one that was there, nor through a link.
  const long fd = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(a->temp_path),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
  if (fd < 0) Finish(a, kOpen, errno, 0, false);
  // 0700 whatever a default ACL of the directory would give.
  if (Sys(SYS_fchmod, fd, 0700) != 0) Finish(a, kMode, errno, 0, true);
  uint64_t written = 0;
  for (;;) {
    struct pollfd fds[2] = {{static_cast<int>(a->in_fd), POLLIN, 0},
                            {static_cast<int>(stop_fd), POLLIN, 0}};
    const long ready = Sys(SYS_ppoll, reinterpret_cast<long>(fds), stop_fd >= 0 ? 2 : 1, 0, 0, 8);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) Finish(a, kRead, errno, written, true);
    if (stop_fd >= 0 && (fds[1].revents & POLLIN)) Finish(a, kStopped, 0, written, true);
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
  // The whole copy takes the destination's name at once: whoever runs it gets all of it or what
  // was there before.
  if (Sys(SYS_renameat2, AT_FDCWD, reinterpret_cast<long>(a->temp_path), AT_FDCWD,
          reinterpret_cast<long>(a->path), 0) != 0) {
    Finish(a, kRename, errno, written, true);
  }
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
  if (path.back() == '/') {
    return InvalidArgument("--bcast: the destination " + path +
                           " ends with '/': it must name the file (srun names one in a directory)");
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

std::chrono::seconds BcastDeadline(uint64_t size) {
  return std::chrono::seconds(600 + size / (256 * 1024));
}

std::string BcastTempPath(const std::string& path) {
  return path.substr(0, path.rfind('/') + 1) + ".muster-bcast-" + RandomHex(8);
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
    WriterArgs a{spec.path.c_str(),
                 spec.temp_path.c_str(),
                 spec.size,
                 spec.change_user,
                 spec.uid,
                 spec.gid,
                 spec.groups.data(),
                 spec.groups.size(),
                 data[0],
                 result[1],
                 spec.cgroup_procs_fd,
                 base + kStack,
                 kBuffer};
    // A copy of this process (no glibc fork handlers), on its own stack below the buffer.
    pid = ::clone(WriterMain, base + kStack, SIGCHLD, &a);
    err = errno;
    // Its own process group from here on, before the caller hands its pid to the job: a signal to
    // the group cannot miss it for having come before the child's own setpgid.
    if (pid > 0) ::setpgid(pid, pid);
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
      return FailedPrecondition("--bcast: cannot create " + p + ": " + why);
    case kSymlink:
      return FailedPrecondition("--bcast: " + p +
                                " is a symbolic link: the program never replaces or goes through "
                                "one");
    case kDirectory:
      return FailedPrecondition("--bcast: " + p +
                                " is a directory: end the destination with '/' to write the "
                                "program into it");
    case kNotRegular:
      return FailedPrecondition("--bcast: " + p + " is there already and is not a regular file");
    case kMode:
      return FailedPrecondition("--bcast: cannot make the copy for " + p + " mode 0700: " + why +
                                " (it was removed)");
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
    case kRename:
      if (r.err == EISDIR || r.err == ENOTEMPTY || r.err == EEXIST) {
        return FailedPrecondition("--bcast: " + p +
                                  " is a directory: end the destination with '/' to write the "
                                  "program into it");
      }
      return FailedPrecondition("--bcast: cannot put the program at " + p + ": " + why +
                                " (the copy was removed, and what was there is as it was)");
    case kStopped:
      return Aborted("--bcast: the copy to " + p + " was stopped by a signal" + after +
                     " (the partial copy was removed)");
    default:
      return Internal("--bcast: the process writing " + p + " reported stage " +
                      std::to_string(r.stage));
  }
}

}  // namespace muster::agent
