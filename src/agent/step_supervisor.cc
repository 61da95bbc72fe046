#include "step_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cgroup.h"
#include "job_cpus.h"
#include "job_env.h"
#include "job_spool.h"
#include "muster/agent/step_supervisor_main.h"
#include "muster/common/cpu_bind.h"
#include "muster/common/cpu_topology.h"
#include "muster/common/gpu_bind.h"
#include "muster/common/strings.h"
#include "muster/keeper/child.h"
#include "resource_limits.h"
#include "spawn.h"

namespace muster::agent {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Whether the output pattern names the node or the task: one file per node (or task), which
// this node may truncate; otherwise several nodes share the file and only append to it.
bool PerNodePattern(const std::string& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '%') continue;
    size_t j = i + 1;
    while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) ++j;
    if (j < p.size() && (p[j] == 't' || p[j] == 'n' || p[j] == 'N')) return true;
    if (j < p.size() && p[j] == '%') i = j;
  }
  return false;
}

}  // namespace

void StepSupervisor::TaskIo::CloseChildEnds() {
  for (int* fd : {&child_out, &child_err, &child_in, &child_pmi}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void StepSupervisor::TaskIo::CloseAll() {
  CloseChildEnds();
  for (int* fd : {&out, &err, &in, &pmi}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

StepSupervisor::StepSupervisor(asio::io_context& io, Launcher& launcher,
                               v1::StepSupervisorSetup setup, tcp::socket socket, Hooks hooks)
    : io_(io),
      launcher_(launcher),
      setup_(std::move(setup)),
      req_(setup_.request()),
      socket_(std::move(socket)),
      hooks_(std::move(hooks)) {}

StepSupervisor::~StepSupervisor() {
  if (tty_fd_ >= 0) ::close(tty_fd_);
}

void StepSupervisor::Start() {
  // What the client sent behind its request, as if it arrived now.
  const std::string& early = setup_.client_bytes();
  if (!early.empty() && !frames_.Append(early.data(), early.size()).ok()) {
    return Fail(InvalidArgument("bad frame after the step request"));
  }
  // srun --bcast: the program comes first; the tasks start once it is here, whole.
  if (!req_.bcast_path().empty() && !req_.withdrawn()) return ReceiveProgram();
  if (Status s = Launch(); !s.ok()) return Fail(s);
  WatchClient();
}

bool StepSupervisor::OwnCgroup() const {
  return !setup_.step_cgroup().empty() && setup_.step_cgroup() != setup_.job_cgroup();
}

std::vector<uint32_t> StepSupervisor::StepCpus() const {
  if (!cpus_left_.empty()) return cpus_left_;
  if (req_.cpu_ids_size() > 0) return {req_.cpu_ids().begin(), req_.cpu_ids().end()};
  for (const v1::NodeAllocation& n : setup_.launch().allocation().nodes()) {
    if (n.node() == setup_.node()) return {n.cpu_ids().begin(), n.cpu_ids().end()};
  }
  return {};
}

Status StepSupervisor::Launch() {
  if (req_.legacy_pmi_port()) {
    return FailedPrecondition(
        "this step's srun serves PMI on a TCP port, which this node no longer supports (anyone "
        "could reach it): use the srun (muster) of this node's release, whose tasks speak PMI "
        "through PMI_FD, or --mpi=none");
  }
  if (req_.withdrawn()) {
    // Its client gave it up before it started (an srun --prolog failed): nothing runs, and the
    // step ends as cancelled, so that the controller frees what it holds.
    killed_ = true;
    return Aborted("step " + std::to_string(req_.job_id()) + "." + std::to_string(req_.step_id()) +
                   " was withdrawn by its client before it started");
  }
  const v1::LaunchJob& launch = setup_.launch();
  const v1::JobSpec& spec = launch.spec();
  const bool root = ::geteuid() == 0;
  PatternVars vars = PatternVarsOf(launch);  // for -o/-e/-i
  vars.node = setup_.node();
  vars.node_id = req_.node_id();
  vars.step = std::to_string(req_.step_id());
  std::set<std::string> truncated;  // output files of this step opened here already
  GpuBind bind;
  if (!req_.gpu_bind().empty()) {
    MUSTER_ASSIGN_OR_RETURN(bind, ParseGpuBind(req_.gpu_bind()));
  }
  // Each task's share of the step's GPUs here (--gpus-per-task, --gpu-bind), all of them before
  // any task starts: a binding that fails for one starts none.
  const std::vector<std::string> step_gpus = Split(setup_.visible_devices(), ',', true);
  std::vector<std::string> task_gpus;
  for (uint32_t local = 0; local < req_.ntasks(); ++local) {
    MUSTER_ASSIGN_OR_RETURN(std::vector<std::string> gpus,
                            TaskGpus(bind, req_.gpus_per_task(), step_gpus, local));
    task_gpus.push_back(Join(gpus, ","));
  }
  // Its job's --core-spec or --thread-spec: none of its tasks on the CPUs the job set aside.
  if (SetsCpusAside(setup_.launch().spec())) {
    MUSTER_ASSIGN_OR_RETURN(cpus_left_, CpusLeftToJobHere(setup_.launch().spec(), StepCpus()));
  }
  // Each task's CPUs (--cpu-bind), out of the step's here, laid out over this machine's sockets
  // and cores; likewise all before any task starts.
  if (!req_.cpu_bind().empty()) {
    MUSTER_ASSIGN_OR_RETURN(cpu_bind_, ParseCpuBind(req_.cpu_bind()));
    MUSTER_ASSIGN_OR_RETURN(CpuDistribution dist, ParseCpuDistribution(req_.cpu_distribution()));
    if (cpu_bind_.kind != CpuBind::Kind::kUnset && cpu_bind_.kind != CpuBind::Kind::kNone) {
      MUSTER_ASSIGN_OR_RETURN(CpuTopology topo, ReadCpuTopology());
      auto laid =
          LayOutTaskCpus(cpu_bind_, dist, topo, StepCpus(), req_.ntasks(), req_.cpus_per_task());
      if (!laid.ok()) return laid.status();
      task_cpus_ = std::move(*laid);
    }
  }
  if (bind.kind == GpuBind::Kind::kClosest) {
    // --gpu-bind=closest: each task's GPUs by the CPUs it runs on, so once those are laid out.
    std::vector<std::vector<uint32_t>> near;
    for (const std::string& list : setup_.gpu_cpus()) {
      auto cpus = ParseCpuList(list);
      near.push_back(cpus.ok() ? *cpus : std::vector<uint32_t>());
    }
    for (uint32_t local = 0; local < req_.ntasks(); ++local) {
      const std::vector<uint32_t> cpus = task_cpus_.empty() ? StepCpus() : task_cpus_[local];
      task_gpus[local] = Join(ClosestGpus(step_gpus, near, cpus), ",");
    }
  }
  if (req_.task_commands_size() != 0 &&
      static_cast<uint32_t>(req_.task_commands_size()) != req_.ntasks()) {
    return InvalidArgument("--multi-prog: " + std::to_string(req_.task_commands_size()) +
                           " commands for the " + std::to_string(req_.ntasks()) + " tasks here");
  }
  // Every task's command before any task starts: one without starts none.
  for (int i = 0; i < req_.task_commands_size(); ++i) {
    if (req_.task_commands(i).argv().empty()) {
      return InvalidArgument("--multi-prog: no command for task " +
                             std::to_string(TaskIdOf(req_, static_cast<uint32_t>(i))));
    }
  }
  for (const std::string& path : {req_.task_prolog(), req_.task_epilog()}) {
    if (!path.empty() && path[0] != '/') {
      return InvalidArgument("--task-prolog/--task-epilog " + path + " is not an absolute path");
    }
  }
  // SLURM_CPU_BIND* are the same for every task (the list is every task's masks): made once.
  std::vector<std::pair<std::string, std::string>> cpu_bind_env;
  if (!req_.cpu_bind().empty()) cpu_bind_env = CpuBindEnv(cpu_bind_, task_cpus_);
  launching_ = true;
  for (uint32_t local = 0; local < req_.ntasks(); ++local) {
    Task t;
    t.id = TaskIdOf(req_, local);
    auto pending = std::make_unique<PendingTask>();
    SpawnSpec& sp = pending->sp;
    if (req_.task_commands_size() != 0) {
      const auto& argv = req_.task_commands(static_cast<int>(local)).argv();
      sp.argv.assign(argv.begin(), argv.end());  // not empty: checked above
    } else {
      sp.argv.assign(req_.argv().begin(), req_.argv().end());
      if (!req_.bcast_path().empty()) sp.argv[0] = req_.bcast_path();  // this node's copy
    }
    sp.env = BuildTaskEnv(launch, setup_.node(), setup_.config_path(), task_gpus[local], req_,
                          local, setup_.launch_host());
    for (const auto& [k, v] : cpu_bind_env) SetEnvVar(sp.env, k, v);
    {
      // srun's --propagate: its limits, clamped to the node's, set by the task as its user.
      std::vector<std::string> notes;
      const std::vector<v1::ResourceLimit> wanted = TakeRlimitEnv(&sp.env, &notes);
      ClampedLimits limits = ClampLimits(wanted, OwnHardLimit, JobMemoryBytes(spec));
      sp.limits = std::move(limits.set);
      if (local == 0) {
        notes.insert(notes.end(), limits.notes.begin(), limits.notes.end());
        for (const std::string& n : notes) {
          spdlog::warn("job={} step={} {}", launch.job_id(), req_.step_id(), n);
        }
      }
    }
    sp.cpus = task_cpus_.empty() ? cpus_left_ : task_cpus_[local];
    sp.cwd = req_.work_dir().empty() ? spec.work_dir() : req_.work_dir();
    sp.change_user = root && spec.uid() != 0;
    sp.uid = spec.uid();
    sp.gid = spec.gid();
    if (sp.change_user) sp.groups = launcher_.GroupsOf(spec.user(), spec.gid());
    vars.task_id = t.id;
    if (Status st = OpenTaskIo(vars, sp, t.id, truncated, &pending->io); !st.ok()) {
      pending->io.CloseAll();
      launching_ = false;
      return st;
    }
    // The task's stdin is its pipe from now on, so input that comes while a prolog runs waits
    // in it.
    if (pending->io.in >= 0) {
      StdinSink sink;
      sink.fd = std::make_shared<asio::posix::stream_descriptor>(io_, pending->io.in);
      pending->io.in = -1;
      sinks_.push_back(std::move(sink));
    }
    tasks_.push_back(t);
    pmi_.emplace_back();
    task_env_.push_back(sp.env);
    pending_.push_back(std::move(pending));
    const size_t idx = tasks_.size() - 1;
    if (req_.task_prolog().empty()) {
      StartTask(idx);
    } else {
      RunPrologThenStart(idx);
    }
  }
  launching_ = false;
  for (size_t i = 0; i < tasks_.size(); ++i) MaybeReport(i);
  return Status::Ok();
}

void StepSupervisor::StartTask(size_t idx) {
  std::unique_ptr<PendingTask> pending = std::move(pending_[idx]);
  if (!pending) return;
  Task& t = tasks_[idx];
  SpawnSpec& sp = pending->sp;
  TaskIo& io = pending->io;
  task_env_[idx] = sp.env;
  if (stopping_ || done_) {
    // The step was killed (or failed) while its prolog ran: the task never starts, and counts
    // as killed.
    if (stopping_) killed_ = true;
    io.CloseAll();
    t.reaped = t.exited = true;
    t.status = SIGKILL;
    return MaybeReport(idx);
  }
  if (!setup_.step_cgroup().empty()) {
    sp.cgroup_fd = ::open(setup_.step_cgroup().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  auto spawned = launcher_.Spawn(sp);
  io.CloseChildEnds();
  if (sp.cgroup_fd >= 0) ::close(sp.cgroup_fd);
  if (!spawned.ok()) {
    io.CloseAll();
    // Like srun: say why on the task's stderr and give it exit code 127.
    SendOutput(t.id, 2,
               "muster: task " + std::to_string(t.id) + ": " + spawned.status().message() + "\n");
    t.reaped = t.exited = true;
    t.status = 127 << 8;
    return MaybeReport(idx);
  }
  t.pid = spawned->pid;
  // Before anything the task writes is read: its binding, as Slurm's verbose report says it.
  if (cpu_bind_.verbose) {
    // Not bound (none): the task may run on every CPU of the step's here.
    const std::vector<uint32_t> cpus = sp.cpus.empty() ? StepCpus() : sp.cpus;
    SendOutput(
        t.id, 2,
        CpuBindReport(cpu_bind_, setup_.node(), t.id, static_cast<uint32_t>(idx), t.pid, cpus));
  }
  // The PMI socket counts as output: what a task wrote to it before it ended (an abort) is
  // read before its exit is reported.
  t.open_pipes = (io.out >= 0) + (io.err >= 0) + (io.pmi >= 0);
  if (hooks_.task_started) hooks_.task_started(t.pid);
  if (io.out >= 0) ReadPipe(idx, io.out, 1);
  if (io.err >= 0) ReadPipe(idx, io.err, 2);
  if (io.pmi >= 0) {
    pmi_[idx].fd = std::make_shared<asio::posix::stream_descriptor>(io_, io.pmi);
    ReadPmi(idx);
  }
  WatchExit(idx, t.pid, spawned->pidfd);
}

void StepSupervisor::WatchExit(size_t idx, pid_t pid, int pidfd) {
  auto self = shared_from_this();
  auto sd = std::make_shared<asio::posix::stream_descriptor>(io_, pidfd);
  sd->async_wait(asio::posix::stream_descriptor::wait_read,
                 [this, self, sd, idx, pid](boost::system::error_code) {
                   const int status = launcher_.Reap(pid, /*our_child=*/true);
                   tasks_[idx].reaped = true;
                   tasks_[idx].status = status < 0 ? 0 : status;
                   if (!req_.task_epilog().empty() && !stopping_) {
                     return RunEpilogThenFinish(idx);
                   }
                   FinishTask(idx);
                 });
}

void StepSupervisor::FinishTask(size_t idx) {
  tasks_[idx].exited = true;
  // Every task has exited: what they left behind (holding their output open, say) ends.
  bool all = true;
  for (const Task& task : tasks_) all = all && task.exited;
  if (all && OwnCgroup()) JobCgroups::Kill(setup_.step_cgroup());
  if (!pmi_[idx].fd) return MaybeReport(idx);
  // Behind the reads already done (posted after them): what is left in its PMI socket, then the
  // socket closes and its read ends, which reports.
  auto self = shared_from_this();
  asio::post(io_, [this, self, idx] { DrainPmi(idx); });
}

// Pipes, files or a terminal for one task, as the request asks (srun -o/-e/-i, --pty), and its
// PMI socket.
Status StepSupervisor::OpenTaskIo(const PatternVars& vars, SpawnSpec& sp, uint32_t task,
                                  std::set<std::string>& truncated, TaskIo* io) {
  if (req_.pmi()) {
    // A socket pair, not a port: only the task that inherits one end can speak for its rank.
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return ErrnoStatus("PMI socketpair", errno);
    }
    io->pmi = sv[0];
    io->child_pmi = sv[1];
    if (io->child_pmi < 3) {
      // Not where the child's stdio goes (a supervisor started with fds 1 or 2 closed).
      io->child_pmi = ::fcntl(sv[1], F_DUPFD_CLOEXEC, keeper::kPmiFd + 1);
      ::close(sv[1]);
      if (io->child_pmi < 0) return ErrnoStatus("PMI socket", errno);
    }
    sp.pmi_fd = io->child_pmi;
  }
  if (req_.pty() && task == 0) {
    // The terminal carries stdin, stdout and stderr; the agent holds the master side.
    int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0) return ErrnoStatus("posix_openpt", errno);
    char name[128];
    if (::grantpt(master) != 0 || ::unlockpt(master) != 0 ||
        ::ptsname_r(master, name, sizeof name) != 0) {
      int e = errno;
      ::close(master);
      return ErrnoStatus("pseudo-terminal", e);
    }
    if (sp.change_user && ::chown(name, sp.uid, static_cast<gid_t>(-1)) != 0) {
      int e = errno;
      ::close(master);
      return ErrnoStatus(std::string("chown ") + name, e);
    }
    if (req_.window().rows() > 0 && req_.window().cols() > 0) {
      struct winsize ws {};
      ws.ws_row = static_cast<unsigned short>(req_.window().rows());
      ws.ws_col = static_cast<unsigned short>(req_.window().cols());
      ::ioctl(master, TIOCSWINSZ, &ws);
    }
    sp.tty_path = name;
    io->out = master;
    io->in = ::fcntl(master, F_DUPFD_CLOEXEC, 3);
    tty_fd_ = ::fcntl(master, F_DUPFD_CLOEXEC, 3);  // for window sizes; ours to close
    return io->in >= 0 && tty_fd_ >= 0 ? Status::Ok() : ErrnoStatus("dup", errno);
  }
  int p[2];
  const std::string& cwd = sp.cwd;
  // Output: files on the node (truncated by the first opener, unless nodes share the file or
  // --open-mode=append asks to add to them), else pipes read here and sent to the client.
  auto file = [&](const std::string& pattern, std::string* path) {
    *path = ExpandOutputPattern(pattern, vars, cwd);
    sp.append_output = true;
    sp.truncate_output = !req_.open_mode_append() &&
                         (req_.total_nodes() <= 1 || PerNodePattern(pattern)) &&
                         truncated.insert(*path).second;
  };
  if (!req_.stdout_pattern().empty()) {
    file(req_.stdout_pattern(), &sp.stdout_path);
  } else {
    if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
    io->out = p[0];
    io->child_out = sp.stdout_fd = p[1];
  }
  if (!req_.stderr_pattern().empty()) {
    if (req_.stdout_pattern().empty()) {
      // stdout to the client (the pipe above), stderr to a file the child opens.
      file(req_.stderr_pattern(), &sp.stderr_path);
    } else {
      std::string path;
      const bool trunc_out = sp.truncate_output;
      file(req_.stderr_pattern(), &path);
      sp.truncate_output = sp.truncate_output && trunc_out;
      sp.stderr_path = path;
    }
  } else if (req_.stdout_pattern().empty()) {
    if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
    io->err = p[0];
    io->child_err = sp.stderr_fd = p[1];
  }
  // Input: the client's (through a pipe), a file, or /dev/null.
  const bool from_client =
      req_.stdin_mode() == v1::StepLaunchRequest::STDIN_ALL ||
      (req_.stdin_mode() == v1::StepLaunchRequest::STDIN_TASK && task == req_.stdin_task());
  if (from_client) {
    if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
    io->in = p[1];
    io->child_in = sp.stdin_fd = p[0];
  } else if (!req_.stdin_pattern().empty()) {
    sp.stdin_path = ExpandOutputPattern(req_.stdin_pattern(), vars, cwd);
  }
  return Status::Ok();
}

void StepSupervisor::ReadPipe(size_t idx, int fd, uint32_t stream) {
  auto sd = std::make_shared<asio::posix::stream_descriptor>(io_, fd);
  auto buf = std::make_shared<std::array<char, 16384>>();
  auto self = shared_from_this();
  auto read = std::make_shared<std::function<void()>>();
  *read = [this, self, sd, buf, idx, stream, read] {
    sd->async_read_some(asio::buffer(*buf), [this, self, sd, buf, idx, stream, read](
                                                boost::system::error_code ec, size_t n) {
      if (n > 0) SendOutput(tasks_[idx].id, stream, std::string(buf->data(), n));
      if (ec) {
        --tasks_[idx].open_pipes;
        MaybeReport(idx);
        *read = nullptr;  // break the self-reference
        return;
      }
      WhenClientKeepsUp([read] { (*read)(); });
    });
  };
  (*read)();
}

void StepSupervisor::MaybeReport(size_t idx) {
  if (launching_) return;  // Launch reports them all once every task is in tasks_
  Task& t = tasks_[idx];
  if (t.reported || !t.exited || t.open_pipes > 0) return;
  t.reported = true;
  if (t.pid > 0 && hooks_.task_done) hooks_.task_done(t.pid);
  v1::StepEvent ev;
  int code, sig;
  DecodeWaitStatus(t.status, &code, &sig);
  ev.mutable_exit()->set_task(t.id);
  ev.mutable_exit()->set_exit_code(code);
  ev.mutable_exit()->set_signal(sig);
  Write(0, ev.SerializeAsString());
  exit_code_ = std::max(exit_code_, code);
  if (sig && !signal_) signal_ = sig;
  if (++reported_ == tasks_.size()) {
    done_ = true;
    CloseStdin();
    ReportEnd();
  }
  if (done_ && !writing_) Close();
}

// The controller keeps the step's state: it hears once every task here has ended.
void StepSupervisor::ReportEnd() {
  if (reported_end_) return;
  reported_end_ = true;
  v1::StepEnded e;
  e.set_job_id(req_.job_id());
  e.set_step_id(req_.step_id());
  e.set_run(req_.run());
  e.set_exit_code(exit_code_);
  e.set_signal(signal_);
  e.set_killed(killed_);
  if (hooks_.ended) hooks_.ended(e);
}

void StepSupervisor::SendOutput(uint32_t task, uint32_t stream, std::string data) {
  v1::StepEvent ev;
  ev.mutable_output()->set_task(task);
  ev.mutable_output()->set_stream(stream);
  ev.mutable_output()->set_data(std::move(data));
  Write(0, ev.SerializeAsString());
}

void StepSupervisor::Fail(const Status& s) {
  KillTasks();  // tasks started before the failure must not outlive the step
  Write(static_cast<uint32_t>(s.code()), s.message());
  done_ = true;
  if (exit_code_ == 0 && !req_.withdrawn()) exit_code_ = 1;  // withdrawn: CANCELLED, not FAILED
  ReportEnd();
}

void StepSupervisor::Write(uint32_t type, const std::string& payload) {
  queue_.push_back(EncodeFrame(type, payload));
  queued_bytes_ += queue_.back().size();
  if (!writing_) WriteNext();
}

void StepSupervisor::WhenClientKeepsUp(std::function<void()> read) {
  if (queued_bytes_ <= kMaxClientBacklog) return read();
  paused_reads_.push_back(std::move(read));
}

void StepSupervisor::WriteNext() {
  if (queue_.empty()) {
    writing_ = false;
    if (done_) Close();
    return;
  }
  writing_ = true;
  auto self = shared_from_this();
  asio::async_write(socket_, asio::buffer(queue_.front()), [this, self](auto ec, size_t) {
    queued_bytes_ -= queue_.front().size();
    queue_.pop_front();
    if (ec) {
      KillTasks();  // the client went away: so does the step
      queue_.clear();
      queued_bytes_ = 0;
      writing_ = false;
    }
    // Paused output is read again (to its end, once the tasks are killed) when half drained.
    if (queued_bytes_ <= kMaxClientBacklog / 2 && !paused_reads_.empty()) {
      std::vector<std::function<void()>> resume;
      resume.swap(paused_reads_);
      for (auto& r : resume) r();
    }
    if (!ec) WriteNext();
  });
}

// After the launch the client sends signals (type 1), stdin (type 2) and terminal sizes
// (type 3); when it closes the connection (or sends junk) the step ends, as when srun is
// killed.
void StepSupervisor::WatchClient() {
  Frame f;
  while (frames_.Pop(&f)) {
    const uint32_t type = f.type;
    const size_t len = f.payload.size();
    const bool ok = (type == 1 && len <= 64) || (type == 2 && len <= kMaxStdinFrame) ||
                    (type == 3 && len <= 64) || (type == 4 && len <= kMaxPmiFrame);
    if (!ok) {
      if (!done_) KillTasks();
      return;
    }
    if (type == 2) {
      stdin_in_ += f.payload.size();
      ToStdin(f.payload);
      if (StdinBacklog() > kMaxStdinBacklog) {
        client_paused_ = true;  // resumed by WriteStdin once the tasks have read some
        return;
      }
    } else if (type == 4) {
      v1::PmiData answer;
      if (!answer.ParseFromString(f.payload)) {
        if (!done_) KillTasks();
        return;
      }
      ToPmi(answer);
    } else if (type == 3) {
      v1::StepWindow w;
      if (w.ParseFromString(f.payload) && tty_fd_ >= 0 && w.rows() > 0 && w.cols() > 0) {
        struct winsize ws {};
        ws.ws_row = static_cast<unsigned short>(w.rows());
        ws.ws_col = static_cast<unsigned short>(w.cols());
        ::ioctl(tty_fd_, TIOCSWINSZ, &ws);  // the task's foreground group gets SIGWINCH
      }
    } else {
      v1::StepSignal sig;
      if (!sig.ParseFromString(f.payload) || sig.signal() <= 0 || sig.signal() >= 65) {
        if (!done_) KillTasks();
        return;
      }
      SignalTasks(sig.signal());
    }
  }
  auto self = shared_from_this();
  socket_.async_read_some(asio::buffer(chunk_), [this, self](auto ec, size_t n) {
    if (ec || !frames_.Append(chunk_.data(), n).ok()) {
      if (!done_) KillTasks();
      return;
    }
    WatchClient();
  });
}

void StepSupervisor::SignalTasks(int sig) {
  if (sig == SIGKILL) return KillTasks();
  for (const Task& t : tasks_) {
    if (t.pid > 0 && !t.reaped) launcher_.Kill(-t.pid, sig);
  }
}

void StepSupervisor::KillTasks() {
  // Whatever runs now: a task whose prolog has just ended (reaped, its output still to drain)
  // has nothing to kill here, and must not start.
  stopping_ = true;
  CloseStdin();
  for (const Task& t : tasks_) {
    if (t.pid > 0 && !t.reaped) {
      launcher_.Kill(-t.pid, SIGKILL);
      killed_ = true;
    }
    if (t.helper > 0) {  // its prolog or epilog, and what it started
      launcher_.Kill(-t.helper, SIGKILL);
      killed_ = true;
    }
  }
  if (OwnCgroup()) JobCgroups::Kill(setup_.step_cgroup());
}

void StepSupervisor::Close() {
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

namespace {

// Written aside, then renamed: the agent never reads half a record.
bool Record(const std::string& path, const std::string& bytes) {
  const std::string aside = path + ".new";
  if (!WriteFileCloexec(aside, bytes, 0600)) return false;
  return ::rename(aside.c_str(), path.c_str()) == 0;
}

}  // namespace

std::string StepRecordPath(const std::string& job_dir, uint32_t step_id, const char* what) {
  return job_dir + "/step" + std::to_string(step_id) + "." + what;
}

int StepSupervisorMain(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: muster-stepd SETUP_FILE (started by musterd)\n");
    return 1;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  ::unlink(argv[1]);
  v1::StepSupervisorSetup setup;
  if (!in || !setup.ParseFromString(bytes.str())) {
    spdlog::error("muster-stepd: cannot read the step setup {}", argv[1]);
    return 1;
  }
  // A task that closed its stdin must not end the supervisor writing to it.
  ::signal(SIGPIPE, SIG_IGN);
  asio::io_context io;
  boost::system::error_code ec;
  tcp::socket socket(io);
  const int fd = ::fcntl(0, F_DUPFD_CLOEXEC, 3);  // the client's connection
  if (fd >= 0) socket.assign(tcp::v4(), fd, ec);  // the family only matters for new sockets
  if (fd < 0 || ec) {
    spdlog::error("muster-stepd: fd 0 is not the client's connection");
    return 1;
  }
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) ::dup2(devnull, 0);
  std::unique_ptr<Launcher> launcher = NewProcessLauncher();
  const std::string job_dir = setup.job_dir();
  const uint32_t step = setup.request().step_id();
  StepSupervisor::Hooks hooks;
  v1::StepTaskPids pids;
  hooks.task_started = [&](pid_t pid) {
    pids.add_pids(pid);
    if (!Record(StepRecordPath(job_dir, step, "tasks"), pids.SerializeAsString())) {
      spdlog::warn("muster-stepd: cannot record the tasks of step {}: {}", step,
                   std::strerror(errno));
    }
  };
  // Once the step has ended, the client has this long to take what is still queued for it.
  asio::steady_timer last_words(io);
  hooks.ended = [&](const v1::StepEnded& e) {
    if (!Record(StepRecordPath(job_dir, step, "end"), e.SerializeAsString())) {
      spdlog::error("muster-stepd: cannot record the end of step {}: {}", step,
                    std::strerror(errno));
    }
    last_words.expires_after(std::chrono::seconds(30));
    last_words.async_wait([&](boost::system::error_code err) {
      if (!err) io.stop();
    });
  };
  // The agent signals the step's tasks itself (by the pids recorded above); what reaches the
  // supervisor too (a signal to the whole job cgroup, a scancel of the job) must not end it
  // before it has told the client and recorded the end. SIGKILL still does.
  asio::signal_set ignored(io, SIGTERM, SIGINT, SIGHUP);
  for (int sig : {SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM}) ignored.add(sig);
  std::function<void()> keep_ignoring = [&] {
    ignored.async_wait([&](boost::system::error_code e, int) {
      if (!e) keep_ignoring();
    });
  };
  keep_ignoring();
  auto supervisor = std::make_shared<StepSupervisor>(io, *launcher, std::move(setup),
                                                     std::move(socket), std::move(hooks));
  supervisor->Start();
  std::weak_ptr<StepSupervisor> alive = supervisor;
  supervisor.reset();
  // Runs until the step is over (nothing holds it any more), or its client stalls past the end.
  while (!alive.expired() && !io.stopped() && io.run_one() > 0) {
  }
  return 0;
}

}  // namespace muster::agent
