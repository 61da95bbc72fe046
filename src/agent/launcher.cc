#include "launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace muster::agent {
namespace {

// What the child reports through the close-on-exec pipe when it cannot exec.
struct ChildError {
  int stage;
  int err;
};
enum Stage { kSetsid = 1, kGroups, kGid, kUid, kChdir, kStdin, kStdout, kStderr, kExec };

[[noreturn]] void ChildFail(int fd, int stage) {
  ChildError e{stage, errno};
  ssize_t ignored = ::write(fd, &e, sizeof e);
  (void)ignored;
  _exit(127);
}

int OpenOutput(const std::string& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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
  // Everything the child needs is prepared here: after fork it may only make system calls.
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const bool same_file = spec.stderr_path.empty() || spec.stderr_path == spec.stdout_path;

  int errpipe[2];
  if (::pipe2(errpipe, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);

  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(errpipe[0]);
    ::close(errpipe[1]);
    return ErrnoStatus("fork", err, StatusCode::kResourceExhausted);
  }
  if (pid == 0) {
    int efd = errpipe[1];
    // Undo what the agent set up for itself: signal mask and ignored signals.
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    for (int s : {SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP}) ::signal(s, SIG_DFL);
    if (::setsid() < 0) ChildFail(efd, kSetsid);
    if (spec.change_user) {
      if (::setgroups(spec.groups.size(), spec.groups.data()) != 0) ChildFail(efd, kGroups);
      if (::setgid(spec.gid) != 0) ChildFail(efd, kGid);
      if (::setuid(spec.uid) != 0) ChildFail(efd, kUid);
    }
    if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) ChildFail(efd, kChdir);
    int in = ::open("/dev/null", O_RDONLY);
    if (in < 0 || ::dup2(in, 0) < 0) ChildFail(efd, kStdin);
    int out = spec.stdout_fd >= 0 ? spec.stdout_fd : OpenOutput(spec.stdout_path);
    if (out < 0 || ::dup2(out, 1) < 0) ChildFail(efd, kStdout);
    int err = spec.stderr_fd >= 0 ? spec.stderr_fd
              : same_file     ? out
                              : OpenOutput(spec.stderr_path);
    if (err < 0 || ::dup2(err, 2) < 0) ChildFail(efd, kStderr);
    ::execvpe(argv[0], argv.data(), envp.data());
    ChildFail(efd, kExec);
  }
  ::close(errpipe[1]);
  ChildError ce{};
  ssize_t n;
  do {
    n = ::read(errpipe[0], &ce, sizeof ce);
  } while (n < 0 && errno == EINTR);
  ::close(errpipe[0]);
  if (n == static_cast<ssize_t>(sizeof ce)) {
    int status;
    ::waitpid(pid, &status, 0);
    std::string why = std::strerror(ce.err);
    switch (ce.stage) {
      case kChdir: return FailedPrecondition("cannot change to directory " + spec.cwd + ": " + why);
      case kStdout:
        return FailedPrecondition("cannot open output file " + spec.stdout_path + ": " + why);
      case kStderr:
        return FailedPrecondition("cannot open error file " + spec.stderr_path + ": " + why);
      case kExec: return FailedPrecondition("execve(" + spec.argv[0] + "): " + why);
      case kGroups: case kGid: case kUid:
        return PermissionDenied("cannot switch to uid " + std::to_string(spec.uid) + ": " + why);
      default: return Internal("cannot start the process (stage " + std::to_string(ce.stage) + "): " + why);
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
