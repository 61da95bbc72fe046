#include "spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace muster::agent {
namespace {

enum Stage { kSetsid = 1, kCgroup, kGroups, kGid, kUid, kChdir, kStdin, kStdout, kStderr, kExec };

// Everything the child needs, prepared by the parent. The child shares the parent's memory
// (CLONE_VM | CLONE_VFORK, as posix_spawn does), so it never copies the agent's address space;
// it may only make raw system calls, and reports a failure by writing stage/err here.
struct ChildArgs {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* cwd;
  bool change_user;
  uid_t uid;
  gid_t gid;
  const gid_t* groups;
  size_t ngroups;
  const char* stdout_path;
  const char* stderr_path;  // nullptr: same as stdout
  int stdout_fd, stderr_fd;
  int output_flags;
  int stdin_fd;
  const char* stdin_path;  // nullptr: /dev/null
  const char* tty_path;    // nullptr: no terminal
  int cgroup_procs_fd;     // fallback for kernels without CLONE_INTO_CGROUP: move in by writing "0"
  int report_fd = -1;  // a child in its own memory (clone3 without CLONE_VM) reports failure here
  volatile int stage = 0;
  volatile int err = 0;
};

// A fork (own copy of memory, no glibc fork handlers) created directly in a cgroup. Returns the
// pid in the parent, 0 in the child, -1 with errno (ENOSYS before Linux 5.7) on failure.
long ForkIntoCgroup(int cgroup_fd, bool vfork) {
  struct clone_args args {};
  args.flags = CLONE_INTO_CGROUP | (vfork ? CLONE_VFORK : 0);
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(cgroup_fd);
  return ::syscall(SYS_clone3, &args, sizeof args);
}

#if defined(__x86_64__)
// clone3 with CLONE_VM: the child runs on `args->stack` and calls fn(arg), which must exec or
// exit; glibc (2.36) offers no clone3 wrapper. The kernel keeps r12/r13 in the child, so they
// carry fn and arg across. Returns the child's pid, or -errno.
__attribute__((noinline)) long Clone3WithVm(struct clone_args* args, int (*fn)(void*), void* arg) {
  long ret;
  register long fn_reg asm("r12") = reinterpret_cast<long>(fn);
  register long arg_reg asm("r13") = reinterpret_cast<long>(arg);
  asm volatile(
      "syscall\n\t"
      "test %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xor %%ebp, %%ebp\n\t"  // the child: a fresh stack, no frames above fn
      "mov %%r13, %%rdi\n\t"
      "and $-16, %%rsp\n\t"
      "call *%%r12\n\t"
      "mov %%eax, %%edi\n\t"
      "mov $231, %%eax\n\t"  // exit_group, should fn return
      "syscall\n\t"
      "hlt\n\t"
      "1:\n\t"
      : "=a"(ret)
      : "0"(static_cast<long>(SYS_clone3)), "D"(args), "S"(sizeof(*args)), "r"(fn_reg), "r"(arg_reg)
      : "rcx", "r11", "memory");
  return ret;
}
#endif

int ProcsFd(int cgroup_fd) { return ::openat(cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC); }

// What a keeper needs. It runs in a copy of the agent's address space (a fork without glibc's
// fork handlers), so, like the task's child, it makes raw system calls only.
struct KeeperArgs {
  ChildArgs* child;
  char* task_stack_top;
  // The exit record is written relative to its directory (the agent checked that only it can
  // write there), never through a link: unlinkat, then openat O_EXCL|O_NOFOLLOW, then renameat.
  int exit_dir_fd;
  const char* exit_tmp;   // a name in that directory
  const char* exit_name;  // ditto
  int report_fd;
};

// What the keeper tells the agent through the report pipe once the task has exec'd (or failed).
struct KeeperReport {
  int32_t pid;
  int32_t stage;
  int32_t err;
};

// The kernel's sigaction layout (glibc's differs).
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  uint64_t mask;
};

long Sys(long nr, long a = 0, long b = 0, long c = 0, long d = 0) {
  long r = ::syscall(nr, a, b, c, d);
  return r;
}

#if defined(__clang__) || defined(__GNUC__)
#define MUSTER_CHILD_CODE __attribute__((no_sanitize("address", "undefined")))
#else
#define MUSTER_CHILD_CODE
#endif

[[noreturn]] MUSTER_CHILD_CODE void ChildFail(ChildArgs* a, int stage) {
  a->err = errno;
  a->stage = stage;
  if (a->report_fd >= 0) {
    int32_t r[2] = {stage, a->err};
    ::syscall(SYS_write, a->report_fd, r, sizeof r);
  }
  ::syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

int OpenOutput(const char* path, int flags) {
  return static_cast<int>(
      Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), flags | O_CLOEXEC, 0644));
}

int OpenRead(const char* path) {
  return static_cast<int>(
      Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), O_RDONLY | O_CLOEXEC));
}

// Not instrumented by the sanitizers: the child shares the agent's memory on a 64 KiB stack
// until it execs, and AddressSanitizer's bookkeeping (its no-return hook inspects the signal
// stack) does not belong in it.
MUSTER_CHILD_CODE int ChildMain(void* arg) {
  auto* a = static_cast<ChildArgs*>(arg);
  // Default dispositions and an empty mask: the job must not inherit the agent's signal setup.
  KernelSigaction dfl{SIG_DFL, 0, nullptr, 0};
  for (long sig = 1; sig < 65; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    Sys(SYS_rt_sigaction, sig, reinterpret_cast<long>(&dfl), 0, 8);
  }
  uint64_t empty = 0;
  Sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&empty), 0, 8);
  if (Sys(SYS_setsid) < 0) ChildFail(a, kSetsid);
  // Into the job's cgroup before anything of the user's runs ("0" moves the writer).
  if (a->cgroup_procs_fd >= 0 &&
      Sys(SYS_write, a->cgroup_procs_fd, reinterpret_cast<long>("0"), 1) != 1) {
    ChildFail(a, kCgroup);
  }
  if (a->change_user) {
    // Raw calls: glibc's wrappers would try to change the credentials of every thread.
    if (Sys(SYS_setgroups, static_cast<long>(a->ngroups), reinterpret_cast<long>(a->groups)) != 0) {
      ChildFail(a, kGroups);
    }
    if (Sys(SYS_setresgid, a->gid, a->gid, a->gid) != 0) ChildFail(a, kGid);
    if (Sys(SYS_setresuid, a->uid, a->uid, a->uid) != 0) ChildFail(a, kUid);
  }
  if (a->cwd && *a->cwd && Sys(SYS_chdir, reinterpret_cast<long>(a->cwd)) != 0)
    ChildFail(a, kChdir);
  if (a->tty_path) {
    // A session leader opening a terminal: it becomes the controlling one (TIOCSCTTY makes sure).
    int tty = static_cast<int>(
        Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(a->tty_path), O_RDWR | O_CLOEXEC));
    if (tty < 0 || Sys(SYS_ioctl, tty, TIOCSCTTY, 0) < 0) ChildFail(a, kStdin);
    for (long fd = 0; fd < 3; ++fd) {
      if (Sys(SYS_dup2, tty, fd) < 0) ChildFail(a, kStdin);
    }
  } else {
    int in = a->stdin_fd >= 0 ? a->stdin_fd : OpenRead(a->stdin_path ? a->stdin_path : "/dev/null");
    if (in < 0 || Sys(SYS_dup2, in, 0) < 0) ChildFail(a, kStdin);
    int out = a->stdout_fd >= 0 ? a->stdout_fd : OpenOutput(a->stdout_path, a->output_flags);
    if (out < 0 || Sys(SYS_dup2, out, 1) < 0) ChildFail(a, kStdout);
    int err = a->stderr_fd >= 0 ? a->stderr_fd
              : a->stderr_path  ? OpenOutput(a->stderr_path, a->output_flags)
                                : out;
    if (err < 0 || Sys(SYS_dup2, err, 2) < 0) ChildFail(a, kStderr);
  }
  Sys(SYS_execve, reinterpret_cast<long>(a->path), reinterpret_cast<long>(a->argv),
      reinterpret_cast<long>(a->envp));
  ChildFail(a, kExec);
}

void CloseAllBut(const int* keep, int n) {
  // `keep` ascending; close_range needs Linux 5.9, older kernels get the loop.
  int from = 3;
  for (int i = 0; i <= n; ++i) {
    int to = i < n ? keep[i] - 1 : 65535;
    if (to >= from && Sys(SYS_close_range, from, to, 0) != 0) {
      for (int fd = from; fd <= to && fd < 4096; ++fd) Sys(SYS_close, fd);
    }
    if (i < n) from = keep[i] + 1;
  }
}

// Kills the keeper's children (orphans of the job reparent to it, a subreaper) and reaps them,
// until none is left. Raw system calls only.
void KillChildrenUntilNone() {
  const long self = Sys(SYS_getpid);
  char path[64] = "/proc/self/task/";
  int len = 16;
  char digits[16];
  int d = 0;
  for (long v = self; v > 0; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
  while (d) path[len++] = digits[--d];
  const char tail[] = "/children";
  for (char ch : tail) path[len++] = ch;  // copies the terminating NUL too
  for (int round = 0; round < 1000; ++round) {
    int fd = static_cast<int>(
        Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), O_RDONLY | O_CLOEXEC));
    if (fd < 0) return;  // no CONFIG_PROC_CHILDREN: the agent's cleanup has to do
    {
      char buf[4096];
      long n = Sys(SYS_read, fd, reinterpret_cast<long>(buf), sizeof buf);
      Sys(SYS_close, fd);
      long pid = 0;
      for (long i = 0; i < n; ++i) {
        if (buf[i] >= '0' && buf[i] <= '9') {
          pid = pid * 10 + (buf[i] - '0');
        } else if (pid > 0) {
          Sys(SYS_kill, -pid, SIGKILL);  // its group, when it leads one
          Sys(SYS_kill, pid, SIGKILL);
          pid = 0;
        }
      }
    }
    // Reap what died; a process stuck in the kernel must not hold the job's end forever.
    int status;
    long r;
    while ((r = Sys(SYS_wait4, -1, reinterpret_cast<long>(&status), WNOHANG, 0)) > 0) {
    }
    if (r < 0 && errno == ECHILD) return;
    struct timespec ts {
      0, 10'000'000
    };
    Sys(SYS_nanosleep, reinterpret_cast<long>(&ts), 0);
  }
}

MUSTER_CHILD_CODE int KeeperMain(void* arg) {
  auto* k = static_cast<KeeperArgs*>(arg);
  ChildArgs* c = k->child;
  // Its own session, deaf to the signals aimed at the agent's terminal or at the job's process
  // group: only SIGKILL ends a keeper before its task.
  Sys(SYS_setsid);
  // Processes of the job that daemonize (setsid, double fork) become the keeper's children
  // instead of init's: the agent finds them under it, and the keeper ends them with the job.
  Sys(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1);
  KernelSigaction ign{SIG_IGN, 0, nullptr, 0};
  for (long sig : {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2}) {
    Sys(SYS_rt_sigaction, sig, reinterpret_cast<long>(&ign), 0, 8);
  }
  uint64_t empty = 0;
  Sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&empty), 0, 8);
  // The agent's sockets and files must not live on in the keeper (a restarted agent could not
  // bind its step port while a keeper held the old one).
  int keep[5], n = 0;
  for (int fd : {k->report_fd, c->stdout_fd, c->stderr_fd, c->cgroup_procs_fd, k->exit_dir_fd}) {
    if (fd < 3) continue;
    int i = n++;
    while (i > 0 && keep[i - 1] > fd) {
      keep[i] = keep[i - 1];
      --i;
    }
    keep[i] = fd;
  }
  CloseAllBut(keep, n);
  // Nor the agent's stdout and stderr (a terminal, a pipe a supervisor waits on).
  int null_fd = static_cast<int>(
      Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDWR | O_CLOEXEC));
  if (null_fd >= 0) {
    for (int fd = 0; fd < 3; ++fd) {
      if (fd != c->stdout_fd && fd != c->stderr_fd) Sys(SYS_dup2, null_fd, fd);
    }
    if (null_fd > 2) Sys(SYS_close, null_fd);
  }
  long pid = -1;
  for (int attempt = 0;; ++attempt) {
    c->stage = 0;
    c->err = 0;
    pid = ::clone(ChildMain, k->task_stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, c);
    if (pid < 0 || c->stage != kExec || c->err != ETXTBSY || attempt >= 20) break;
    int status;
    Sys(SYS_wait4, pid, reinterpret_cast<long>(&status), 0, 0);
    struct timespec ts {
      0, 5'000'000
    };
    Sys(SYS_nanosleep, reinterpret_cast<long>(&ts), 0);
  }
  KeeperReport r{static_cast<int32_t>(pid), pid < 0 ? -1 : c->stage, pid < 0 ? errno : c->err};
  Sys(SYS_write, k->report_fd, reinterpret_cast<long>(&r), sizeof r);
  Sys(SYS_close, k->report_fd);
  if (pid < 0 || c->stage != 0) {
    int status;
    if (pid > 0) Sys(SYS_wait4, pid, reinterpret_cast<long>(&status), 0, 0);
    Sys(SYS_exit_group, 127);
  }
  int status = 0;
  while (Sys(SYS_wait4, pid, reinterpret_cast<long>(&status), 0, 0) < 0 && errno == EINTR) {
  }
  // "<status>\n", written to a temporary name and renamed: a reader sees all of it or nothing.
  // No fsync: the record must outlive the agent, not the machine (a node that crashed lost its
  // jobs anyway, and the controller requeues them).
  char buf[16];
  int len = 0;
  unsigned v = static_cast<unsigned>(status);
  char digits[12];
  int d = 0;
  do {
    digits[d++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  while (d) buf[len++] = digits[--d];
  buf[len++] = '\n';
  Sys(SYS_unlinkat, k->exit_dir_fd, reinterpret_cast<long>(k->exit_tmp), 0);
  int fd = static_cast<int>(Sys(SYS_openat, k->exit_dir_fd, reinterpret_cast<long>(k->exit_tmp),
                                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd >= 0) {
    Sys(SYS_write, fd, reinterpret_cast<long>(buf), len);
    Sys(SYS_close, fd);
    Sys(SYS_renameat, k->exit_dir_fd, reinterpret_cast<long>(k->exit_tmp), k->exit_dir_fd,
        reinterpret_cast<long>(k->exit_name));
  }
  // The script is over, so is the job here: whatever it left behind (now our children) ends.
  KillChildrenUntilNone();
  Sys(SYS_exit_group, 0);
  return 0;
}

// argv[0] looked up in the task's PATH (the agent's own PATH is not the job's).
std::string ResolveProgram(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& kv : env) {
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t colon = path.find(':', start);
    std::string dir =
        path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return name;  // execve fails with ENOENT, which is the message the user needs
}

// A started child (`pid`, our child; `task` its process group): with the pidfd its end is
// watched through. Without one the child is killed again, so nothing runs unwatched.
Result<Spawned> Started(pid_t pid, pid_t task) {
  Spawned s;
  s.pid = pid;
  s.task_pid = task;
  s.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (s.pidfd < 0) {
    int err = errno;
    ::kill(-task, SIGKILL);
    int status;
    ::waitpid(pid, &status, 0);
    return ErrnoStatus("pidfd_open (needs Linux 5.3 or newer)", err);
  }
  return s;
}

Status StageError(const SpawnSpec& spec, int stage, int err) {
  std::string why = std::strerror(err);
  switch (stage) {
    case kChdir:
      return FailedPrecondition("cannot change to directory " + spec.cwd + ": " + why);
    case kStdin:
      return FailedPrecondition((spec.tty_path.empty() ? "cannot open input file " + spec.stdin_path
                                                       : "cannot open terminal " + spec.tty_path) +
                                ": " + why);
    case kStdout:
      return FailedPrecondition("cannot open output file " + spec.stdout_path + ": " + why);
    case kStderr:
      return FailedPrecondition("cannot open error file " + spec.stderr_path + ": " + why);
    case kExec:
      return FailedPrecondition("execve(" + spec.argv[0] + "): " + why);
    case kCgroup:
      return Internal("cannot move the process into the job's cgroup: " + why);
    case kGroups:
    case kGid:
    case kUid:
      return PermissionDenied("cannot switch to uid " + std::to_string(spec.uid) + ": " + why);
    default:
      return Internal("cannot start the process (stage " + std::to_string(stage) + "): " + why);
  }
}

// The task under a keeper: the keeper is forked (its own copy of memory; it outlives this call),
// starts the task the same way Spawn does and reports the task's pid or failure through a pipe.
Result<Spawned> SpawnKept(const SpawnSpec& spec, ChildArgs& a) {
  const size_t slash = spec.exit_file.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : spec.exit_file.substr(0, slash + 1);
  const std::string name = spec.exit_file.substr(slash == std::string::npos ? 0 : slash + 1);
  const std::string tmp = name + ".tmp";
  if (name.empty() || name == "." || name == "..") {
    return InvalidArgument("no file name in the exit record's path " + spec.exit_file);
  }
  // Root writes the record as the job ends: only where nobody else could have placed a link.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) return ErrnoStatus("cannot open " + dir, errno);
  struct stat dst {};
  if (::fstat(dir_fd, &dst) != 0 || dst.st_uid != ::geteuid() ||
      (dst.st_mode & (S_IWGRP | S_IWOTH))) {
    ::close(dir_fd);
    return PermissionDenied("refusing to keep the job's exit record in " + dir +
                            ": another user could write there");
  }
  ::unlinkat(dir_fd, name.c_str(), 0);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    ::close(dir_fd);
    return ErrnoStatus("pipe", errno);
  }
  constexpr size_t kStack = 64 * 1024;
  void* stacks = ::mmap(nullptr, 2 * kStack, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stacks == MAP_FAILED) {
    ::close(report[0]);
    ::close(report[1]);
    ::close(dir_fd);
    return ErrnoStatus("mmap", errno, StatusCode::kResourceExhausted);
  }
  KeeperArgs k{&a,       static_cast<char*>(stacks) + 2 * kStack, dir_fd, tmp.c_str(), name.c_str(),
               report[1]};
  pid_t keeper = -1;
  if (spec.cgroup_fd >= 0) {
    // The keeper starts in the job's cgroup and the task inherits it: nothing is moved later.
    keeper = static_cast<pid_t>(ForkIntoCgroup(spec.cgroup_fd, false));
    if (keeper == 0) KeeperMain(&k);                              // never returns
    if (keeper < 0) a.cgroup_procs_fd = ProcsFd(spec.cgroup_fd);  // old kernel: the task moves
  }
  if (keeper < 0) keeper = ::clone(KeeperMain, static_cast<char*>(stacks) + kStack, SIGCHLD, &k);
  int clone_err = errno;
  if (a.cgroup_procs_fd >= 0) ::close(a.cgroup_procs_fd);
  ::munmap(stacks, 2 * kStack);  // the keeper has its own copy
  ::close(report[1]);
  ::close(dir_fd);  // ditto
  if (keeper < 0) {
    ::close(report[0]);
    return ErrnoStatus("clone", clone_err, StatusCode::kResourceExhausted);
  }
  KeeperReport r{-1, -1, 0};
  ssize_t n;
  do {
    n = ::read(report[0], &r, sizeof r);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n != static_cast<ssize_t>(sizeof r) || r.pid < 0 || r.stage != 0) {
    int status;
    ::waitpid(keeper, &status, 0);
    if (n != static_cast<ssize_t>(sizeof r))
      return Internal("the job's keeper process died at start");
    if (r.pid < 0) return ErrnoStatus("clone", r.err, StatusCode::kResourceExhausted);
    return StageError(spec, r.stage, r.err);
  }
  return Started(keeper, r.pid);
}

// The child created directly in its cgroup by a vfork-like clone3: sharing the agent's memory on
// x86-64 (as Spawn does), elsewhere with its own copy (a failure then comes back through a pipe).
// UNIMPLEMENTED when the kernel lacks clone3 or CLONE_INTO_CGROUP: the caller falls back to
// moving the child in.
Result<Spawned> SpawnIntoCgroup(const SpawnSpec& spec, ChildArgs& a) {
#if defined(__x86_64__)
  // Sharing memory as Spawn does, so no copy of the agent's address space is made per task.
  constexpr size_t kStack = 64 * 1024;
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return ErrnoStatus("mmap", errno, StatusCode::kResourceExhausted);
  long pid = -1;
  for (int attempt = 0;; ++attempt) {
    a.stage = 0;
    a.err = 0;
    struct clone_args args {};
    args.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.stack = reinterpret_cast<uint64_t>(stack);
    args.stack_size = kStack;
    args.cgroup = static_cast<uint64_t>(spec.cgroup_fd);
    pid = Clone3WithVm(&args, ChildMain, &a);
    if (pid < 0 || a.stage != kExec || a.err != ETXTBSY || attempt >= 20) break;
    int status;
    ::waitpid(static_cast<pid_t>(pid), &status, 0);
    ::usleep(5000);
  }
  ::munmap(stack, kStack);
  if (pid < 0) {
    if (-pid == ENOSYS || -pid == E2BIG || -pid == EINVAL) return Unimplemented("clone3");
    return ErrnoStatus("clone3", static_cast<int>(-pid), StatusCode::kResourceExhausted);
  }
  if (a.stage != 0) {
    int status;
    ::waitpid(static_cast<pid_t>(pid), &status, 0);
    return StageError(spec, a.stage, a.err);
  }
  return Started(static_cast<pid_t>(pid), static_cast<pid_t>(pid));
#else
  for (int attempt = 0;; ++attempt) {
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
    a.report_fd = report[1];
    long pid = ForkIntoCgroup(spec.cgroup_fd, /*vfork=*/true);
    if (pid == 0) ChildMain(&a);  // never returns: exec or exit
    int clone_err = errno;
    a.report_fd = -1;
    ::close(report[1]);
    if (pid < 0) {
      ::close(report[0]);
      if (clone_err == ENOSYS || clone_err == E2BIG || clone_err == EINVAL) {
        return Unimplemented("clone3 into a cgroup");
      }
      return ErrnoStatus("clone3", clone_err, StatusCode::kResourceExhausted);
    }
    int32_t r[2] = {0, 0};
    ssize_t n;
    do {
      n = ::read(report[0], r, sizeof r);  // the child has exec'd (EOF) or failed
    } while (n < 0 && errno == EINTR);
    ::close(report[0]);
    if (n == static_cast<ssize_t>(sizeof r)) {
      int status;
      ::waitpid(static_cast<pid_t>(pid), &status, 0);
      if (r[0] == kExec && r[1] == ETXTBSY && attempt < 20) {  // see Spawn
        ::usleep(5000);
        continue;
      }
      return StageError(spec, r[0], r[1]);
    }
    return Started(static_cast<pid_t>(pid), static_cast<pid_t>(pid));
  }
#endif
}

}  // namespace

std::vector<gid_t> GroupsOf(const std::string& user, gid_t gid) {
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  while (::getgrouplist(user.c_str(), gid, groups.data(), &n) < 0) {
    if (n > 65536) return {gid};
    groups.resize(static_cast<size_t>(n));
  }
  groups.resize(static_cast<size_t>(n));
  return groups;
}

void DecodeWaitStatus(int status, int* exit_code, int* signal) {
  *exit_code = 0;
  *signal = 0;
  if (WIFEXITED(status)) *exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) *signal = WTERMSIG(status);
}

Result<int> ReadExitFile(const std::string& exit_file) {
  int fd = ::open(exit_file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return NotFound("no exit status recorded in " + exit_file);
  char buf[32] = {0};
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  char* end = nullptr;
  long v = n > 0 ? std::strtol(buf, &end, 10) : -1;
  if (n <= 0 || end == buf || v < 0) return DataLoss("corrupt exit status in " + exit_file);
  return static_cast<int>(v);
}

Result<Spawned> Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("nothing to run");
  std::vector<char*> argv, envp;
  for (const auto& x : spec.argv) argv.push_back(const_cast<char*>(x.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string path = ResolveProgram(spec.argv[0], spec.env);
  const bool same_file = spec.stderr_path.empty() || spec.stderr_path == spec.stdout_path;

  ChildArgs a;
  a.path = path.c_str();
  a.argv = argv.data();
  a.envp = envp.data();
  a.cwd = spec.cwd.c_str();
  a.change_user = spec.change_user;
  a.uid = spec.uid;
  a.gid = spec.gid;
  a.groups = spec.groups.data();
  a.ngroups = spec.groups.size();
  a.stdout_path = spec.stdout_path.c_str();
  a.stderr_path = same_file ? nullptr : spec.stderr_path.c_str();
  a.stdout_fd = spec.stdout_fd;
  a.stderr_fd = spec.stderr_fd;
  a.output_flags = O_WRONLY | O_CREAT | (spec.append_output ? O_APPEND : 0) |
                   (spec.truncate_output ? O_TRUNC : 0);
  a.stdin_fd = spec.stdin_fd;
  a.stdin_path = spec.stdin_path.empty() ? nullptr : spec.stdin_path.c_str();
  a.tty_path = spec.tty_path.empty() ? nullptr : spec.tty_path.c_str();
  a.cgroup_procs_fd = -1;
  if (!spec.exit_file.empty()) return SpawnKept(spec, a);
  if (spec.cgroup_fd >= 0) {
    auto in_cgroup = SpawnIntoCgroup(spec, a);
    if (in_cgroup.ok() || in_cgroup.status().code() != StatusCode::kUnimplemented) {
      return in_cgroup;
    }
    a.cgroup_procs_fd = ProcsFd(spec.cgroup_fd);  // old kernel: the child moves itself in
  }

  constexpr size_t kStack = 64 * 1024;
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return ErrnoStatus("mmap", errno, StatusCode::kResourceExhausted);
  pid_t pid = -1;
  for (int attempt = 0;; ++attempt) {
    a.stage = 0;
    a.err = 0;
    // The parent thread waits (CLONE_VFORK) until the child has exec'd or exited.
    pid = ::clone(ChildMain, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD,
                  &a);
    if (pid < 0) break;
    // ETXTBSY: another thread's child briefly inherited a write handle on the program (a freshly
    // written batch script) and has not exec'd yet. It goes away by itself; try again.
    if (a.stage != kExec || a.err != ETXTBSY || attempt >= 20) break;
    int status;
    ::waitpid(pid, &status, 0);
    ::usleep(5000);
  }
  int clone_err = errno;
  ::munmap(stack, kStack);
  if (a.cgroup_procs_fd >= 0) ::close(a.cgroup_procs_fd);
  if (pid < 0) return ErrnoStatus("clone", clone_err, StatusCode::kResourceExhausted);
  if (a.stage != 0) {
    int status;
    ::waitpid(pid, &status, 0);
    return StageError(spec, a.stage, a.err);
  }
  return Started(pid, pid);
}

}  // namespace muster::agent
