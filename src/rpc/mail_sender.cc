#include "mail_sender.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace muster::rpc {
namespace {

// What a mail program gets besides the notice's SLURM_* (never the controller's own).
constexpr const char* kFixedEnv[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
// How long what runs may go on once the controller stops.
constexpr int64_t kStopGraceMs = 2000;
// What of its output is kept for the log.
constexpr size_t kMaxOutputBytes = 1024;

std::string Printable(std::string s) {
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "ended (status " + std::to_string(status) + ")";
}

}  // namespace

Status ResolveMailUser(const std::string& user, MailSenderOptions* options) {
  if (::geteuid() != 0) return Status::Ok();
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found) {
    return NotFound("controller.mail_prog_user: no user '" + user + "' on this host");
  }
  if (found->pw_uid == 0) {
    return InvalidArgument("controller.mail_prog_user: the mail program does not run as root");
  }
  options->run_as_uid = found->pw_uid;
  options->run_as_gid = found->pw_gid;
  return Status::Ok();
}

MailCommand BuildMailCommand(const MailSenderOptions& options, const controller::MailNotice& n) {
  MailCommand c;
  // The subject carries the job's name: no control character reaches the mail's headers.
  c.argv = {options.program, "-s", Printable(n.subject), n.recipient};
  for (const char* kv : kFixedEnv) c.env.emplace_back(kv);
  if (!options.cluster_name.empty()) c.env.push_back("SLURM_CLUSTER_NAME=" + options.cluster_name);
  for (const auto& [k, v] : n.env) {
    // Only Slurm's own names: a notice never sets PATH, LD_PRELOAD and the like.
    if (k.rfind("SLURM_", 0) != 0 || k.find('=') != std::string::npos) continue;
    std::string kv = k + "=" + v;
    if (kv.find('\0') != std::string::npos) continue;
    c.env.push_back(std::move(kv));
  }
  return c;
}

MailSender::MailSender(MailSenderOptions options) : options_(std::move(options)) {
  const size_t n = std::max<size_t>(options_.max_running, 1);
  for (size_t i = 0; i < n; ++i) workers_.emplace_back([this] { Worker(); });
}

MailSender::~MailSender() { Stop(); }

void MailSender::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    stop_flag_.store(true);
    if (!queue_.empty()) {
      spdlog::warn("mail: {} mail(s) not sent: the controller is stopping", queue_.size());
      dropped_ += queue_.size();
      queue_.clear();
      queued_for_.clear();
    }
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

void MailSender::Send(std::vector<controller::MailNotice> mails) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (controller::MailNotice& n : mails) {
      size_t& mine = queued_for_[n.recipient];
      if (stopping_ || queue_.size() >= options_.max_queued ||
          mine >= options_.max_queued_per_recipient) {
        spdlog::warn(
            "job={} mail \"{}\" to {} dropped: {} mails already wait to be sent ({} to {})",
            n.job_id, n.subject, n.recipient, queue_.size(), mine, n.recipient);
        if (mine == 0) queued_for_.erase(n.recipient);
        ++dropped_;
        continue;
      }
      ++mine;
      queue_.push_back(std::move(n));
    }
  }
  cv_.notify_all();
}

size_t MailSender::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

size_t MailSender::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void MailSender::Worker() {
  for (;;) {
    controller::MailNotice n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      n = std::move(queue_.front());
      queue_.pop_front();
      if (auto it = queued_for_.find(n.recipient); it != queued_for_.end() && --it->second == 0) {
        queued_for_.erase(it);
      }
      ++running_;
    }
    Run(n);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      ++finished_;
    }
    idle_cv_.notify_all();
  }
}

bool MailSender::WaitIdle(std::chrono::milliseconds max) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, max, [this] { return queue_.empty() && running_ == 0; });
}

void MailSender::Run(const controller::MailNotice& n) {
  const MailCommand cmd = BuildMailCommand(options_, n);
  std::vector<char*> argv, envp;
  for (const std::string& a : cmd.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : cmd.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    spdlog::error("job={} mail not sent: pipe: {}", n.job_id, std::strerror(errno));
    return;
  }
  // Only the controller's end is non-blocking: the program writes as to any pipe.
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const bool drop = options_.run_as_uid.has_value();
  const uint32_t uid = options_.run_as_uid.value_or(0), gid = options_.run_as_gid.value_or(0);
  const char* const path = cmd.argv[0].c_str();
  // fork, not posix_spawn: the child drops root before it runs anything. The controller has
  // threads, so the child makes only raw system calls until exec.
  const pid_t pid = devnull < 0 ? -1 : ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a timeout kills what it started too
    if (::dup2(devnull, 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(out[1], 2) < 0) ::_exit(126);
    ::syscall(SYS_close_range, 3U, ~0U, 0U);  // nothing of the controller's leaks in
    if (drop && (::syscall(SYS_setgroups, 0, nullptr) != 0 ||
                 ::syscall(SYS_setresgid, gid, gid, gid) != 0 ||
                 ::syscall(SYS_setresuid, uid, uid, uid) != 0)) {
      ::_exit(126);
    }
    if (::chdir("/") != 0) ::_exit(126);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(path, argv.data(), envp.data());
    ::_exit(127);
  }
  const int rc = pid < 0 ? errno : 0;
  if (devnull >= 0) ::close(devnull);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    spdlog::error("job={} mail not sent: cannot run mail_prog {}: {}", n.job_id, options_.program,
                  std::strerror(rc));
    return;
  }

  // Wait for its end (a pidfd) while keeping the start of what it writes, up to the timeout.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  std::string output;
  bool exited = false, timed_out = false;
  int status = 0;
  auto drain = [&] {
    char buf[512];
    for (;;) {
      const ssize_t got = read(out[0], buf, sizeof buf);
      if (got <= 0) return got == 0;  // EOF, or nothing more for now
      if (output.size() < kMaxOutputBytes) {
        output.append(buf,
                      std::min<size_t>(static_cast<size_t>(got), kMaxOutputBytes - output.size()));
      }
    }
  };
  bool eof = false;
  while (!exited) {
    // A controller that stops gives what runs a last moment, not its whole timeout.
    const auto until = stop_flag_.load()
                           ? std::min(deadline, std::chrono::steady_clock::now() +
                                                    std::chrono::milliseconds(kStopGraceMs))
                           : deadline;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2];
    nfds_t nfds = 0;
    if (pidfd >= 0) fds[nfds++] = {pidfd, POLLIN, 0};
    if (!eof) fds[nfds++] = {out[0], POLLIN, 0};
    // Without a pidfd (an old kernel), look again every 50 ms.
    const int wait_ms = pidfd >= 0 ? static_cast<int>(std::min<int64_t>(left.count(), 1000))
                                   : static_cast<int>(std::min<int64_t>(left.count(), 50));
    if (nfds > 0 && poll(fds, nfds, wait_ms) < 0 && errno != EINTR) break;
    if (nfds == 0) usleep(static_cast<useconds_t>(wait_ms) * 1000);
    if (!eof) eof = drain();
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno == ECHILD)) exited = true;
  }
  if (!exited) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  drain();
  if (pidfd >= 0) close(pidfd);
  close(out[0]);

  output = Printable(std::move(output));
  if (timed_out) {
    spdlog::error("job={} mail_prog {} killed after {} ms (mail \"{}\" to {}){}{}", n.job_id,
                  options_.program, options_.timeout.count(), n.subject, n.recipient,
                  output.empty() ? "" : ": ", output);
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    spdlog::error("job={} mail_prog {} {} (mail \"{}\" to {}){}{}", n.job_id, options_.program,
                  DescribeStatus(status), n.subject, n.recipient, output.empty() ? "" : ": ",
                  output);
  } else {
    spdlog::debug("job={} mailed \"{}\" to {}", n.job_id, n.subject, n.recipient);
  }
}

}  // namespace muster::rpc
