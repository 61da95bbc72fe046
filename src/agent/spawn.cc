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
#include <string>
#include <vector>

#include "muster/keeper/child.h"
#include "muster/keeper/keeper_spec.h"
#include "muster/keeper/task_spec.h"

namespace muster::agent {
namespace {

using keeper::ChildArgs;
using keeper::ChildMain;
using keeper::KeeperArgs;
using keeper::KeeperMain;
using keeper::KeeperReport;
using namespace keeper::stages;

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
constexpr bool kCanCloneVmIntoCgroup = true;
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

// A vfork-like child (sharing our memory, on `stack`) created in the cgroup: fn(arg) must exec
// or exit. The child's pid, or -errno.
long CloneVmIntoCgroup(void* stack, size_t stack_size, int cgroup_fd, int (*fn)(void*), void* arg) {
  struct clone_args args {};
  args.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<uint64_t>(stack);
  args.stack_size = stack_size;
  args.cgroup = static_cast<uint64_t>(cgroup_fd);
  return Clone3WithVm(&args, fn, arg);
}
#else
constexpr bool kCanCloneVmIntoCgroup = false;
#endif

int ProcsFd(int cgroup_fd) { return ::openat(cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC); }

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

// The task as the child starts it: the program looked up, the output flags, "" as none.
keeper::TaskSpec TaskOf(const SpawnSpec& spec) {
  keeper::TaskSpec t;
  t.path = ResolveProgram(spec.argv[0], spec.env);
  t.argv = spec.argv;
  t.env = spec.env;
  t.cwd = spec.cwd;
  t.change_user = spec.change_user;
  t.uid = spec.uid;
  t.gid = spec.gid;
  t.groups.assign(spec.groups.begin(), spec.groups.end());
  t.stdout_path = spec.stdout_path;
  if (!spec.stderr_path.empty() && spec.stderr_path != spec.stdout_path) {
    t.stderr_path = spec.stderr_path;
  }
  if (!spec.stdin_path.empty()) t.stdin_path = spec.stdin_path;
  if (!spec.tty_path.empty()) t.tty_path = spec.tty_path;
  t.stdin_fd = spec.stdin_fd;
  t.stdout_fd = spec.stdout_fd;
  t.stderr_fd = spec.stderr_fd;
  t.output_flags = O_WRONLY | O_CREAT | (spec.append_output ? O_APPEND : 0) |
                   (spec.truncate_output ? O_TRUNC : 0);
  for (const SpawnSpec::Limit& l : spec.limits) t.limits.push_back({l.resource, l.soft, l.hard});
  for (uint32_t cpu : spec.cpus) {
    if (t.cpu_mask.size() <= cpu / 64) t.cpu_mask.resize(cpu / 64 + 1, 0);
    t.cpu_mask[cpu / 64] |= uint64_t{1} << (cpu % 64);
  }
  return t;
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
    case kPmi:
      return Internal("cannot hand the task its PMI socket: " + why);
    case kAffinity:
      return FailedPrecondition("cannot bind the task to its CPUs (--cpu-bind): " + why);
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

// The keeper as a copy of the agent (a fork without CLONE_VM): what runs without muster-keeper.
// Returns its pid, or -1 with errno.
pid_t ForkKeeper(const SpawnSpec& spec, ChildArgs& a, int dir_fd, const std::string& tmp,
                 const std::string& name, int report_fd) {
  constexpr size_t kStack = 64 * 1024;
  void* stacks = ::mmap(nullptr, 2 * kStack, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stacks == MAP_FAILED) return -1;
  KeeperArgs k{&a,       static_cast<char*>(stacks) + 2 * kStack, dir_fd, tmp.c_str(), name.c_str(),
               report_fd};
  pid_t keeper = -1;
  if (spec.cgroup_fd >= 0) {
    // The keeper starts in the job's cgroup and the task inherits it: nothing is moved later.
    keeper = static_cast<pid_t>(ForkIntoCgroup(spec.cgroup_fd, false));
    if (keeper == 0) KeeperMain(&k);                              // never returns
    if (keeper < 0) a.cgroup_procs_fd = ProcsFd(spec.cgroup_fd);  // old kernel: the task moves
  }
  if (keeper < 0) keeper = ::clone(KeeperMain, static_cast<char*>(stacks) + kStack, SIGCHLD, &k);
  const int clone_err = errno;
  if (a.cgroup_procs_fd >= 0) ::close(a.cgroup_procs_fd);
  ::munmap(stacks, 2 * kStack);  // the keeper has its own copy
  errno = clone_err;
  return keeper;
}

// The keeper as the muster-keeper program, started like a task (sharing the agent's memory until
// its execve, in the job's cgroup from the start) with what to run in a memfd. Returns its pid.
Result<pid_t> ExecKeeper(const SpawnSpec& spec, const keeper::TaskSpec& task, int dir_fd,
                         const std::string& name, int report_fd) {
  keeper::KeeperSpec ks;
  static_cast<keeper::TaskSpec&>(ks) = task;
  ks.report_fd = report_fd;
  ks.exit_dir_fd = dir_fd;
  ks.exit_name = name;
  const bool into_cgroup = spec.cgroup_fd >= 0 && kCanCloneVmIntoCgroup;
  if (spec.cgroup_fd >= 0 && !into_cgroup) {
    ks.cgroup_procs_fd = ProcsFd(spec.cgroup_fd);  // the task moves itself in
  }
  struct Fds {
    int spec = -1, procs = -1;
    ~Fds() {
      if (spec >= 0) ::close(spec);
      if (procs >= 0) ::close(procs);
    }
  } fds;
  fds.procs = ks.cgroup_procs_fd;
  fds.spec = ::memfd_create("muster-keeper-spec", MFD_CLOEXEC);
  if (fds.spec < 0) return ErrnoStatus("memfd_create", errno, StatusCode::kResourceExhausted);
  const std::string bytes = keeper::EncodeKeeperSpec(ks);
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fds.spec, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus("writing the keeper's spec", errno);
    done += static_cast<size_t>(n);
  }
  std::vector<int> inherit = {report_fd, dir_fd, fds.spec};
  for (int fd : {ks.stdin_fd, ks.stdout_fd, ks.stderr_fd, ks.cgroup_procs_fd}) {
    if (fd >= 0) inherit.push_back(fd);
  }
  const std::string spec_arg = std::to_string(fds.spec);
  char* argv[] = {const_cast<char*>(spec.keeper_program.c_str()),
                  const_cast<char*>(spec_arg.c_str()), nullptr};
  char* envp[] = {nullptr};  // nothing of the job's environment reaches root's keeper
  keeper::ExecArgs e{spec.keeper_program.c_str(), argv, envp, inherit.data(),
                     static_cast<int>(inherit.size())};
  constexpr size_t kStack = 64 * 1024;
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return ErrnoStatus("mmap", errno, StatusCode::kResourceExhausted);
  long pid = -1;
  int clone_err = 0;
#if defined(__x86_64__)
  if (into_cgroup) {
    pid = CloneVmIntoCgroup(stack, kStack, spec.cgroup_fd, keeper::ExecMain, &e);
    if (pid < 0) clone_err = static_cast<int>(-pid);
  }
#endif
  if (!into_cgroup) {
    pid = ::clone(keeper::ExecMain, static_cast<char*>(stack) + kStack,
                  CLONE_VM | CLONE_VFORK | SIGCHLD, &e);
    if (pid < 0) clone_err = errno;
  }
  ::munmap(stack, kStack);
  if (pid < 0) {
    if (into_cgroup && (clone_err == ENOSYS || clone_err == E2BIG || clone_err == EINVAL)) {
      return Unimplemented("clone3 into a cgroup");
    }
    return ErrnoStatus("clone", clone_err, StatusCode::kResourceExhausted);
  }
  if (e.err != 0) {
    int status;
    ::waitpid(static_cast<pid_t>(pid), &status, 0);
    return Internal("cannot start the keeper " + spec.keeper_program + ": " + std::strerror(e.err));
  }
  return static_cast<pid_t>(pid);
}

// The task under a keeper, which outlives this call: it starts the task the same way Spawn does,
// reports the task's pid or failure through a pipe, waits and records how the task ended.
Result<Spawned> SpawnKept(const SpawnSpec& spec, const keeper::TaskSpec& task, ChildArgs& a) {
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
  Result<pid_t> started = Unimplemented("no keeper program");
  if (!spec.keeper_program.empty()) started = ExecKeeper(spec, task, dir_fd, name, report[1]);
  if (!started.ok() && started.status().code() == StatusCode::kUnimplemented) {
    pid_t pid = ForkKeeper(spec, a, dir_fd, tmp, name, report[1]);
    started = pid >= 0 ? Result<pid_t>(pid)
                       : Result<pid_t>(ErrnoStatus("clone", errno, StatusCode::kResourceExhausted));
  }
  ::close(report[1]);
  ::close(dir_fd);  // the keeper has its own
  if (!started.ok()) {
    ::close(report[0]);
    return started.status();
  }
  const pid_t keeper = *started;
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
    pid = CloneVmIntoCgroup(stack, kStack, spec.cgroup_fd, ChildMain, &a);
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
  const keeper::TaskSpec task = TaskOf(spec);
  keeper::ChildArrays arrays;
  ChildArgs a;
  keeper::FillChildArgs(task, &arrays, &a);
  a.pmi_fd = spec.pmi_fd;
  if (!spec.exit_file.empty()) {
    if (spec.pmi_fd >= 0) return InvalidArgument("a kept process has no PMI socket");
    return SpawnKept(spec, task, a);
  }
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
