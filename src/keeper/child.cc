#include "muster/keeper/child.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>

namespace muster::keeper {
namespace {

using namespace stages;

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

// Default dispositions first (a signal arriving in a child that shares the agent's memory must
// not run the agent's handler), then an empty mask.
MUSTER_CHILD_CODE void ResetSignals() {
  KernelSigaction dfl{SIG_DFL, 0, nullptr, 0};
  for (long sig = 1; sig < 65; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    Sys(SYS_rt_sigaction, sig, reinterpret_cast<long>(&dfl), 0, 8);
  }
  uint64_t empty = 0;
  Sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&empty), 0, 8);
}

// Opened without blocking, then made blocking for the task: the agent waits for this child's
// report, and a FIFO with nobody at its other end (sbatch --input=FIFO) would otherwise hold
// that wait, and the agent's heartbeats with it, forever. An output FIFO without a reader fails
// at once (ENXIO) instead.
int OpenUnblocked(const char* path, int flags) {
  const long fd =
      Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), flags | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) return -1;
  const long fl = Sys(SYS_fcntl, fd, F_GETFL);
  if (fl < 0 || Sys(SYS_fcntl, fd, F_SETFL, fl & ~O_NONBLOCK) < 0) return -1;
  return static_cast<int>(fd);
}

int OpenOutput(const char* path, int flags) { return OpenUnblocked(path, flags); }

int OpenRead(const char* path) { return OpenUnblocked(path, O_RDONLY); }

}  // namespace

MUSTER_CHILD_CODE int ExecMain(void* arg) {
  auto* a = static_cast<ExecArgs*>(arg);
  ResetSignals();
  for (int i = 0; i < a->ninherit; ++i) {
    if (Sys(SYS_fcntl, a->inherit_fds[i], F_SETFD, 0) != 0) {
      a->err = errno;
      Sys(SYS_exit_group, 127);
    }
  }
  Sys(SYS_execve, reinterpret_cast<long>(a->path), reinterpret_cast<long>(a->argv),
      reinterpret_cast<long>(a->envp));
  a->err = errno;
  Sys(SYS_exit_group, 127);
  return 127;
}

// Not instrumented by the sanitizers: the child shares the agent's memory on a 64 KiB stack
// until it execs, and AddressSanitizer's bookkeeping (its no-return hook inspects the signal
// stack) does not belong in it.

MUSTER_CHILD_CODE int ChildMain(void* arg) {
  auto* a = static_cast<ChildArgs*>(arg);
  // Default dispositions and an empty mask: the job must not inherit the agent's signal setup.
  ResetSignals();
  if (Sys(SYS_setsid) < 0) ChildFail(a, kSetsid);
  // Into the job's cgroup before anything of the user's runs ("0" moves the writer).
  if (a->cgroup_procs_fd >= 0 &&
      Sys(SYS_write, a->cgroup_procs_fd, reinterpret_cast<long>("0"), 1) != 1) {
    ChildFail(a, kCgroup);
  }
  // Its CPUs (srun --cpu-bind), inside the cgroup's cpuset, before anything of the user's runs.
  if (a->cpu_mask && Sys(SYS_sched_setaffinity, 0, static_cast<long>(a->cpu_mask_bytes),
                         reinterpret_cast<long>(a->cpu_mask)) != 0) {
    ChildFail(a, kAffinity);
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
  // After stdio, which may have used fd kPmiFd on the way (those are close-on-exec copies). A
  // dup2 onto itself would leave close-on-exec set.
  if (a->pmi_fd >= 0) {
    const long r =
        a->pmi_fd == kPmiFd ? Sys(SYS_fcntl, kPmiFd, F_SETFD, 0) : Sys(SYS_dup2, a->pmi_fd, kPmiFd);
    if (r < 0) ChildFail(a, kPmi);
  }
  // As the user now: the kernel lets it lower its limits, never raise a hard one.
  for (size_t i = 0; i < a->nlimits; ++i) {
    uint64_t lim[2] = {a->limits[i].soft, a->limits[i].hard};
    Sys(SYS_prlimit64, 0, a->limits[i].resource, reinterpret_cast<long>(lim), 0);
  }
  Sys(SYS_execve, reinterpret_cast<long>(a->path), reinterpret_cast<long>(a->argv),
      reinterpret_cast<long>(a->envp));
  ChildFail(a, kExec);
}

namespace {

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

}  // namespace

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

}  // namespace muster::keeper
