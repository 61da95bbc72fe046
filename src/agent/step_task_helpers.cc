// StepSupervisor: a task's --task-prolog and --task-epilog, run as the job's user around the
// task (srun's TASK PROLOG: the prolog's export/unset/print lines shape the task), their output
// read under the same backpressure as a task's, and the epilog bounded in time.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "job_env.h"
#include "spawn.h"
#include "step_supervisor.h"

namespace muster::agent {

namespace asio = boost::asio;

struct StepSupervisor::Helper {
  pid_t pid = -1;
  size_t idx = 0;
  bool keep_stdout = false;
  std::string kept;  // its stdout, with keep_stdout
  std::shared_ptr<asio::posix::stream_descriptor> out, err;
  bool reaped = false;    // it has ended
  bool finished = false;  // ... and its pipes are read and closed
};

void StepSupervisor::RunPrologThenStart(size_t idx) {
  const std::string path = req_.task_prolog();
  auto self = shared_from_this();
  RunHelper(idx, "--task-prolog", path, pending_[idx]->sp.env, /*keep_stdout=*/true,
            /*timeout_s=*/0, [this, self, idx, path](int status, std::string out) {
              Task& t = tasks_[idx];
              if (stopping_ || done_) return StartTask(idx);  // which ends it
              int code = 0, sig = 0;
              if (status >= 0) DecodeWaitStatus(status, &code, &sig);
              if (status < 0 || code != 0 || sig != 0) {
                // The task does not run: it fails with the prolog's code (1 when none).
                if (status >= 0) {
                  SendOutput(t.id, 2,
                             "muster: task " + std::to_string(t.id) + ": --task-prolog " + path +
                                 " failed with " +
                                 (sig ? "signal " + std::to_string(sig)
                                      : "exit code " + std::to_string(code)) +
                                 "; the task was not started\n");
                }
                pending_[idx]->io.CloseAll();
                pending_[idx].reset();
                t.reaped = t.exited = true;
                t.status = (code != 0 ? code : 1) << 8;
                return MaybeReport(idx);
              }
              // Its "export", "unset" and "print" lines shape the task.
              for (const std::string& line : ApplyTaskPrologOutput(out, &pending_[idx]->sp.env)) {
                SendOutput(t.id, 1, line + "\n");
              }
              StartTask(idx);
            });
}

void StepSupervisor::RunEpilogThenFinish(size_t idx) {
  auto self = shared_from_this();
  const std::string path = req_.task_epilog();
  RunHelper(idx, "--task-epilog", path, task_env_[idx], /*keep_stdout=*/false, kTaskEpilogTimeoutS,
            [this, self, idx, path](int status, std::string) {
              int code = 0, sig = 0;
              if (status > 0) DecodeWaitStatus(status, &code, &sig);
              if (status > 0 && !stopping_) {
                // Said, and changes nothing of the task's end.
                SendOutput(tasks_[idx].id, 2,
                           "muster: task " + std::to_string(tasks_[idx].id) + ": --task-epilog " +
                               path + " failed with " +
                               (sig ? "signal " + std::to_string(sig)
                                    : "exit code " + std::to_string(code)) +
                               "\n");
              }
              FinishTask(idx);
            });
}

void StepSupervisor::RunHelper(size_t idx, const std::string& what, const std::string& path,
                               const std::vector<std::string>& env, bool keep_stdout, int timeout_s,
                               std::function<void(int, std::string)> done) {
  const v1::JobSpec& spec = setup_.launch().spec();
  Task& t = tasks_[idx];
  // As the task's user, in its directory, its environment and the step's cgroup; never as root
  // for another user's job.
  SpawnSpec sp;
  sp.argv = {path};
  sp.env = env;
  sp.cwd = req_.work_dir().empty() ? spec.work_dir() : req_.work_dir();
  sp.change_user = ::geteuid() == 0 && spec.uid() != 0;
  sp.uid = spec.uid();
  sp.gid = spec.gid();
  if (sp.change_user) sp.groups = launcher_.GroupsOf(spec.user(), spec.gid());
  auto cannot = [&](const std::string& why) {
    SendOutput(
        t.id, 2,
        "muster: task " + std::to_string(t.id) + ": " + what + " " + path + ": " + why + "\n");
    done(-1, "");
  };
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return cannot(std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    return cannot(std::strerror(e));
  }
  sp.stdout_fd = out[1];
  sp.stderr_fd = err[1];
  if (!setup_.step_cgroup().empty()) {
    sp.cgroup_fd = ::open(setup_.step_cgroup().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  auto spawned = launcher_.Spawn(sp);
  ::close(out[1]);
  ::close(err[1]);
  if (sp.cgroup_fd >= 0) ::close(sp.cgroup_fd);
  if (!spawned.ok()) {
    ::close(out[0]);
    ::close(err[0]);
    return cannot(spawned.status().message());
  }
  auto h = std::make_shared<Helper>();
  h->pid = spawned->pid;
  h->idx = idx;
  h->keep_stdout = keep_stdout;
  h->out = std::make_shared<asio::posix::stream_descriptor>(io_, out[0]);
  h->err = std::make_shared<asio::posix::stream_descriptor>(io_, err[0]);
  t.helper = h->pid;
  // Recorded as the tasks are, so that the job's end (or the agent's) reaches it too.
  if (hooks_.task_started) hooks_.task_started(h->pid);
  ReadHelper(h, false);
  ReadHelper(h, true);
  auto self = shared_from_this();
  std::shared_ptr<asio::steady_timer> timer;
  if (timeout_s > 0) {
    timer = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(timeout_s));
    timer->async_wait([this, self, h](boost::system::error_code ec) {
      if (!ec && !h->reaped) launcher_.Kill(-h->pid, SIGKILL);
    });
  }
  auto pidfd = std::make_shared<asio::posix::stream_descriptor>(io_, spawned->pidfd);
  pidfd->async_wait(
      asio::posix::stream_descriptor::wait_read,
      [this, self, h, pidfd, timer, done = std::move(done)](boost::system::error_code) {
        const int status = launcher_.Reap(h->pid, /*our_child=*/true);
        h->reaped = true;  // its pid is no longer its to signal
        tasks_[h->idx].helper = -1;
        if (timer) timer->cancel();
        // Behind the reads already done (posted after them): what is left in its pipes, then
        // they close (a process it left behind may hold them open).
        asio::post(io_, [this, self, h, status, done] {
          char buf[16384];
          for (bool is_err : {false, true}) {
            auto& sd = is_err ? h->err : h->out;
            for (int i = 0; i < 64; ++i) {
              const ssize_t n = ::read(sd->native_handle(), buf, sizeof buf);
              if (n <= 0) break;
              if (!is_err && h->keep_stdout) {
                if (h->kept.size() < kMaxPrologOutput) h->kept.append(buf, static_cast<size_t>(n));
              } else {
                SendOutput(tasks_[h->idx].id, is_err ? 2 : 1,
                           std::string(buf, static_cast<size_t>(n)));
              }
            }
            boost::system::error_code ignored;
            sd->close(ignored);
          }
          h->finished = true;
          if (hooks_.task_done) hooks_.task_done(h->pid);
          done(status < 0 ? 0 : status, std::move(h->kept));
        });
      });
}

void StepSupervisor::ReadHelper(std::shared_ptr<Helper> h, bool err) {
  auto sd = err ? h->err : h->out;
  if (!sd->is_open()) return;
  sd->non_blocking(true);
  auto buf = std::make_shared<std::array<char, 16384>>();
  auto self = shared_from_this();
  sd->async_read_some(asio::buffer(*buf),
                      [this, self, h, sd, buf, err](boost::system::error_code ec, size_t n) {
                        if (n > 0) {
                          if (!err && h->keep_stdout) {
                            if (h->kept.size() < kMaxPrologOutput) h->kept.append(buf->data(), n);
                          } else {
                            SendOutput(tasks_[h->idx].id, err ? 2 : 1, std::string(buf->data(), n));
                          }
                        }
                        if (ec || h->finished) return;
                        // As a task's output: not read on while the client lags, so a helper
                        // that writes without end waits on its pipe (a prolog has no timeout).
                        WhenClientKeepsUp([this, self, h, err] { ReadHelper(h, err); });
                      });
}

}  // namespace muster::agent
