#include "launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace muster::agent {
namespace {

enum Stage { kSetsid = 1, kGroups, kGid, kUid, kChdir, kStdin, kStdout, kStderr, kExec };

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
  volatile int stage = 0;
  volatile int err = 0;
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

[[noreturn]] void ChildFail(ChildArgs* a, int stage) {
  a->err = errno;
  a->stage = stage;
  ::syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

int OpenOutput(const char* path) {
  return static_cast<int>(Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path),
                              O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
}

int ChildMain(void* arg) {
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
  int in = static_cast<int>(
      Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDONLY | O_CLOEXEC));
  if (in < 0 || Sys(SYS_dup2, in, 0) < 0) ChildFail(a, kStdin);
  int out = a->stdout_fd >= 0 ? a->stdout_fd : OpenOutput(a->stdout_path);
  if (out < 0 || Sys(SYS_dup2, out, 1) < 0) ChildFail(a, kStdout);
  int err = a->stderr_fd >= 0 ? a->stderr_fd : a->stderr_path ? OpenOutput(a->stderr_path) : out;
  if (err < 0 || Sys(SYS_dup2, err, 2) < 0) ChildFail(a, kStderr);
  Sys(SYS_execve, reinterpret_cast<long>(a->path), reinterpret_cast<long>(a->argv),
      reinterpret_cast<long>(a->envp));
  ChildFail(a, kExec);
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
  if (pid < 0) return ErrnoStatus("clone", clone_err, StatusCode::kResourceExhausted);
  if (a.stage != 0) {
    int status;
    ::waitpid(pid, &status, 0);
    std::string why = std::strerror(a.err);
    switch (a.stage) {
      case kChdir:
        return FailedPrecondition("cannot change to directory " + spec.cwd + ": " + why);
      case kStdout:
        return FailedPrecondition("cannot open output file " + spec.stdout_path + ": " + why);
      case kStderr:
        return FailedPrecondition("cannot open error file " + spec.stderr_path + ": " + why);
      case kExec:
        return FailedPrecondition("execve(" + spec.argv[0] + "): " + why);
      case kGroups:
      case kGid:
      case kUid:
        return PermissionDenied("cannot switch to uid " + std::to_string(spec.uid) + ": " + why);
      default:
        return Internal("cannot start the process (stage " + std::to_string(a.stage) + "): " + why);
    }
  }
  Spawned s;
  s.pid = pid;
  s.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (s.pidfd < 0) {
    int err = errno;
    ::kill(-pid, SIGKILL);
    int status;
    ::waitpid(pid, &status, 0);
    return ErrnoStatus("pidfd_open (needs Linux 5.3 or newer)", err);
  }
  return s;
}

}  // namespace muster::agent
