#include "login_env.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "cgroup.h"
#include "muster/common/strings.h"
#include "spawn.h"

namespace muster::agent {

namespace asio = boost::asio;

namespace {

bool IsName(std::string_view n) {
  if (n.empty() || (n[0] >= '0' && n[0] <= '9')) return false;
  for (char c : n) {
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return false;
  }
  return true;
}

LoginUser UserOf(const v1::JobSpec& spec) {
  LoginUser u;
  u.uid = spec.uid();
  u.gid = spec.gid();
  u.name = spec.user();
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(spec.uid(), &pw, buf.data(), buf.size(), &found) == 0 && found) {
    u.name = pw.pw_name ? pw.pw_name : u.name;
    u.home = pw.pw_dir ? pw.pw_dir : "";
    u.shell = pw.pw_shell ? pw.pw_shell : "";
  }
  if (u.shell.empty()) u.shell = "/bin/sh";
  return u;
}

}  // namespace

uint32_t LoginEnvTimeoutS(const v1::UserEnvRequest& req) {
  if (req.timeout_s() == 0) return kDefaultLoginEnvTimeoutS;
  return std::min(req.timeout_s(), kMaxLoginEnvTimeoutS);
}

std::vector<std::string> ParseLoginEnv(std::string_view output) {
  std::vector<std::string> out;
  // What a profile prints comes before the marker; the environment after it.
  const size_t marker = output.find(kLoginEnvMarker);
  if (marker == std::string_view::npos) return out;
  output.remove_prefix(marker + kLoginEnvMarker.size());
  size_t start = 0;
  while (start < output.size()) {
    size_t nul = output.find('\0', start);
    if (nul == std::string_view::npos) nul = output.size();
    const std::string_view kv = output.substr(start, nul - start);
    start = nul + 1;
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos || !IsName(kv.substr(0, eq))) continue;
    out.emplace_back(kv);
  }
  return out;
}

SpawnSpec LoginEnvSpawn(const LoginUser& user, const std::string& mode) {
  SpawnSpec sp;
  sp.argv.push_back(user.shell);
  if (mode != "S") sp.argv.push_back("-l");
  sp.argv.push_back("-c");
  sp.argv.push_back("echo " + std::string(kLoginEnvMarker.substr(0, kLoginEnvMarker.size() - 1)) +
                    "; exec /usr/bin/env -0");
  sp.env = {"HOME=" + user.home, "USER=" + user.name, "LOGNAME=" + user.name, "SHELL=" + user.shell,
            "PATH=/usr/local/bin:/usr/bin:/bin"};
  sp.cwd = user.home.empty() ? "/" : user.home;
  sp.stderr_path = "/dev/null";
  return sp;
}

void ReadLoginEnv(AgentContext& ctx, const v1::JobSpec& spec, const std::string& cgroup,
                  std::function<void(Result<std::vector<std::string>>)> done) {
  LoginUser user = UserOf(spec);
  if (!ctx.options.login_shell_for_tests.empty()) user.shell = ctx.options.login_shell_for_tests;
  const uint32_t timeout_s = LoginEnvTimeoutS(spec.get_user_env());
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return done(Internal(std::string("pipe: ") + std::strerror(errno)));
  }
  SpawnSpec sp = LoginEnvSpawn(user, spec.get_user_env().mode());
  // As the job's user from the start: the user's shell and profile never run as root.
  sp.change_user = ::geteuid() == 0;
  if (sp.change_user && user.uid == 0) sp.change_user = false;  // root's own job
  sp.uid = user.uid;
  sp.gid = user.gid;
  if (sp.change_user) sp.groups = ctx.launcher.GroupsOf(user.name, user.gid);
  sp.stdout_fd = out[1];
  // In the job's cgroup: its devices, memory and CPUs, and what the profile leaves running ends
  // with the job.
  if (!cgroup.empty()) sp.cgroup_fd = ::open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  auto spawned = ctx.launcher.Spawn(sp);
  if (sp.cgroup_fd >= 0) ::close(sp.cgroup_fd);
  ::close(out[1]);
  if (!spawned.ok()) {
    ::close(out[0]);
    return done(spawned.status().Prepend("cannot run " + user.shell));
  }
  struct Run {
    std::string output;
    bool eof = false, exited = false, timed_out = false, too_long = false, done = false;
    int status = 0;
  };
  auto run = std::make_shared<Run>();
  const pid_t pid = spawned->pid;
  const std::string shell = user.shell;
  auto finish = [run, shell, timeout_s, done] {
    if (!run->eof || !run->exited || run->done) return;
    run->done = true;
    int code = 0, sig = 0;
    DecodeWaitStatus(run->status, &code, &sig);
    if (run->timed_out) {
      return done(DeadlineExceeded(shell + " did not print the environment within " +
                                   std::to_string(timeout_s) + " s"));
    }
    if (run->too_long) {
      return done(ResourceExhausted(shell + " printed more than " +
                                    std::to_string(kMaxLoginEnvBytes) + " bytes"));
    }
    if (code != 0 || sig != 0) {
      return done(Internal(shell + (sig ? " was killed by signal " + std::to_string(sig)
                                        : " exited with code " + std::to_string(code))));
    }
    done(ParseLoginEnv(run->output));
  };
  auto& launcher = ctx.launcher;
  auto sd = std::make_shared<asio::posix::stream_descriptor>(ctx.io, out[0]);
  // On the executor, so tests run the timeout on their virtual clock. Also when the shell has
  // exited but something it left behind holds the pipe open.
  ctx.executor.PostAfter(int64_t{timeout_s} * 1000, [run, pid, sd, cgroup, &launcher] {
    if (run->done) return;
    run->timed_out = true;
    // Everything the profile started: the job's cgroup (nothing else runs there yet), else the
    // shell's process group.
    if (!cgroup.empty()) {
      JobCgroups::Kill(cgroup);
    } else if (!run->exited) {
      launcher.Kill(-pid, SIGKILL);
    }
    boost::system::error_code ignored;
    sd->cancel(ignored);
  });
  auto buf = std::make_shared<std::array<char, 65536>>();
  auto read = std::make_shared<std::function<void()>>();
  *read = [sd, buf, run, read, finish, pid, &launcher] {
    sd->async_read_some(asio::buffer(*buf),
                        [sd, buf, run, read, finish, pid, &launcher](auto ec, size_t n) {
                          if (!run->too_long) {
                            if (run->output.size() + n > kMaxLoginEnvBytes) {
                              run->too_long = true;
                              run->output.clear();
                              if (!run->exited) launcher.Kill(-pid, SIGKILL);
                            } else {
                              run->output.append(buf->data(), n);
                            }
                          }
                          if (ec) {
                            run->eof = true;
                            *read = nullptr;
                            finish();
                            return;
                          }
                          (*read)();
                        });
  };
  (*read)();
  ctx.WatchExit(pid, spawned->pidfd, [run, finish](int status) {
    run->exited = true;
    run->status = status;
    finish();
  });
}

}  // namespace muster::agent
