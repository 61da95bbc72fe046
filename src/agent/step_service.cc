#include "step_service.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <deque>
#include <set>

#include "job_env.h"
#include "muster/common/framing.h"
#include "muster/common/output_pattern.h"
#include "muster/common/strings.h"
#include "muster/v1/agent.pb.h"
#include "spawn.h"
#include "step_grant.h"

namespace muster::agent {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// A `muster run` connection: one request, then task output and exits streamed back.
class StepSession : public std::enable_shared_from_this<StepSession> {
 public:
  StepSession(AgentContext& ctx, JobSupervisor& jobs, tcp::socket socket,
              std::shared_ptr<StepService::Counts> counts)
      : ctx_(ctx),
        jobs_(jobs),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        counts_(std::move(counts)) {
    ++counts_->sessions;
    ++counts_->unauthenticated;
  }
  ~StepSession() {
    if (tty_fd_ >= 0) ::close(tty_fd_);
    --counts_->sessions;
    if (!authenticated_) --counts_->unauthenticated;
  }

  // The request must arrive in full within the deadline: until its credential is checked the
  // peer is anyone who can reach the port.
  void Start() {
    auto self = shared_from_this();
    deadline_.expires_after(std::chrono::milliseconds(ctx_.options.step_request_deadline_ms));
    deadline_.async_wait([this, self](auto ec) {
      if (ec || authenticated_) return;
      boost::system::error_code ignored;
      socket_.close(ignored);
    });
    ReadRequest();
  }

 private:
  void ReadRequest() {
    Frame f;
    if (frames_.Pop(&f)) {
      deadline_.cancel();
      v1::StepLaunchRequest req;
      if (!req.ParseFromString(f.payload)) return Fail(InvalidArgument("bad step request"));
      Status s = Launch(req);
      if (!s.ok()) return Fail(s);
      frames_.set_max_payload(kMaxStdinFrame);  // what the client may send from now on
      return WatchClient();
    }
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(chunk_), [this, self](auto ec, size_t n) {
      if (ec || !frames_.Append(chunk_.data(), n).ok()) return;  // gone, or not our protocol
      ReadRequest();
    });
  }

 private:
  struct Task {
    uint32_t id = 0;
    pid_t pid = -1;
    int open_pipes = 0;
    bool exited = false;
    int status = 0;
    bool reported = false;
  };
  // Where the client's stdin goes: a task's stdin pipe, or its terminal (written in order; the
  // client is not read while too much waits, so a task that never reads cannot grow this).
  struct StdinSink {
    std::shared_ptr<asio::posix::stream_descriptor> fd;
    std::deque<std::string> queue;
    size_t queued = 0;
    bool writing = false;
    bool eof = false;  // close once the queue is written
  };
  static constexpr size_t kMaxStdinBacklog = 4u << 20;
  static constexpr size_t kMaxStdinFrame = 1u << 20;

  // Whether the output pattern names the node or the task: one file per node (or task), which
  // this node may truncate; otherwise several nodes share the file and only append to it.
  static bool PerNodePattern(const std::string& p) {
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] != '%') continue;
      size_t j = i + 1;
      while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) ++j;
      if (j < p.size() && (p[j] == 't' || p[j] == 'n' || p[j] == 'N')) return true;
      if (j < p.size() && p[j] == '%') i = j;
    }
    return false;
  }

  Status Launch(const v1::StepLaunchRequest& req) {
    LocalJob* job = jobs_.Find(req.job_id());
    if (!job || job->terminating || job->exited) {
      return FailedPrecondition("job " + std::to_string(req.job_id()) + " does not run on " +
                                ctx_.node());
    }
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    MUSTER_ASSIGN_OR_RETURN(v1::StepGrant grant, CheckStepCredential(req, job->launch, ctx_.node(),
                                                                     ctx_.step_key, now_ms));
    std::erase_if(job->started_steps, [&](const auto& s) { return s.second < now_ms; });
    if (!job->started_steps.emplace(req.step_id(), grant.expires_ms()).second) {
      return PermissionDenied("step " + std::to_string(req.step_id()) + " of job " +
                              std::to_string(req.job_id()) + " was started here already");
    }
    authenticated_ = true;
    --counts_->unauthenticated;
    if (req.argv().empty()) return InvalidArgument("no command given");
    MUSTER_RETURN_IF_ERROR(CheckStepWithinGrant(req, job->launch, ctx_.node()));
    job_id_ = req.job_id();
    step_id_ = req.step_id();
    run_ = req.run();
    // A step with GPUs of its own sees only those; otherwise all of the job's on this node.
    std::string visible = job->visible_devices;
    if (req.gpus_given()) {
      std::vector<std::string> ids;
      for (uint32_t g : req.gpu_indices()) ids.push_back(std::to_string(g));
      visible = Join(ids, ",");
    }
    const v1::JobSpec& spec = job->launch.spec();
    bool root = ::geteuid() == 0;
    // The step's own cgroup inside the job's: its leftovers end with it, not with the job.
    if (!job->cgroup.empty()) {
      step_cgroup_ = job->cgroup + "/step_" + std::to_string(req.step_id());
      if (::mkdir(step_cgroup_.c_str(), 0755) != 0 && errno != EEXIST) {
        spdlog::warn("job={} step={} cannot create {}: {}; its tasks run in the job's cgroup",
                     job_id_, req.step_id(), step_cgroup_, std::strerror(errno));
        step_cgroup_ = job->cgroup;
      }
    }
    boost::system::error_code peer_ec;
    const auto peer = socket_.remote_endpoint(peer_ec);
    const std::string launch_host = peer_ec ? "" : peer.address().to_string();
    PatternVars vars = PatternVarsOf(job->launch);  // for -o/-e/-i
    vars.node = ctx_.node();
    vars.node_id = req.node_id();
    vars.step = std::to_string(req.step_id());
    std::set<std::string> truncated;  // output files of this step opened here already
    for (uint32_t local = 0; local < req.ntasks(); ++local) {
      Task t;
      t.id = req.first_task() + local;
      SpawnSpec sp;
      sp.argv.assign(req.argv().begin(), req.argv().end());
      sp.env = BuildTaskEnv(job->launch, ctx_.node(), ctx_.options.config_path, visible, req, local,
                            launch_host);
      sp.cwd = req.work_dir().empty() ? spec.work_dir() : req.work_dir();
      sp.change_user = root && spec.uid() != 0;
      sp.uid = spec.uid();
      sp.gid = spec.gid();
      if (sp.change_user) sp.groups = ctx_.launcher.GroupsOf(spec.user(), spec.gid());
      vars.task_id = t.id;
      TaskIo io;
      if (Status st = OpenTaskIo(req, vars, sp, t.id, truncated, &io); !st.ok()) {
        io.CloseAll();
        return st;
      }
      if (!step_cgroup_.empty()) {
        sp.cgroup_fd = ::open(step_cgroup_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      }
      auto spawned = ctx_.launcher.Spawn(sp);
      io.CloseChildEnds();
      if (sp.cgroup_fd >= 0) ::close(sp.cgroup_fd);
      if (!spawned.ok()) {
        io.CloseAll();
        // Like srun: say why on the task's stderr and give it exit code 127.
        SendOutput(
            t.id, 2,
            "muster: task " + std::to_string(t.id) + ": " + spawned.status().message() + "\n");
        t.exited = true;
        t.status = 127 << 8;
        tasks_.push_back(t);
        continue;
      }
      t.pid = spawned->pid;
      t.open_pipes = (io.out >= 0) + (io.err >= 0);
      tasks_.push_back(t);
      size_t idx = tasks_.size() - 1;
      job->children.insert(t.pid);
      job->pgids.insert(t.pid);
      job->step_pgids.insert(t.pid);
      if (io.out >= 0) ReadPipe(idx, io.out, 1);
      if (io.err >= 0) ReadPipe(idx, io.err, 2);
      if (io.in >= 0) {
        StdinSink sink;
        sink.fd = std::make_shared<asio::posix::stream_descriptor>(ctx_.io, io.in);
        sinks_.push_back(std::move(sink));
      }
      auto self = shared_from_this();
      ctx_.WatchExit(t.pid, spawned->pidfd, [this, self, idx](int status) {
        tasks_[idx].exited = true;
        tasks_[idx].status = status;
        // Every task has exited: what they left behind (holding their output open, say) ends.
        bool all = true;
        for (const Task& task : tasks_) all = all && task.exited;
        if (all && !step_cgroup_.empty() && step_cgroup_ != JobCgroupOf()) {
          JobCgroups::Kill(step_cgroup_);
        }
        MaybeReport(idx);
      });
    }
    for (size_t i = 0; i < tasks_.size(); ++i) MaybeReport(i);
    return Status::Ok();
  }

  // One task's I/O ends: what the agent keeps (output to read, input to write) and what the
  // child inherits (closed here once it has started).
  struct TaskIo {
    int out = -1, err = -1, in = -1;  // ours
    int child_out = -1, child_err = -1, child_in = -1;
    void CloseChildEnds() {
      for (int* fd : {&child_out, &child_err, &child_in}) {
        if (*fd >= 0) ::close(*fd);
        *fd = -1;
      }
    }
    void CloseAll() {
      CloseChildEnds();
      for (int* fd : {&out, &err, &in}) {
        if (*fd >= 0) ::close(*fd);
        *fd = -1;
      }
    }
  };

  // Pipes, files or a terminal for one task, as the request asks (srun -o/-e/-i, --pty).
  Status OpenTaskIo(const v1::StepLaunchRequest& req, const PatternVars& vars, SpawnSpec& sp,
                    uint32_t task, std::set<std::string>& truncated, TaskIo* io) {
    if (req.pty() && task == 0) {
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
      if (req.window().rows() > 0 && req.window().cols() > 0) {
        struct winsize ws {};
        ws.ws_row = static_cast<unsigned short>(req.window().rows());
        ws.ws_col = static_cast<unsigned short>(req.window().cols());
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
    // Output: files on the node (truncated by the first opener, unless nodes share the file),
    // else pipes read here and sent to the client.
    auto file = [&](const std::string& pattern, std::string* path) {
      *path = ExpandOutputPattern(pattern, vars, cwd);
      sp.append_output = true;
      sp.truncate_output =
          (req.total_nodes() <= 1 || PerNodePattern(pattern)) && truncated.insert(*path).second;
    };
    if (!req.stdout_pattern().empty()) {
      file(req.stdout_pattern(), &sp.stdout_path);
    } else {
      if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
      io->out = p[0];
      io->child_out = sp.stdout_fd = p[1];
    }
    if (!req.stderr_pattern().empty()) {
      if (req.stdout_pattern().empty()) {
        // stdout to the client (the pipe above), stderr to a file the child opens.
        file(req.stderr_pattern(), &sp.stderr_path);
      } else {
        std::string path;
        const bool trunc_out = sp.truncate_output;
        file(req.stderr_pattern(), &path);
        sp.truncate_output = sp.truncate_output && trunc_out;
        sp.stderr_path = path;
      }
    } else if (req.stdout_pattern().empty()) {
      if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
      io->err = p[0];
      io->child_err = sp.stderr_fd = p[1];
    }
    // Input: the client's (through a pipe), a file, or /dev/null.
    const bool from_client =
        req.stdin_mode() == v1::StepLaunchRequest::STDIN_ALL ||
        (req.stdin_mode() == v1::StepLaunchRequest::STDIN_TASK && task == req.stdin_task());
    if (from_client) {
      if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
      io->in = p[1];
      io->child_in = sp.stdin_fd = p[0];
    } else if (!req.stdin_pattern().empty()) {
      sp.stdin_path = ExpandOutputPattern(req.stdin_pattern(), vars, cwd);
    }
    return Status::Ok();
  }

  void ReadPipe(size_t idx, int fd, uint32_t stream) {
    auto sd = std::make_shared<asio::posix::stream_descriptor>(ctx_.io, fd);
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
        (*read)();
      });
    };
    (*read)();
  }

  void MaybeReport(size_t idx) {
    Task& t = tasks_[idx];
    if (t.reported || !t.exited || t.open_pipes > 0) return;
    t.reported = true;
    if (t.pid > 0) {
      if (LocalJob* job = jobs_.Find(job_id_)) {
        job->children.erase(t.pid);
        jobs_.CheckClean(job_id_);
      }
    }
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

  // The controller keeps the step's state: tell it once every task here has ended.
  void ReportEnd() {
    if (reported_end_ || job_id_ == 0) return;
    reported_end_ = true;
    v1::AgentMessage m;
    auto* e = m.mutable_step_ended();
    e->set_job_id(job_id_);
    e->set_step_id(step_id_);
    e->set_run(run_);
    e->set_exit_code(exit_code_);
    e->set_signal(signal_);
    e->set_killed(killed_);
    ctx_.Send(m);
  }

  void SendOutput(uint32_t task, uint32_t stream, std::string data) {
    v1::StepEvent ev;
    ev.mutable_output()->set_task(task);
    ev.mutable_output()->set_stream(stream);
    ev.mutable_output()->set_data(std::move(data));
    Write(0, ev.SerializeAsString());
  }

  void Fail(const Status& s) {
    KillTasks();  // tasks started before the failure must not outlive the step
    Write(static_cast<uint32_t>(s.code()), s.message());
    done_ = true;
    if (exit_code_ == 0) exit_code_ = 1;
    ReportEnd();
  }

  void Write(uint32_t type, const std::string& payload) {
    queue_.push_back(EncodeFrame(type, payload));
    if (!writing_) WriteNext();
  }

  void WriteNext() {
    if (queue_.empty()) {
      writing_ = false;
      if (done_) Close();
      return;
    }
    writing_ = true;
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(queue_.front()), [this, self](auto ec, size_t) {
      queue_.pop_front();
      if (ec) {
        KillTasks();  // the client went away: so does the step
        queue_.clear();
        writing_ = false;
        return;
      }
      WriteNext();
    });
  }

  // After the launch the client sends signals (type 1), stdin (type 2) and terminal sizes
  // (type 3); when it closes the connection (or sends junk) the step ends, as when srun is
  // killed.
  void WatchClient() {
    Frame f;
    while (frames_.Pop(&f)) {
      const uint32_t type = f.type;
      const size_t len = f.payload.size();
      const bool ok = (type == 1 && len <= 64) || (type == 2 && len <= kMaxStdinFrame) ||
                      (type == 3 && len <= 64);
      if (!ok) {
        if (!done_) KillTasks();
        return;
      }
      if (type == 2) {
        ToStdin(f.payload);
        if (StdinBacklog() > kMaxStdinBacklog) {
          client_paused_ = true;  // resumed by WriteStdin once the tasks have read some
          return;
        }
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

  size_t StdinBacklog() const {
    size_t n = 0;
    for (const StdinSink& k : sinks_) n = std::max(n, k.queued);
    return n;
  }

  // Client stdin to every sink; an empty chunk is the end of input.
  void ToStdin(const std::string& data) {
    for (size_t i = 0; i < sinks_.size(); ++i) {
      StdinSink& k = sinks_[i];
      if (!k.fd || k.eof) continue;
      if (data.empty()) {
        k.eof = true;
      } else {
        k.queue.push_back(data);
        k.queued += data.size();
      }
      if (!k.writing) WriteStdin(i);
    }
  }

  void WriteStdin(size_t i) {
    StdinSink& k = sinks_[i];
    if (k.queue.empty()) {
      k.writing = false;
      if (k.eof && k.fd) {
        boost::system::error_code ignored;
        k.fd->close(ignored);  // the task reads end of file
        k.fd.reset();
      }
      if (client_paused_ && StdinBacklog() <= kMaxStdinBacklog / 2) {
        client_paused_ = false;
        WatchClient();
      }
      return;
    }
    k.writing = true;
    auto self = shared_from_this();
    asio::async_write(*k.fd, asio::buffer(k.queue.front()), [this, self, i](auto ec, size_t) {
      StdinSink& sink = sinks_[i];
      if (!sink.fd) {  // closed meanwhile (the step ended): the queue is gone too
        sink.writing = false;
        return;
      }
      if (ec) {
        // The task closed its stdin (or ended): what it did not read is dropped, as with a pipe.
        sink.queued = 0;
        sink.queue.clear();
        sink.eof = true;
      } else {
        sink.queued -= sink.queue.front().size();
        sink.queue.pop_front();
      }
      WriteStdin(i);
    });
  }

  void SignalTasks(int sig) {
    if (sig == SIGKILL) return KillTasks();
    for (const Task& t : tasks_) {
      if (t.pid > 0 && !t.exited) ctx_.launcher.Kill(-t.pid, sig);
    }
  }

  void KillTasks() {
    CloseStdin();
    for (const Task& t : tasks_) {
      if (t.pid > 0 && !t.exited) {
        ctx_.launcher.Kill(-t.pid, SIGKILL);
        killed_ = true;
      }
    }
    if (!step_cgroup_.empty() && step_cgroup_ != JobCgroupOf()) JobCgroups::Kill(step_cgroup_);
  }

  void CloseStdin() {
    for (StdinSink& k : sinks_) {
      if (!k.fd) continue;
      boost::system::error_code ignored;
      k.fd->close(ignored);
      k.fd.reset();
      k.queue.clear();
      k.queued = 0;
    }
    if (client_paused_) {
      client_paused_ = false;
      WatchClient();
    }
  }

  std::string JobCgroupOf() {
    LocalJob* job = jobs_.Find(job_id_);
    return job ? job->cgroup : "";
  }

  void Close() {
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  AgentContext& ctx_;
  JobSupervisor& jobs_;
  tcp::socket socket_;
  asio::steady_timer deadline_;
  std::shared_ptr<StepService::Counts> counts_;
  bool authenticated_ = false;  // the request's credential matched its job's
  FrameAssembler frames_{StepService::kMaxRequestBytes};
  std::array<char, 16 * 1024> chunk_;
  uint64_t job_id_ = 0;
  uint32_t step_id_ = 0;
  uint32_t run_ = 0;
  int exit_code_ = 0;  // the highest of the tasks here
  int signal_ = 0;
  bool killed_ = false;  // we killed tasks (the client went away, or the step failed)
  std::vector<StdinSink> sinks_;
  bool client_paused_ = false;  // too much stdin waits for the tasks: the client is not read
  int tty_fd_ = -1;             // srun --pty: the terminal's master side (owned by its reader)
  bool reported_end_ = false;
  std::string step_cgroup_;  // "" without cgroups
  std::vector<Task> tasks_;
  size_t reported_ = 0;
  bool done_ = false;
  std::deque<std::string> queue_;
  bool writing_ = false;
};

}  // namespace

StepService::StepService(AgentContext& ctx, JobSupervisor& jobs)
    : ctx_(ctx), jobs_(jobs), acceptor_(ctx.io) {}

Status StepService::Listen(const std::string& step_address, const std::string& hostname) {
  std::string host;
  uint16_t port = 0;
  MUSTER_RETURN_IF_ERROR_PREPEND(SplitHostPort(step_address, &host, &port), "agent.step_address");
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return InvalidArgument("agent.step_address: '" + host + "' is not an IP address");
  tcp::endpoint ep(addr, port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return FailedPrecondition("cannot listen for steps on " + step_address + ": " + ec.message());
  }
  const uint16_t bound = acceptor_.local_endpoint().port();
  std::string advertised = addr.is_unspecified() ? hostname : host;
  if (addr.is_v6() && !addr.is_unspecified()) advertised = "[" + host + "]";
  address_ = advertised + ":" + std::to_string(bound);
  Accept();
  return Status::Ok();
}

void StepService::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec != asio::error::operation_aborted) Accept();
      return;
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (counts_->sessions >= kMaxSessions || counts_->unauthenticated >= kMaxUnauthenticated) {
      // Dropped at once: a flood of idle connections cannot hold the port's memory, and steps
      // already running are not affected.
      spdlog::warn(
          "node={} step port: too many connections ({} open, {} not yet "
          "authenticated); refusing one",
          ctx_.node(), counts_->sessions, counts_->unauthenticated);
      socket.close(ignored);
      return Accept();
    }
    std::make_shared<StepSession>(ctx_, jobs_, std::move(socket), counts_)->Start();
    Accept();
  });
}

void StepService::Close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

}  // namespace muster::agent
