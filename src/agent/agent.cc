// musterd's logic. All job and step state is confined to the agent's single io thread; the
// controller link runs its own thread and posts what it receives here.
#include "muster/agent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "cgroup.h"
#include "controller_link.h"
#include "host_topology.h"
#include "infiniband.h"
#include "inventory.h"
#include "job_env.h"
#include "launcher.h"
#include "muster/common/clock.h"
#include "muster/common/framing.h"
#include "muster/common/hostlist.h"
#include "muster/common/output_pattern.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "muster/v1/agent.pb.h"
#include "muster/v1/node.pb.h"
#include "nvml.h"

namespace muster::agent {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using asio::ip::tcp;

namespace {
constexpr uint32_t kAnyRun = 0xffffffffu;
constexpr int kPollCleanMs = 50;
// After SIGKILL, processes that outlived their parent may linger as zombies of another reaper;
// give up waiting for them after this long (cgroups make this exact in a later version).
constexpr int kAfterKillMs = 1000;
struct ProcEntry {
  pid_t pid;
  char state;  // R, S, D, Z, X, ...
  pid_t ppid, pgrp;
};

// Every process on the machine, from /proc/PID/stat (the fields after "(command)").
std::vector<ProcEntry> ListProcesses() {
  std::vector<ProcEntry> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 > stat.size()) continue;
    std::istringstream rest(stat.substr(close + 2));
    ProcEntry p{static_cast<pid_t>(std::stol(name)), 0, 0, 0};
    long ppid = 0, pgrp = 0;
    if (rest >> p.state >> ppid >> pgrp) {
      p.ppid = static_cast<pid_t>(ppid);
      p.pgrp = static_cast<pid_t>(pgrp);
      out.push_back(p);
    }
  }
  return out;
}

// Whether a process group has a member that is not a zombie. Orphans are reaped by init, which
// may take its time; a zombie holds no resources and must not delay the cleanup.
bool GroupHasLiveProcess(pid_t pgid) {
  for (const ProcEntry& p : ListProcesses()) {
    if (p.pgrp == pgid && p.state != 'Z' && p.state != 'X') return true;
  }
  return false;
}

// Every process below `root` in the process tree (children, grandchildren, ...).
std::vector<pid_t> DescendantsOf(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  for (const ProcEntry& p : ListProcesses()) children.emplace(p.ppid, p.pid);
  std::vector<pid_t> out, todo{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

bool WriteFileCloexec(const std::string& path, const std::string& data, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      errno = err;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return ::close(fd) == 0;
}

}  // namespace

class Agent::Impl {
 public:
  explicit Impl(AgentOptions o)
      : options_(std::move(o)), step_acceptor_(io_), hb_timer_(io_), instance_id_(RandomHex(8)) {}

  Status Start();
  void Detach();
  // Stopping, shared by Detach and Shutdown.
  bool BeginStop();  // once, and only when started: stops the controller link
  size_t RunOnIo(const std::function<size_t()>& fn);
  void StopAccepting();  // io thread: no heartbeats, checks or new steps
  void StopIoThread();
  // What this node has (OS, GPUs from NVML or a fixture, hwloc, InfiniBand) into inventory_.
  Status Discover(const OsInventory& os);
  Status AddHostTopology(const std::string& xml);
  // The step port and the controller session.
  Status Listen(const OsInventory& os);
  void Shutdown();

  std::string step_address() const {
    std::lock_guard<std::mutex> l(mu_);
    return step_address_;
  }
  size_t num_jobs() const {
    std::lock_guard<std::mutex> l(mu_);
    return job_ids_.size();
  }

  AgentOptions options_;
  std::unique_ptr<ControllerLink> link_;
  const v1::NodeInventory& inventory() const { return inventory_; }

 private:
  class StepSession;

  struct LocalJob {
    v1::LaunchJob launch;
    std::string visible_devices;  // CUDA_VISIBLE_DEVICES: GPU indices and MIG UUIDs
    std::string dir;
    std::set<pid_t> children;    // our direct children (or adopted keepers) still running
    std::set<pid_t> pgids;       // process groups to signal (a group outlives its leader)
    std::set<pid_t> step_pgids;  // the step tasks among them (they end with the agent)
    pid_t keeper = -1;           // the batch script's keeper, which records its exit status
    uint64_t keeper_start = 0;
    pid_t task_pid = -1;  // the batch script
    std::string cgroup;   // the job's cgroup directory ("" without cgroups)
    bool prolog_running = false, epilog_running = false, epilog_done = false;
    std::string epilog_error, prolog_error;
    bool adopted = false;  // found in the spool dir at start
    bool started = false;
    bool exited = false;
    v1::BatchExited exit;
    bool timed_out = false;
    bool terminating = false;
    int64_t killed_at_ms = 0;  // monotonic time SIGKILL was sent
    std::unique_ptr<asio::steady_timer> limit_timer, kill_timer, poll_timer;
    uint32_t run() const { return launch.requeue_count(); }
  };

  // On the io thread.
  void OnMessage(const v1::ControllerMessage& msg);
  void OnConnected(const v1::RegisterResponse& resp);
  void Launch(const v1::LaunchJob& l);
  void StartJob(uint64_t id);  // after the prolog: the batch script, JobStarted
  void FailLaunch(uint64_t id, const std::string& why, bool node_fault);
  // The admin's scripts (prolog, epilog, health check): as root, clean environment, output
  // captured, killed after `timeout_s`. `done` gets "" on success, else why it failed.
  void RunAdminScript(const std::string& what, const std::string& program,
                      std::vector<std::string> env, uint32_t timeout_s,
                      std::function<void(const std::string& error)> done);
  std::vector<std::string> AdminScriptEnv(const LocalJob& job) const;
  void Terminate(const v1::TerminateJob& t);
  void StartKill(LocalJob& job, uint32_t grace_ms);
  void CheckClean(uint64_t job_id);
  void SignalJob(LocalJob& job, int sig);
  void WatchExit(pid_t pid, int pidfd, std::function<void(int status)> cb);
  // The batch script's end, from its keeper's record (the keeper is our child, or adopted).
  void WatchBatch(LocalJob& job, int pidfd, bool our_child);
  void BatchEnded(uint64_t id);
  // The cgroup limits of the job's share of this node (what the controllers here can enforce).
  JobCgroups::Limits CgroupLimits(const v1::LaunchJob& l) const;
  // Only the job's GPUs' device files are open to it (where BPF device filters work).
  Status LimitGpuDevices(const LocalJob& job);
  // Survival across agent restarts: job<ID>/state in the spool dir.
  Status SaveState(const LocalJob& job);
  void Readopt();
  void OnTimeLimit(uint64_t job_id);
  void Heartbeat();
  void AcceptSteps();
  void Send(const v1::AgentMessage& msg) {
    if (link_) link_->Send(msg);
  }
  void PublishJobIds();
  // GPU health: NVML (or the fault file in fixture mode) every gpu_health_interval_ms; changes
  // go to the controller, which drains the node and requeues the jobs on a sick GPU.
  std::map<uint32_t, std::string> GpuHealthNow();
  void GpuHealthTick();
  // The admin's health_check_program, every health_check_interval_s.
  void RunHealthCheck();
  void HealthCheckDone(const std::string& error);
  LocalJob* FindJob(uint64_t id) {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : it->second.get();
  }

  asio::io_context io_;
  std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread io_thread_;
  tcp::acceptor step_acceptor_;
  asio::steady_timer hb_timer_;
  std::string instance_id_;
  v1::NodeInventory inventory_;   // written on the io thread after Start, under mu_
  std::unique_ptr<Nvml> nvml_;    // io thread
  JobCgroups cgroups_;            // set in Start
  std::string fault_file_;        // fixture mode: injected GPU faults
  std::string fault_file_error_;  // io thread: the last complaint about it, said once
  std::map<uint32_t, std::string> base_health_;  // from the captures, fixture mode
  asio::steady_timer gpu_health_timer_{io_};
  asio::steady_timer check_timer_{io_};
  bool check_running_ = false;                          // io thread
  std::optional<v1::NodeHealth> last_check_;            // io thread: re-sent on reconnect
  std::map<uint64_t, std::unique_ptr<LocalJob>> jobs_;  // io thread
  uint64_t epoch_ = 0;                                  // io thread
  uint32_t hb_interval_ms_ = 5000;                      // io thread
  uint64_t hb_seq_ = 0;                                 // io thread
  bool shutting_down_ = false;                          // io thread
  std::mt19937 rng_{std::random_device{}()};

  mutable std::mutex mu_;
  std::string step_address_;            // mu_
  std::vector<uint64_t> job_ids_;       // mu_: snapshot for Register from the link thread
  std::vector<uint64_t> lost_job_ids_;  // mu_: started here before, state lost (Readopt)
  bool started_ = false;                // mu_
  bool stopped_ = false;                // mu_
};

// ---------------------------------------------------------------------------------------------
// A `muster run` connection: one request, then task output and exits streamed back.
class Agent::Impl::StepSession : public std::enable_shared_from_this<StepSession> {
 public:
  StepSession(Impl* agent, tcp::socket socket) : agent_(agent), socket_(std::move(socket)) {}
  ~StepSession() {
    if (tty_fd_ >= 0) ::close(tty_fd_);
  }

  void Start() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(header_, 8), [this, self](auto ec, size_t) {
      if (ec) return;
      uint32_t len = 0, type = 0;
      if (!DecodeFrameHeader(header_, &len, &type).ok()) return;
      body_.resize(len);
      asio::async_read(socket_, asio::buffer(body_), [this, self](auto ec2, size_t) {
        if (ec2) return;
        v1::StepLaunchRequest req;
        if (!req.ParseFromString(body_)) return Fail(InvalidArgument("bad step request"));
        Status s = Launch(req);
        if (!s.ok()) return Fail(s);
        WatchClient();
      });
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
    LocalJob* job = agent_->FindJob(req.job_id());
    if (!job || job->terminating || job->exited) {
      return FailedPrecondition("job " + std::to_string(req.job_id()) + " does not run on " +
                                agent_->options_.node_name);
    }
    if (req.credential() != job->launch.credential()) {
      return PermissionDenied("bad credential for job " + std::to_string(req.job_id()));
    }
    if (req.argv().empty()) return InvalidArgument("no command given");
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
    PatternVars vars;  // for -o/-e/-i
    vars.job_id = job_id_;
    vars.job_name = spec.name();
    vars.user = spec.user();
    vars.node = agent_->options_.node_name;
    vars.node_id = req.node_id();
    vars.step = std::to_string(req.step_id());
    if (job->launch.has_array()) {
      vars.array_job_id = job->launch.array().array_job_id();
      vars.array_task_id = job->launch.array().task_id();
    }
    std::set<std::string> truncated;  // output files of this step opened here already
    for (uint32_t local = 0; local < req.ntasks(); ++local) {
      Task t;
      t.id = req.first_task() + local;
      SpawnSpec sp;
      sp.argv.assign(req.argv().begin(), req.argv().end());
      sp.env = BuildTaskEnv(job->launch, agent_->options_.node_name, agent_->options_.config_path,
                            visible, req, local, launch_host);
      sp.cwd = req.work_dir().empty() ? spec.work_dir() : req.work_dir();
      sp.change_user = root && spec.uid() != 0;
      sp.uid = spec.uid();
      sp.gid = spec.gid();
      if (sp.change_user) sp.groups = GroupsOf(spec.user(), spec.gid());
      vars.task_id = t.id;
      TaskIo io;
      if (Status st = OpenTaskIo(req, vars, sp, t.id, truncated, &io); !st.ok()) {
        io.CloseAll();
        return st;
      }
      if (!step_cgroup_.empty()) {
        sp.cgroup_fd = ::open(step_cgroup_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      }
      auto spawned = Spawn(sp);
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
        sink.fd = std::make_shared<asio::posix::stream_descriptor>(agent_->io_, io.in);
        sinks_.push_back(std::move(sink));
      }
      auto self = shared_from_this();
      agent_->WatchExit(t.pid, spawned->pidfd, [this, self, idx](int status) {
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
    auto sd = std::make_shared<asio::posix::stream_descriptor>(agent_->io_, fd);
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
      if (LocalJob* job = agent_->FindJob(job_id_)) {
        job->children.erase(t.pid);
        agent_->CheckClean(job_id_);
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
    agent_->Send(m);
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
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(header_, 8), [this, self](auto ec, size_t) {
      uint32_t len = 0, type = 0;
      const bool ok = !ec && DecodeFrameHeader(header_, &len, &type).ok() &&
                      ((type == 1 && len <= 64) || (type == 2 && len <= kMaxStdinFrame) ||
                       (type == 3 && len <= 64));
      if (!ok) {
        if (!done_) KillTasks();
        return;
      }
      body_.resize(len);
      asio::async_read(socket_, asio::buffer(body_), [this, self, type](auto ec2, size_t) {
        if (ec2) {
          if (!done_) KillTasks();
          return;
        }
        if (type == 2) {
          ToStdin(body_);
          if (StdinBacklog() > kMaxStdinBacklog) {
            client_paused_ = true;  // resumed by WriteStdin once the tasks have read some
            return;
          }
        } else if (type == 3) {
          v1::StepWindow w;
          if (w.ParseFromString(body_) && tty_fd_ >= 0 && w.rows() > 0 && w.cols() > 0) {
            struct winsize ws {};
            ws.ws_row = static_cast<unsigned short>(w.rows());
            ws.ws_col = static_cast<unsigned short>(w.cols());
            ::ioctl(tty_fd_, TIOCSWINSZ, &ws);  // the task's foreground group gets SIGWINCH
          }
        } else {
          v1::StepSignal sig;
          if (!sig.ParseFromString(body_) || sig.signal() <= 0 || sig.signal() >= 65) {
            if (!done_) KillTasks();
            return;
          }
          SignalTasks(sig.signal());
        }
        WatchClient();
      });
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
      if (t.pid > 0 && !t.exited) ::kill(-t.pid, sig);
    }
  }

  void KillTasks() {
    CloseStdin();
    for (const Task& t : tasks_) {
      if (t.pid > 0 && !t.exited) {
        ::kill(-t.pid, SIGKILL);
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
    LocalJob* job = agent_->FindJob(job_id_);
    return job ? job->cgroup : "";
  }

  void Close() {
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  Impl* agent_;
  tcp::socket socket_;
  char header_[8];
  std::string body_;
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

// ---------------------------------------------------------------------------------------------

void Agent::Impl::WatchExit(pid_t pid, int pidfd, std::function<void(int)> cb) {
  auto sd = std::make_shared<asio::posix::stream_descriptor>(io_, pidfd);
  sd->async_wait(asio::posix::stream_descriptor::wait_read,
                 [sd, pid, cb = std::move(cb)](boost::system::error_code) {
                   int status = 0;
                   pid_t r;
                   do {
                     r = ::waitpid(pid, &status, 0);
                   } while (r < 0 && errno == EINTR);
                   cb(status);
                 });
}

void Agent::Impl::WatchBatch(LocalJob& job, int pidfd, bool our_child) {
  const uint64_t id = job.launch.job_id();
  const pid_t keeper = job.keeper;
  auto sd = std::make_shared<asio::posix::stream_descriptor>(io_, pidfd);
  sd->async_wait(asio::posix::stream_descriptor::wait_read, [this, sd, id, keeper, our_child](
                                                                boost::system::error_code ec) {
    if (ec == asio::error::operation_aborted) return;
    int status;
    // An adopted keeper is usually someone else's child (init's); reaping is
    // then not ours to do, and WNOHANG makes trying harmless.
    while (::waitpid(keeper, &status, our_child ? 0 : WNOHANG) < 0 && errno == EINTR) {
    }
    LocalJob* j = FindJob(id);
    if (!j || j->keeper != keeper) return;
    j->children.erase(keeper);
    BatchEnded(id);
  });
}

void Agent::Impl::BatchEnded(uint64_t id) {
  LocalJob* j = FindJob(id);
  if (!j || j->exited) return;
  int code = 0, sig = 0;
  auto status = ReadExitFile(j->dir + "/exit");
  if (status.ok()) {
    DecodeWaitStatus(*status, &code, &sig);
  } else {
    // The keeper was killed before the script ended: the status is unknowable.
    spdlog::error("job={} node={} the batch script's keeper died without recording its end ({})",
                  id, options_.node_name, status.status().message());
    sig = SIGKILL;
  }
  j->exited = true;
  j->exit.set_job_id(id);
  j->exit.set_exit_code(code);
  j->exit.set_signal(sig);
  j->exit.set_timed_out(j->timed_out);
  j->exit.set_run(j->run());
  spdlog::info("job={} node={} batch script exited code={} signal={}{}", id, options_.node_name,
               code, sig, j->timed_out ? " (time limit)" : "");
  v1::AgentMessage m;
  *m.mutable_batch_exited() = j->exit;
  Send(m);
  CheckClean(id);
}

JobCgroups::Limits Agent::Impl::CgroupLimits(const v1::LaunchJob& l) const {
  JobCgroups::Limits lim;
  const v1::NodeAllocation* me = nullptr;
  for (const auto& na : l.allocation().nodes()) {
    if (na.node() == options_.node_name) me = &na;
  }
  if (!me) return lim;
  lim.memory_mb = me->mem_mb();
  // CPU ids are the controller's view of this node; they bind only if this machine has them.
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  bool fits = me->cpu_ids_size() > 0;
  for (uint32_t c : me->cpu_ids()) fits = fits && static_cast<long>(c) < online;
  if (fits) {
    lim.cpus.assign(me->cpu_ids().begin(), me->cpu_ids().end());
    for (const auto& n : inventory_.numa_nodes()) {
      for (uint32_t c : n.cpus()) {
        if (std::find(lim.cpus.begin(), lim.cpus.end(), c) != lim.cpus.end()) {
          lim.mems.push_back(static_cast<int>(n.os_index()));
          break;
        }
      }
    }
  } else if (cgroups_.limits_cpus()) {
    spdlog::warn("job={} node={} CPU ids {} are not all on this machine ({} online): not pinned",
                 l.job_id(), options_.node_name, me->cpu_ids_size(), online);
  }
  return lim;
}

Status Agent::Impl::LimitGpuDevices(const LocalJob& job) {
  if (!cgroups_.limits_devices() || inventory_.gpus().empty()) return Status::Ok();
  std::vector<uint32_t> minors;
  for (uint32_t index : GpusTouched(job.launch, inventory_.gpus())) {
    const v1::GpuDevice* gpu = nullptr;
    for (const auto& g : inventory_.gpus()) {
      if (g.index() == index) gpu = &g;
    }
    if (!gpu || gpu->minor_number() < 0) {
      // Without the device's minor number the filter would lock the job out of its own GPU.
      spdlog::warn("job={} node={} gpu{} has no known /dev/nvidia minor: devices not filtered",
                   job.launch.job_id(), options_.node_name, index);
      return Status::Ok();
    }
    minors.push_back(static_cast<uint32_t>(gpu->minor_number()));
  }
  return JobCgroups::LimitGpus(job.cgroup, minors);
}

Status Agent::Impl::SaveState(const LocalJob& job) {
  v1::AgentJobState st;
  *st.mutable_launch() = job.launch;
  st.set_keeper_pid(job.keeper > 0 ? job.keeper : 0);
  st.set_keeper_start(job.keeper_start);
  st.set_task_pid(job.task_pid > 0 ? job.task_pid : 0);
  st.set_cgroup(job.cgroup);
  const std::string path = job.dir + "/state", tmp = path + ".tmp";
  if (!WriteFileCloexec(tmp, st.SerializeAsString(), 0600) || ::rename(tmp.c_str(), path.c_str())) {
    return Internal("cannot save the job's state to " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

// Jobs a previous agent left running: their state files, their keepers, their process groups.
void Agent::Impl::Readopt() {
  std::error_code ec;
  std::set<uint64_t> lost;  // started here, but nothing left to re-adopt
  for (const auto& e : fs::directory_iterator(options_.spool_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 4 || name.compare(0, 3, "job") != 0 ||
        !ParseUint(std::string_view(name).substr(3))) {
      continue;
    }
    const std::string dir = e.path().string();
    std::ifstream in(dir + "/state", std::ios::binary);
    if (!in) {
      // Its launch never finished (the agent stopped in between): nothing of it was started.
      fs::remove_all(dir, ec);
      continue;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    v1::AgentJobState st;
    if (!st.ParseFromString(ss.str()) || st.launch().job_id() == 0) {
      const std::string aside = dir + ".corrupt";
      fs::rename(dir, aside, ec);
      lost.insert(*ParseUint(std::string_view(name).substr(3)));
      spdlog::error(
          "node={} {}/state is corrupt; moved aside to {} (the controller will treat the job as "
          "lost on this node)",
          options_.node_name, dir, aside);
      continue;
    }
    auto job = std::make_unique<LocalJob>();
    const uint64_t id = st.launch().job_id();
    job->launch = st.launch();
    job->dir = dir;
    job->started = true;
    job->adopted = true;
    job->keeper = st.keeper_pid() > 0 ? st.keeper_pid() : -1;
    job->keeper_start = st.keeper_start();
    job->task_pid = st.task_pid() > 0 ? st.task_pid() : -1;
    job->cgroup = st.cgroup();
    auto visible = VisibleDevices(job->launch, inventory_.gpus());
    job->visible_devices = visible.ok() ? *visible : "";
    if (job->task_pid > 0) job->pgids.insert(job->task_pid);
    LocalJob& j = *job;
    jobs_[id] = std::move(job);
    std::string how = "no batch script here";
    if (j.keeper > 0) {
      int pidfd = -1;
      if (j.keeper_start != 0 && ProcessStartTime(j.keeper) == j.keeper_start) {
        pidfd = static_cast<int>(::syscall(SYS_pidfd_open, j.keeper, 0));
      }
      if (pidfd >= 0) {
        j.children.insert(j.keeper);
        WatchBatch(j, pidfd, /*our_child=*/false);
        how = "batch script running, keeper pid " + std::to_string(j.keeper);
      } else {
        how = "batch script ended while the agent was away";
        BatchEnded(id);  // reported when the session is up
      }
    }
    if (j.launch.time_limit_ms() > 0 && !j.exited) {
      int64_t remaining =
          j.launch.start_time_ms() + j.launch.time_limit_ms() - SystemClock::Get()->NowMs();
      j.limit_timer = std::make_unique<asio::steady_timer>(io_);
      j.limit_timer->expires_after(std::chrono::milliseconds(std::max<int64_t>(0, remaining)));
      j.limit_timer->async_wait([this, id](boost::system::error_code err) {
        if (!err) OnTimeLimit(id);
      });
    }
    spdlog::info("job={} node={} re-adopted after an agent restart ({})", id, options_.node_name,
                 how);
  }
  // Job cgroups no state file speaks for: their processes are unknown to us, so they end.
  for (const auto& [id, dir] : cgroups_.List()) {
    if (jobs_.count(id) && jobs_[id]->cgroup == dir) continue;
    const size_t n = JobCgroups::Pids(dir).size();
    spdlog::warn("node={} killing {} process(es) of job {} left in {} with no state to re-adopt",
                 options_.node_name, n, id, dir);
    JobCgroups::Kill(dir);
    for (int i = 0; i < 100 && !JobCgroups::Empty(dir); ++i) ::usleep(10'000);
    JobCgroups::Remove(dir).IgnoreError();
    if (!jobs_.count(id)) lost.insert(id);
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    lost_job_ids_.assign(lost.begin(), lost.end());
  }
  PublishJobIds();
}

void Agent::Impl::PublishJobIds() {
  std::vector<uint64_t> ids;
  for (const auto& [id, j] : jobs_) ids.push_back(id);
  std::lock_guard<std::mutex> l(mu_);
  job_ids_ = std::move(ids);
}

void Agent::Impl::SignalJob(LocalJob& job, int sig) {
  for (pid_t g : job.pgids) ::kill(-g, sig);
  if (!job.cgroup.empty()) {
    if (sig == SIGKILL) {
      JobCgroups::Kill(job.cgroup);
    } else {
      JobCgroups::Signal(job.cgroup, sig);
    }
  } else if (job.keeper > 0 && !job.exited) {
    // No cgroup: processes that left the process group are still the keeper's descendants
    // (it is their subreaper).
    for (pid_t p : DescendantsOf(job.keeper)) ::kill(p, sig);
  }
}

void Agent::Impl::OnMessage(const v1::ControllerMessage& msg) {
  if (msg.epoch() < epoch_) {
    spdlog::warn("node={} refuses a command from an older controller epoch {} (current {})",
                 options_.node_name, msg.epoch(), epoch_);
    return;
  }
  switch (msg.msg_case()) {
    case v1::ControllerMessage::kLaunchJob:
      Launch(msg.launch_job());
      break;
    case v1::ControllerMessage::kTerminateJob:
      Terminate(msg.terminate_job());
      break;
    case v1::ControllerMessage::kSignalJob: {
      const v1::SignalJob& s = msg.signal_job();
      LocalJob* job = FindJob(s.job_id());
      if (!job || job->run() != s.run() || job->terminating || s.signal() <= 0 ||
          s.signal() >= 65) {
        break;
      }
      if (s.steps() && s.batch()) {
        SignalJob(*job, s.signal());
        break;
      }
      if (s.steps()) {
        for (pid_t g : job->step_pgids) ::kill(-g, s.signal());
      }
      if (s.batch() && job->task_pid > 0 && !job->exited) ::kill(-job->task_pid, s.signal());
      break;
    }
    default:
      spdlog::warn("node={} got an unknown command; ignored", options_.node_name);
  }
}

void Agent::Impl::OnConnected(const v1::RegisterResponse& resp) {
  if (resp.epoch() < epoch_) {
    // A controller older than one we have obeyed (a stale primary come back): its commands are
    // refused by OnMessage; say so once here.
    spdlog::error(
        "node={} registered with controller epoch {}, older than epoch {} seen before; "
        "its commands will be refused",
        options_.node_name, resp.epoch(), epoch_);
  } else if (resp.epoch() > epoch_) {
    epoch_ = resp.epoch();
    // Remembered across agent restarts, so a stale controller stays fenced off.
    const std::string path = options_.spool_dir + "/controller-epoch";
    if (!WriteFileCloexec(path + ".tmp", std::to_string(epoch_) + "\n", 0600) ||
        ::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
      spdlog::warn("node={} cannot save the controller epoch to {}", options_.node_name, path);
    }
  }
  hb_interval_ms_ = std::max<uint32_t>(50, resp.heartbeat_interval_ms());
  // Events sent while the controller was away are sent again; it ignores what it already knows.
  for (const auto& [id, job] : jobs_) {
    if (job->started && !job->terminating) {
      v1::AgentMessage m;
      m.mutable_job_started()->set_job_id(id);
      m.mutable_job_started()->set_run(job->run());
      Send(m);
    }
    if (job->exited) {
      v1::AgentMessage m;
      *m.mutable_batch_exited() = job->exit;
      Send(m);
    }
  }
  if (last_check_) {
    v1::AgentMessage m;
    *m.mutable_node_health() = *last_check_;
    Send(m);
  }
  Heartbeat();
}

void Agent::Impl::Heartbeat() {
  hb_timer_.cancel();
  if (shutting_down_) return;
  v1::AgentMessage m;
  m.mutable_heartbeat()->set_seq(++hb_seq_);
  for (const auto& [id, j] : jobs_) m.mutable_heartbeat()->add_running_job_ids(id);
  Send(m);
  // +-10% jitter so a cluster's heartbeats do not arrive in lockstep.
  int jitter = static_cast<int>(hb_interval_ms_ / 10);
  int ms =
      static_cast<int>(hb_interval_ms_) + std::uniform_int_distribution<int>(-jitter, jitter)(rng_);
  hb_timer_.expires_after(std::chrono::milliseconds(ms));
  hb_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Heartbeat();
  });
}

void Agent::Impl::Launch(const v1::LaunchJob& l) {
  if (shutting_down_) return;
  const uint64_t id = l.job_id();
  if (LocalJob* existing = FindJob(id)) {
    if (existing->run() == l.requeue_count()) {
      if (existing->started) {  // a repeated launch: confirm again
        v1::AgentMessage m;
        m.mutable_job_started()->set_job_id(id);
        m.mutable_job_started()->set_run(l.requeue_count());
        Send(m);
      }
      return;  // (or its prolog is still running: it answers when done)
    }
    spdlog::warn("job={} node={} new run {} while run {} is still here; killing the old one", id,
                 options_.node_name, l.requeue_count(), existing->run());
    SignalJob(*existing, SIGKILL);
    jobs_.erase(id);
  }
  auto job = std::make_unique<LocalJob>();
  job->launch = l;
  job->dir = options_.spool_dir + "/job" + std::to_string(id);
  LocalJob& j = *job;
  jobs_[id] = std::move(job);
  const v1::JobSpec& spec = l.spec();
  const bool root = ::geteuid() == 0;
  if (!root && spec.uid() != ::geteuid()) {
    return FailLaunch(id,
                      "musterd runs as uid " + std::to_string(::geteuid()) +
                          ", not root, so it cannot run jobs of uid " + std::to_string(spec.uid()),
                      false);
  }
  auto visible = VisibleDevices(l, inventory_.gpus());
  if (!visible.ok()) return FailLaunch(id, visible.status().message(), false);
  j.visible_devices = *visible;
  std::error_code ec;
  fs::create_directories(j.dir, ec);
  if (ec) return FailLaunch(id, "cannot create spool dir " + j.dir + ": " + ec.message(), false);
  ::chmod(j.dir.c_str(), 0700);
  if (root && ::chown(j.dir.c_str(), spec.uid(), spec.gid()) != 0) {
    return FailLaunch(
        id, "cannot hand spool dir " + j.dir + " to uid " + std::to_string(spec.uid()), false);
  }
  if (cgroups_.enabled()) {
    auto cg = cgroups_.Create(id, CgroupLimits(l));
    if (!cg.ok()) return FailLaunch(id, cg.status().message(), false);
    j.cgroup = *cg;
    if (Status st = LimitGpuDevices(j); !st.ok()) return FailLaunch(id, st.message(), false);
  }
  PublishJobIds();
  const std::string& prolog = options_.config.agent.prolog;
  if (prolog.empty()) return StartJob(id);
  j.prolog_running = true;
  RunAdminScript(
      "prolog", prolog, AdminScriptEnv(j), options_.config.agent.prolog_timeout_s,
      [this, id](const std::string& error) {
        LocalJob* pj = FindJob(id);
        if (!pj || !pj->prolog_running) return;
        pj->prolog_running = false;
        if (!error.empty() && pj->terminating) {
          // Cancelled meanwhile: the controller waits for JobCleaned, which carries
          // the failure so that the node is still drained.
          pj->prolog_error = StartsWith(error, "prolog") ? error : "prolog failed: " + error;
          spdlog::error("job={} node={} {}", id, options_.node_name, error);
          return CheckClean(id);
        }
        if (!error.empty()) {
          spdlog::error("job={} node={} {}", id, options_.node_name, error);
          return FailLaunch(id, StartsWith(error, "prolog") ? error : "prolog failed: " + error,
                            /*node_fault=*/true);
        }
        if (pj->terminating) return CheckClean(id);  // cancelled meanwhile
        StartJob(id);
      });
}

void Agent::Impl::FailLaunch(uint64_t id, const std::string& why, bool node_fault) {
  LocalJob* job = FindJob(id);
  if (!job) return;
  std::error_code ignored;
  fs::remove_all(job->dir, ignored);
  if (!job->cgroup.empty()) {
    JobCgroups::Kill(job->cgroup);
    JobCgroups::Remove(job->cgroup).IgnoreError();
  }
  spdlog::warn("job={} node={} launch failed: {}", id, options_.node_name, why);
  v1::AgentMessage m;
  m.mutable_job_launch_failed()->set_job_id(id);
  m.mutable_job_launch_failed()->set_run(job->run());
  m.mutable_job_launch_failed()->set_message(why);
  m.mutable_job_launch_failed()->set_node_fault(node_fault);
  jobs_.erase(id);
  PublishJobIds();
  Send(m);
}

void Agent::Impl::StartJob(uint64_t id) {
  LocalJob& j = *FindJob(id);
  const v1::LaunchJob& l = j.launch;
  const v1::JobSpec& spec = l.spec();
  const bool root = ::geteuid() == 0;
  if (l.batch_node()) {
    if (spec.script().rfind("#!", 0) != 0) {
      return FailLaunch(
          id, "the launch carries no batch script (the controller could not read it back)", false);
    }
    std::string script = j.dir + "/script";
    // Close-on-exec, so a process started meanwhile never holds it open for writing (which
    // would make executing it fail with ETXTBSY).
    if (!WriteFileCloexec(script, spec.script(), 0700)) {
      return FailLaunch(
          id, "cannot write the batch script to " + script + ": " + std::strerror(errno), false);
    }
    if (root && ::chown(script.c_str(), spec.uid(), spec.gid()) != 0) {
      return FailLaunch(id, "cannot hand the batch script to uid " + std::to_string(spec.uid()),
                        false);
    }
    PatternVars vars;
    vars.job_id = id;
    vars.job_name = spec.name();
    vars.user = spec.user();
    vars.node = options_.node_name;
    if (l.has_array()) {
      vars.array_job_id = l.array().array_job_id();
      vars.array_task_id = l.array().task_id();
    }
    SpawnSpec sp;
    sp.argv.push_back(script);
    for (const auto& a : spec.script_args()) sp.argv.push_back(a);
    sp.env = BuildBatchEnv(l, options_.node_name, options_.config_path, j.visible_devices);
    sp.cwd = spec.work_dir();
    sp.change_user = root && spec.uid() != 0;
    sp.uid = spec.uid();
    sp.gid = spec.gid();
    if (sp.change_user) sp.groups = GroupsOf(spec.user(), spec.gid());
    sp.stdout_path = ExpandOutputPattern(spec.stdout_pattern(), vars, spec.work_dir());
    sp.stderr_path = spec.stderr_pattern().empty()
                         ? sp.stdout_path
                         : ExpandOutputPattern(spec.stderr_pattern(), vars, spec.work_dir());
    // A keeper waits for the script and records how it ended, so a restarted agent still knows.
    sp.exit_file = j.dir + "/exit";
    // Every process of the job starts in its cgroup (a write of "0" by the child itself).
    if (!j.cgroup.empty()) {
      sp.cgroup_fd = ::open(j.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    auto spawned = Spawn(sp);
    if (sp.cgroup_fd >= 0) ::close(sp.cgroup_fd);
    if (!spawned.ok()) return FailLaunch(id, spawned.status().message(), false);
    j.keeper = spawned->pid;
    j.keeper_start = ProcessStartTime(spawned->pid);
    j.task_pid = spawned->task_pid;
    j.children.insert(j.keeper);
    j.pgids.insert(j.task_pid);
    WatchBatch(j, spawned->pidfd, /*our_child=*/true);
    spdlog::info("job={} node={} batch script started pid={} keeper={} user={}", id,
                 options_.node_name, j.task_pid, j.keeper, spec.user());
  }
  j.started = true;
  if (Status st = SaveState(j); !st.ok()) {
    // Not fatal: the job runs; it would only be lost if this agent restarted before it ends.
    spdlog::error("job={} node={} {}", id, options_.node_name, st.ToString());
  }
  if (l.time_limit_ms() > 0) {
    int64_t remaining = l.start_time_ms() + l.time_limit_ms() - SystemClock::Get()->NowMs();
    j.limit_timer = std::make_unique<asio::steady_timer>(io_);
    j.limit_timer->expires_after(std::chrono::milliseconds(std::max<int64_t>(0, remaining)));
    j.limit_timer->async_wait([this, id](boost::system::error_code e) {
      if (!e) OnTimeLimit(id);
    });
  }
  v1::AgentMessage m;
  m.mutable_job_started()->set_job_id(id);
  m.mutable_job_started()->set_run(l.requeue_count());
  Send(m);
}

void Agent::Impl::OnTimeLimit(uint64_t id) {
  LocalJob* job = FindJob(id);
  if (!job || job->exited || job->terminating) return;
  spdlog::info("job={} node={} reached its time limit; SIGTERM, SIGKILL after {} ms", id,
               options_.node_name, job->launch.kill_grace_ms());
  job->timed_out = true;
  StartKill(*job, job->launch.kill_grace_ms());
}

void Agent::Impl::StartKill(LocalJob& job, uint32_t grace_ms) {
  SignalJob(job, SIGCONT);  // a stopped process cannot act on SIGTERM
  SignalJob(job, SIGTERM);
  if (job.kill_timer) return;
  const uint64_t id = job.launch.job_id();
  job.kill_timer = std::make_unique<asio::steady_timer>(io_);
  job.kill_timer->expires_after(std::chrono::milliseconds(grace_ms));
  job.kill_timer->async_wait([this, id](boost::system::error_code e) {
    if (e) return;
    if (LocalJob* j = FindJob(id)) {
      SignalJob(*j, SIGKILL);
      j->killed_at_ms = MonotonicMs();
      CheckClean(id);
    }
  });
}

void Agent::Impl::Terminate(const v1::TerminateJob& t) {
  LocalJob* job = FindJob(t.job_id());
  if (!job) {
    v1::AgentMessage m;
    m.mutable_job_cleaned()->set_job_id(t.job_id());
    m.mutable_job_cleaned()->set_run(t.run());
    Send(m);
    return;
  }
  if (t.run() != kAnyRun && job->run() > t.run()) return;  // aimed at an older run
  if (!job->terminating) {
    spdlog::info("job={} node={} terminating: {}", t.job_id(), options_.node_name, t.reason());
    job->terminating = true;
    if (job->limit_timer) job->limit_timer->cancel();
    StartKill(*job, t.kill_grace_ms());
  }
  CheckClean(t.job_id());
}

void Agent::Impl::CheckClean(uint64_t id) {
  LocalJob* job = FindJob(id);
  if (!job || !job->terminating) return;
  bool groups_empty = true;
  if (!job->cgroup.empty()) {
    groups_empty = JobCgroups::Empty(job->cgroup);  // exact: daemonized processes included
  } else {
    for (pid_t g : job->pgids) {
      if (::kill(-g, 0) == 0 && GroupHasLiveProcess(g)) groups_empty = false;
    }
  }
  bool gave_up = job->killed_at_ms && MonotonicMs() - job->killed_at_ms > kAfterKillMs;
  if (!job->children.empty() || (!groups_empty && !gave_up)) {
    if (!job->poll_timer) {
      job->poll_timer = std::make_unique<asio::steady_timer>(io_);
    }
    job->poll_timer->expires_after(std::chrono::milliseconds(kPollCleanMs));
    job->poll_timer->async_wait([this, id](boost::system::error_code e) {
      if (!e) CheckClean(id);
    });
    return;
  }
  if (job->prolog_running || job->epilog_running) return;  // its completion comes back here
  if (!groups_empty) {
    spdlog::warn("job={} node={} some processes survived SIGKILL (zombies?); releasing anyway", id,
                 options_.node_name);
  }
  const std::string& epilog = options_.config.agent.epilog;
  if (!epilog.empty() && !job->epilog_done && job->started) {
    job->epilog_running = true;
    RunAdminScript("epilog", epilog, AdminScriptEnv(*job), options_.config.agent.epilog_timeout_s,
                   [this, id](const std::string& error) {
                     LocalJob* j = FindJob(id);
                     if (!j) return;
                     j->epilog_running = false;
                     j->epilog_done = true;
                     j->epilog_error = error;
                     if (!error.empty()) {
                       spdlog::error("job={} node={} {}", id, options_.node_name, error);
                     }
                     CheckClean(id);
                   });
    return;
  }
  std::error_code ec;
  fs::remove_all(job->dir, ec);
  if (!job->cgroup.empty()) {
    if (Status st = JobCgroups::Remove(job->cgroup); !st.ok()) {
      spdlog::warn("job={} node={} {}", id, options_.node_name, st.message());
    }
  }
  if (job->launch.batch_node() && !job->exited && job->keeper < 0) {
    // Stopped before its script started (during the prolog): its end is still the job's end.
    v1::AgentMessage b;
    b.mutable_batch_exited()->set_job_id(id);
    b.mutable_batch_exited()->set_signal(SIGTERM);
    b.mutable_batch_exited()->set_timed_out(job->timed_out);
    b.mutable_batch_exited()->set_run(job->run());
    Send(b);
  }
  v1::AgentMessage m;
  m.mutable_job_cleaned()->set_job_id(id);
  m.mutable_job_cleaned()->set_run(job->run());
  m.mutable_job_cleaned()->set_epilog_error(job->epilog_error);
  m.mutable_job_cleaned()->set_prolog_error(job->prolog_error);
  jobs_.erase(id);
  PublishJobIds();
  Send(m);
  spdlog::info("job={} node={} cleaned up", id, options_.node_name);
}

std::map<uint32_t, std::string> Agent::Impl::GpuHealthNow() {
  std::map<uint32_t, std::string> now;
  if (nvml_) return nvml_->Health();
  for (const auto& [index, why] : base_health_) {
    if (!why.empty()) now[index] = why;
  }
  if (fault_file_.empty()) return now;
  std::ifstream in(fault_file_);
  if (!in) return now;  // no faults injected
  std::stringstream ss;
  ss << in.rdbuf();
  auto faults = ParseGpuFaults(ss.str());
  if (!faults.ok()) {
    if (faults.status().message() != fault_file_error_) {  // once per mistake, not every tick
      fault_file_error_ = faults.status().message();
      spdlog::warn("node={} ignoring {}: {}", options_.node_name, fault_file_, fault_file_error_);
    }
    return now;
  }
  fault_file_error_.clear();
  for (const auto& [index, why] : *faults) now.emplace(index, why);
  return now;
}

void Agent::Impl::GpuHealthTick() {
  if (shutting_down_) return;
  std::map<uint32_t, std::string> now = GpuHealthNow();
  std::vector<v1::GpuHealth> changes;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& g : *inventory_.mutable_gpus()) {
      auto it = now.find(g.index());
      const std::string why = it == now.end() ? "" : it->second;
      if (why == g.health()) continue;
      g.set_health(why);
      v1::GpuHealth h;
      h.set_index(g.index());
      h.set_health(why);
      changes.push_back(std::move(h));
    }
  }
  for (const auto& h : changes) {
    if (h.health().empty()) {
      spdlog::info("node={} gpu{} is healthy again", options_.node_name, h.index());
    } else {
      spdlog::error("node={} gpu{} unhealthy: {}", options_.node_name, h.index(), h.health());
    }
    v1::AgentMessage m;
    *m.mutable_gpu_health() = h;
    Send(m);  // lost while disconnected: the next registration carries the health
  }
  gpu_health_timer_.expires_after(
      std::chrono::milliseconds(options_.config.agent.gpu_health_interval_ms));
  gpu_health_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) GpuHealthTick();
  });
}

void Agent::Impl::RunAdminScript(const std::string& what, const std::string& program,
                                 std::vector<std::string> env, uint32_t timeout_s,
                                 std::function<void(const std::string&)> done) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return done(what + ": pipe: " + std::strerror(errno));
  }
  SpawnSpec sp;
  sp.argv = {program};
  // As root, with a clean environment: nothing of any user's leaks into the admin's script.
  sp.env = std::move(env);
  sp.env.push_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  sp.env.push_back("MUSTER_NODE=" + options_.node_name);
  sp.env.push_back("MUSTER_CONF=" + options_.config_path);
  sp.cwd = "/";
  sp.stdout_fd = out[1];
  sp.stderr_fd = out[1];
  auto spawned = Spawn(sp);
  ::close(out[1]);
  if (!spawned.ok()) {
    ::close(out[0]);
    return done(what + " failed: cannot run " + program + ": " + spawned.status().message());
  }
  struct Run {
    std::string output;
    bool eof = false, exited = false, timed_out = false;
    int status = 0;
  };
  auto run = std::make_shared<Run>();
  const pid_t pid = spawned->pid;
  auto timeout = std::make_shared<asio::steady_timer>(io_);
  auto finish = [run, timeout, what, timeout_s, done] {
    if (!run->eof || !run->exited) return;
    timeout->cancel();
    int code = 0, sig = 0;
    DecodeWaitStatus(run->status, &code, &sig);
    if (code == 0 && sig == 0 && !run->timed_out) return done("");
    // The reason is the first line with text, as Slurm's health check reports it.
    std::string first;
    for (const auto& line : Split(run->output, '\n')) {
      if (!Trim(line).empty()) {
        first = std::string(Trim(line)).substr(0, 200);
        break;
      }
    }
    if (run->timed_out) {
      first = what + " timed out after " + std::to_string(timeout_s) + "s";
    } else if (first.empty()) {
      first = sig ? what + " killed by signal " + std::to_string(sig)
                  : what + " exited with code " + std::to_string(code);
    }
    done(first);
  };
  timeout->expires_after(std::chrono::seconds(timeout_s));
  timeout->async_wait([run, pid](boost::system::error_code ec) {
    if (ec || run->exited) return;
    run->timed_out = true;
    ::kill(-pid, SIGKILL);
  });
  auto sd = std::make_shared<asio::posix::stream_descriptor>(io_, out[0]);
  auto buf = std::make_shared<std::array<char, 4096>>();
  auto read = std::make_shared<std::function<void()>>();
  *read = [sd, buf, run, read, finish] {
    sd->async_read_some(asio::buffer(*buf), [sd, buf, run, read, finish](auto ec, size_t n) {
      if (run->output.size() < 65536) run->output.append(buf->data(), n);
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
  WatchExit(pid, spawned->pidfd, [run, finish](int status) {
    run->exited = true;
    run->status = status;
    finish();
  });
}

std::vector<std::string> Agent::Impl::AdminScriptEnv(const LocalJob& job) const {
  const v1::LaunchJob& l = job.launch;
  std::vector<std::string> names;
  for (const auto& na : l.allocation().nodes()) names.push_back(na.node());
  std::vector<std::string> env = {
      "SLURM_JOB_ID=" + std::to_string(l.job_id()),
      "SLURM_JOBID=" + std::to_string(l.job_id()),
      "SLURM_JOB_USER=" + l.spec().user(),
      "SLURM_JOB_UID=" + std::to_string(l.spec().uid()),
      "SLURM_JOB_GID=" + std::to_string(l.spec().gid()),
      "SLURM_JOB_NAME=" + l.spec().name(),
      "SLURM_JOB_NODELIST=" + CompressHostlist(names),
      "SLURM_JOB_PARTITION=" + l.allocation().partition(),
      "SLURM_CLUSTER_NAME=" + l.cluster_name(),
      "SLURMD_NODENAME=" + options_.node_name,
      "SLURM_JOB_GPUS=" + GpuList(l),
      "CUDA_VISIBLE_DEVICES=" + job.visible_devices,
      "MUSTER_JOB_CGROUP=" + job.cgroup,
  };
  return env;
}

void Agent::Impl::RunHealthCheck() {
  if (shutting_down_) return;
  const AgentConfig& c = options_.config.agent;
  check_timer_.expires_after(std::chrono::seconds(c.health_check_interval_s));
  check_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) RunHealthCheck();
  });
  if (check_running_) return;  // the last one has not finished: it has its own timeout
  check_running_ = true;
  RunAdminScript("health check", c.health_check_program, {}, c.health_check_timeout_s,
                 [this](const std::string& error) {
                   check_running_ = false;
                   HealthCheckDone(error);
                 });
}

void Agent::Impl::HealthCheckDone(const std::string& error) {
  v1::NodeHealth h;
  h.set_ok(error.empty());
  h.set_reason(error);
  if (!last_check_ || last_check_->ok() != h.ok() || last_check_->reason() != h.reason()) {
    if (h.ok()) {
      spdlog::info("node={} health check passes", options_.node_name);
    } else {
      spdlog::error("node={} health check failed: {}", options_.node_name, h.reason());
    }
  }
  last_check_ = h;
  v1::AgentMessage m;
  *m.mutable_node_health() = h;
  Send(m);
}

void Agent::Impl::AcceptSteps() {
  step_acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec != asio::error::operation_aborted) AcceptSteps();
      return;
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<StepSession>(this, std::move(socket))->Start();
    AcceptSteps();
  });
}

// CPU and PCI layout from hwloc. A captured XML that cannot be read is an error (the admin asked
// for it); the live machine failing only costs the detail, and the node still works.
Status Agent::Impl::AddHostTopology(const std::string& xml) {
  auto topo = ProbeHostTopology(xml);
  if (!topo.ok()) {
    if (!xml.empty()) return topo.status();
    spdlog::warn("node={} no hwloc topology: {}", options_.node_name, topo.status().message());
    inventory_.set_topology_source("none: " + topo.status().message());
    topo = HostTopology{};  // the HCAs from sysfs are still worth reporting
  } else {
    inventory_.set_topology_source(xml.empty() ? "hwloc" : "hwloc-xml:" + xml);
  }
  inventory_.set_packages(topo->packages);
  inventory_.set_cores(topo->cores);
  inventory_.set_threads(topo->pus);
  for (const auto& n : topo->numa) {
    v1::NumaNode* out = inventory_.add_numa_nodes();
    out->set_os_index(n.os_index);
    for (uint32_t c : n.pus) out->add_cpus(c);
  }
  for (const auto& h : topo->hcas) {
    v1::Hca* out = inventory_.add_hcas();
    out->set_name(h.name);
    out->set_pci_bus_id(h.pci_bus_id);
    out->set_numa_node(h.numa);
    out->set_node_guid(h.node_guid);
  }
  // Port state, rate and link layer from sysfs; HCAs hwloc did not see are added.
  if (xml.empty()) {
    for (const IbDevice& d : ProbeInfiniband()) {
      v1::Hca* hca = nullptr;
      for (auto& h : *inventory_.mutable_hcas()) {
        if (h.name() == d.name) hca = &h;
      }
      if (!hca) {
        hca = inventory_.add_hcas();
        hca->set_name(d.name);
        hca->set_pci_bus_id(d.pci_bus_id);
        hca->set_numa_node(d.numa);
        hca->set_node_guid(d.node_guid);
      }
      for (const IbPort& p : d.ports) {
        v1::IbPort* out = hca->add_ports();
        out->set_port(p.port);
        out->set_state(p.state);
        out->set_rate_gbps(p.rate_gbps);
        out->set_link_layer(p.link_layer);
      }
    }
  }
  for (const auto& g : topo->gpus) {
    v1::PciGpu* out = inventory_.add_pci_gpus();
    out->set_pci_bus_id(g.pci_bus_id);
    out->set_numa_node(g.numa);
    for (const auto& d : g.os_devices) out->add_os_devices(d);
  }
  return Status::Ok();
}

Status Agent::Impl::Start() {
  AgentOptions& o = options_;
  OsInventory os = ProbeOs();
  if (o.node_name.empty()) o.node_name = os.hostname;
  if (o.spool_dir.empty()) o.spool_dir = o.config.agent.spool_dir + "/" + o.node_name;
  if (o.step_address.empty()) o.step_address = o.config.agent.step_address;
  if (o.controller_address.empty()) o.controller_address = o.config.controller.agent_address;
  std::error_code ec;
  fs::create_directories(o.spool_dir, ec);
  if (ec) return Internal("cannot create spool dir " + o.spool_dir + ": " + ec.message());
  MUSTER_RETURN_IF_ERROR(Discover(os));
  cgroups_ = JobCgroups::Detect(o.config.agent.cgroup_root, o.node_name);
  inventory_.set_isolation(cgroups_.description());
  if (cgroups_.enabled()) {
    spdlog::info("node={} isolation: {}", o.node_name, cgroups_.description());
  } else {
    spdlog::warn("node={} isolation: {}", o.node_name, cgroups_.description());
  }
  return Listen(os);
}

Status Agent::Impl::Discover(const OsInventory& os) {
  AgentOptions& o = options_;
  inventory_.set_name(o.node_name);
  inventory_.set_hostname(os.hostname);
  inventory_.set_cpus(os.cpus);
  inventory_.set_memory_mb(os.memory_mb);
  inventory_.set_agent_version(kVersion);
  if (!o.gpu_fixture.empty()) {
    MUSTER_ASSIGN_OR_RETURN(GpuFixture f, LoadGpuFixture(o.gpu_fixture));
    if (f.cpus) inventory_.set_cpus(f.cpus);
    if (f.memory_mb) inventory_.set_memory_mb(f.memory_mb);
    for (auto& g : f.gpus) {
      base_health_[g.index()] = g.health();
      *inventory_.add_gpus() = std::move(g);
    }
    inventory_.set_gpu_source("fixture");
    fault_file_ = o.gpu_faults.empty() ? o.spool_dir + "/gpu-faults" : o.gpu_faults;
  } else {
    auto nvml = Nvml::Open();
    if (nvml.ok()) {
      nvml_ = std::move(*nvml);
      for (auto& g : nvml_->Devices()) *inventory_.add_gpus() = std::move(g);
      inventory_.set_gpu_source("nvml");
    } else {
      spdlog::info("node={} no GPUs: {}", o.node_name, nvml.status().message());
      inventory_.set_gpu_source("none");
    }
  }
  for (const auto& [index, why] : GpuHealthNow()) {
    if (index < static_cast<uint32_t>(inventory_.gpus_size())) {
      inventory_.mutable_gpus(static_cast<int>(index))->set_health(why);
    }
  }
  for (const auto& g : inventory_.gpus()) {
    if (!g.health().empty()) spdlog::warn("node={} gpu{}: {}", o.node_name, g.index(), g.health());
  }

  return AddHostTopology(o.topology_xml);
}

Status Agent::Impl::Listen(const OsInventory& os) {
  AgentOptions& o = options_;

  std::string host;
  uint16_t port = 0;
  MUSTER_RETURN_IF_ERROR_PREPEND(SplitHostPort(o.step_address, &host, &port), "agent.step_address");
  boost::system::error_code bec;
  auto addr = asio::ip::make_address(host, bec);
  if (bec) return InvalidArgument("agent.step_address: '" + host + "' is not an IP address");
  tcp::endpoint ep(addr, port);
  step_acceptor_.open(ep.protocol(), bec);
  if (!bec) step_acceptor_.set_option(tcp::acceptor::reuse_address(true), bec);
  if (!bec) step_acceptor_.bind(ep, bec);
  if (!bec) step_acceptor_.listen(asio::socket_base::max_listen_connections, bec);
  if (bec)
    return FailedPrecondition("cannot listen for steps on " + o.step_address + ": " +
                              bec.message());
  uint16_t bound = step_acceptor_.local_endpoint().port();
  std::string advertised = addr.is_unspecified() ? os.hostname : host;
  if (addr.is_v6() && !addr.is_unspecified()) advertised = "[" + host + "]";
  {
    std::lock_guard<std::mutex> l(mu_);
    step_address_ = advertised + ":" + std::to_string(bound);
    started_ = true;
  }
  inventory_.set_step_address(step_address_);

  ControllerLink::Callbacks cb;
  cb.make_register = [this] {
    v1::RegisterRequest r;
    r.set_instance_id(instance_id_);
    std::lock_guard<std::mutex> l(mu_);
    *r.mutable_inventory() = inventory_;
    for (uint64_t id : job_ids_) r.add_running_job_ids(id);
    for (uint64_t id : lost_job_ids_) r.add_lost_job_ids(id);
    return r;
  };
  cb.on_connected = [this](const v1::RegisterResponse& resp) {
    asio::post(io_, [this, resp] { OnConnected(resp); });
  };
  cb.on_message = [this](v1::ControllerMessage m) {
    asio::post(io_, [this, m = std::move(m)] { OnMessage(m); });
  };
  cb.on_disconnected = [this] { asio::post(io_, [this] { hb_timer_.cancel(); }); };
  link_ = std::make_unique<ControllerLink>(o.controller_address, o.node_name, instance_id_, cb);

  {
    std::ifstream in(o.spool_dir + "/controller-epoch");
    uint64_t e = 0;
    if (in >> e) epoch_ = e;
  }
  Readopt();
  work_ = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(
      io_.get_executor());
  AcceptSteps();
  if (!inventory_.gpus().empty()) GpuHealthTick();
  if (!o.config.agent.health_check_program.empty()) {
    asio::post(io_, [this] { RunHealthCheck(); });
  }
  io_thread_ = std::thread([this] { io_.run(); });
  link_->Start();
  spdlog::info("musterd node={} started: cpus={} memory_mb={} gpus={} ({}) steps={} controller={}",
               o.node_name, inventory_.cpus(), inventory_.memory_mb(), inventory_.gpus_size(),
               inventory_.gpu_source(), step_address_, o.controller_address);
  return Status::Ok();
}

bool Agent::Impl::BeginStop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return false;
    stopped_ = true;
    if (!started_) return false;
  }
  // Stop talking first: job ends caused by our own stop are not job results.
  link_->Stop();
  return true;
}

size_t Agent::Impl::RunOnIo(const std::function<size_t()>& fn) {
  std::promise<size_t> p;
  asio::post(io_, [&] { p.set_value(fn()); });
  return p.get_future().get();
}

void Agent::Impl::StopAccepting() {
  shutting_down_ = true;
  hb_timer_.cancel();
  gpu_health_timer_.cancel();
  check_timer_.cancel();
  boost::system::error_code ignored;
  step_acceptor_.close(ignored);
}

void Agent::Impl::StopIoThread() {
  work_.reset();
  io_.stop();
  if (io_thread_.joinable()) io_thread_.join();
}

void Agent::Impl::Detach() {
  if (!BeginStop()) return;
  size_t kept = RunOnIo([this] {
    StopAccepting();
    size_t n = 0;
    for (auto& [id, job] : jobs_) {
      // Step tasks talk to their client through this process: they cannot outlive it.
      for (pid_t g : job->step_pgids) ::kill(-g, SIGKILL);
      if (job->limit_timer) job->limit_timer->cancel();
      if (job->kill_timer) job->kill_timer->cancel();
      if (job->poll_timer) job->poll_timer->cancel();
      n += job->keeper > 0 && !job->exited;
    }
    return n;
  });
  StopIoThread();
  spdlog::info(
      "musterd node={} stopped; {} batch job(s) keep running and are re-adopted at the "
      "next start",
      options_.node_name, kept);
}

void Agent::Impl::Shutdown() {
  if (!BeginStop()) return;
  size_t live = RunOnIo([this] {
    StopAccepting();
    size_t n = 0;
    for (auto& [id, job] : jobs_) {
      SignalJob(*job, SIGCONT);
      SignalJob(*job, SIGTERM);
      n += job->children.size();
    }
    return n;
  });
  for (int i = 0; i < 40 && live > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    live = RunOnIo([this] {
      size_t n = 0;
      for (auto& [id, job] : jobs_) n += job->children.size();
      return n;
    });
  }
  RunOnIo([this] {
    for (auto& [id, job] : jobs_) {
      SignalJob(*job, SIGKILL);
      std::error_code ec;
      fs::remove_all(job->dir, ec);
    }
    return size_t{0};
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the exit watchers reap
  StopIoThread();
  // The node's cgroup directory goes too when nothing is left in it (best effort).
  if (cgroups_.enabled()) {
    ::rmdir(cgroups_.base().c_str());
    // A named group shared by a cluster's agents goes with the last of them.
    const std::string& root = options_.config.agent.cgroup_root;
    if (!root.empty() && root[0] != '/' && root != "none") {
      const std::string parent = cgroups_.base().substr(0, cgroups_.base().rfind('/'));
      ::rmdir(parent.c_str());
    }
  }
  spdlog::info("musterd node={} stopped", options_.node_name);
}

// ---------------------------------------------------------------------------------------------

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() { Shutdown(); }

Result<std::unique_ptr<Agent>> Agent::Create(AgentOptions options) {
  return std::unique_ptr<Agent>(new Agent(std::make_unique<Impl>(std::move(options))));
}

Status Agent::Start() {
  // Writing a task's stdin after it closed it must be an error, not a signal that ends us.
  ::signal(SIGPIPE, SIG_IGN);
  return impl_->Start();
}

Result<std::string> Agent::Probe(AgentOptions options) {
  Impl impl(std::move(options));
  OsInventory os = ProbeOs();
  AgentOptions& o = impl.options_;
  if (o.node_name.empty()) o.node_name = os.hostname;
  if (o.spool_dir.empty()) o.spool_dir = o.config.agent.spool_dir + "/" + o.node_name;
  MUSTER_RETURN_IF_ERROR(impl.Discover(os));
  return DescribeInventory(impl.inventory());
}
void Agent::Shutdown() { impl_->Shutdown(); }
void Agent::Detach() { impl_->Detach(); }
const std::string& Agent::node_name() const { return impl_->options_.node_name; }
std::string Agent::step_address() const { return impl_->step_address(); }
bool Agent::connected() const { return impl_->link_ && impl_->link_->connected(); }
size_t Agent::num_jobs() const { return impl_->num_jobs(); }
void Agent::SetSilentForTest(bool silent) {
  if (impl_->link_) impl_->link_->SetPausedForTest(silent);
}

}  // namespace muster::agent
