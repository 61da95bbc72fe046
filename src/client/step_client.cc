#include "muster/client/step_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>

#include "host_program.h"
#include "muster/client/bcast.h"
#include "muster/client/pmi_server.h"
#include "muster/common/framing.h"
#include "muster/common/hostlist.h"
#include "muster/common/job_limits.h"
#include "muster/v1/agent.pb.h"

namespace muster::client {
namespace {

// How long a node's step port may refuse connections before the launch gives up on it: an agent
// restart (a crash, an upgrade) takes about a second; its running steps are kept meanwhile.
constexpr int kAgentRestartGraceMs = 10'000;

// Per-(task, stream) line buffers, so lines of different tasks never interleave mid-line.
class LineWriter {
 public:
  LineWriter(FILE* out, FILE* err, bool label) : out_(out), err_(err), label_(label) {}

  void Add(uint32_t task, uint32_t stream, const std::string& data) {
    std::string& buf = bufs_[{task, stream}];
    buf += data;
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      Emit(task, stream, buf.substr(0, nl + 1));
      buf.erase(0, nl + 1);
    }
  }

  void Flush(uint32_t task) {
    for (uint32_t s : {1u, 2u}) {
      auto it = bufs_.find({task, s});
      if (it != bufs_.end() && !it->second.empty()) {
        Emit(task, s, it->second);
        it->second.clear();
      }
    }
  }

 private:
  void Emit(uint32_t task, uint32_t stream, const std::string& line) {
    FILE* f = stream == 2 ? err_ : out_;
    if (label_) std::fprintf(f, "%u: ", task);
    std::fwrite(line.data(), 1, line.size(), f);
    std::fflush(f);
  }
  FILE* out_;
  FILE* err_;
  bool label_;
  std::map<std::pair<uint32_t, uint32_t>, std::string> bufs_;
};

// The self-pipe signals arrive on (see CatchForwardedSignals).
int g_signal_pipe[2] = {-1, -1};
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

void OnSignal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  if (g_signal_pipe[1] >= 0) (void)!::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

// Signals caught since the last call (in order).
std::vector<int> TakeSignals() {
  std::vector<int> out;
  if (g_signal_pipe[0] < 0) return out;
  unsigned char buf[64];
  ssize_t n;
  while ((n = ::read(g_signal_pipe[0], buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < n; ++i) out.push_back(buf[i]);
  }
  return out;
}

int64_t MonotonicMs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Waits up to `ms` for a caught signal; returns the signals (empty on timeout).
std::vector<int> SleepOrSignal(int ms) {
  if (g_signal_pipe[0] < 0) {
    ::usleep(static_cast<useconds_t>(ms) * 1000);
    return {};
  }
  pollfd p{g_signal_pipe[0], POLLIN, 0};
  ::poll(&p, 1, ms);
  return TakeSignals();
}

// srun --pty: our terminal in raw mode (keys go to the remote terminal as typed) until the step
// ends.
class RawTerminal {
 public:
  explicit RawTerminal(int fd) : fd_(fd) {
    if (!::isatty(fd) || ::tcgetattr(fd, &saved_) != 0) return;
    struct termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(fd, TCSAFLUSH, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(fd_, TCSAFLUSH, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  int fd_;
  struct termios saved_ {};
  bool active_ = false;
};

v1::StepWindow WindowOf(int fd) {
  v1::StepWindow w;
  struct winsize ws {};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
    w.set_rows(ws.ws_row);
    w.set_cols(ws.ws_col);
  } else {
    w.set_rows(24);
    w.set_cols(80);
  }
  return w;
}

}  // namespace

Status CatchForwardedSignals() {
  if (g_signal_pipe[0] >= 0) return Status::Ok();
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoStatus("pipe", errno);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : kForwarded) ::sigaction(sig, &sa, nullptr);
  return Status::Ok();
}

void ReleaseForwardedSignals() {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) ::sigaction(sig, &sa, nullptr);
}

std::vector<int> WaitForSignals(int timeout_ms) { return SleepOrSignal(timeout_ms); }

Result<v1::JobInfo> Allocate(ControllerClient& controller, const v1::JobSpec& spec,
                             const AllocateOptions& o, FILE* err) {
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  req.mutable_spec()->set_interactive(true);
  if (o.priority) req.set_priority(*o.priority);  // the controller refuses it but to admins
  MUSTER_ASSIGN_OR_RETURN(v1::SubmitJobResponse sub, controller.SubmitJob(req));
  const uint64_t id = sub.job_id();
  const std::string jid = std::to_string(id);
  auto withdraw = [&](const Status& why) {
    controller.ReleaseAllocation(id, 0, 0).IgnoreError();
    return why;
  };
  auto attached = controller.AttachAllocation(id);
  if (!attached.ok()) return withdraw(attached.status());
  if (o.program == "salloc" && !o.quiet) {
    std::fprintf(err, "salloc: Pending job allocation %s\n", jid.c_str());
  }
  const int64_t start = MonotonicMs();
  bool said_queued = false;
  int pause_ms = 2;
  while (true) {
    MUSTER_ASSIGN_OR_RETURN(v1::GetJobResponse got, controller.GetJob(id));
    const v1::JobInfo& j = got.job();
    if (j.state() == v1::RUNNING || j.state() == v1::SUSPENDED) {
      // Steps can start once every node has set the job up; CreateStep says when that is.
      if (!said_queued || o.quiet) return j;
      std::fprintf(err, "%s: job %s has been allocated resources\n", o.program.c_str(),
                   jid.c_str());
      return j;
    }
    if (j.state() != v1::PENDING) {
      return FailedPrecondition("job " + jid + " ended before it started (" +
                                v1::JobState_Name(j.state()) + ": " + j.reason_detail() + ")");
    }
    const int64_t waited = MonotonicMs() - start;
    if (o.immediate_s > 0 && waited >= static_cast<int64_t>(o.immediate_s) * 1000) {
      return withdraw(Unavailable("Unable to allocate resources: Immediate execution impossible (" +
                                  j.reason() + ": " + j.reason_detail() + ")"));
    }
    if (!said_queued && waited >= 50 && !o.quiet) {
      std::fprintf(err, "%s: job %s queued and waiting for resources\n", o.program.c_str(),
                   jid.c_str());
      said_queued = true;
    }
    for (int sig : SleepOrSignal(pause_ms)) {
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        withdraw(Status::Ok()).IgnoreError();
        return Aborted("Job allocation " + jid + " has been revoked (interrupted while waiting)");
      }
    }
    pause_ms = std::min(pause_ms * 2, 100);
  }
}

namespace {

// Waits while other steps hold what the step needs (or the job's nodes are still starting), then
// creates it.
Result<v1::CreateStepResponse> CreateStepWhenFree(ControllerClient& controller,
                                                  const StepOptions& o, FILE* err) {
  const char* prog = o.program.c_str();
  const std::string jid = std::to_string(o.shape.job_id());
  // Other steps may hold what this one needs, or the job's nodes are still starting: wait.
  v1::CreateStepResponse step;
  bool said_busy = false;
  int pause_ms = 2;
  while (true) {
    auto created = controller.CreateStep(o.shape);
    if (created.ok()) {
      step = std::move(*created);
      break;
    }
    if (created.status().code() != StatusCode::kUnavailable) return created.status();
    if (!said_busy && created.status().message() == "Requested nodes are busy") {
      std::fprintf(err, "%s: Job %s step creation temporarily disabled, retrying (%s)\n", prog,
                   jid.c_str(), created.status().message().c_str());
      said_busy = true;
    }
    for (int sig : SleepOrSignal(pause_ms)) {
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        return Aborted("Job step creation for job " + jid + " aborted");
      }
    }
    pause_ms = std::min(pause_ms * 2, 200);
  }
  if (said_busy) std::fprintf(err, "%s: Step created for job %s\n", prog, jid.c_str());
  return step;
}

// What every node of the step is told, and its prolog and epilog.
struct StepLayout {
  std::string nodelist;        // the step's nodes, compressed
  std::string tasks_per_node;  // e.g. 2(x2)
  std::vector<uint32_t> counts;
  std::vector<std::vector<std::string>> commands;  // --multi-prog: each rank's (else empty)
};

StepLayout LayoutOf(const v1::CreateStepResponse& step) {
  StepLayout l;
  std::vector<std::string> names;
  for (const auto& n : step.nodes()) {
    names.push_back(n.node());
    l.counts.push_back(n.ntasks());
  }
  l.nodelist = CompressHostlist(names);
  l.tasks_per_node = CompressCounts(l.counts);
  return l;
}

// The step's PMI job id (PMI-2's job-getid, and every rank's key-value space name), as Slurm's
// mpi/pmi2 names it: JOB.STEP. PMI-1 alone keeps the name it always had.
std::string PmiJobId(const v1::CreateStepResponse& step) {
  return std::to_string(step.job_id()) + "." + std::to_string(step.step_id());
}

// The step's task ids on node `n`, ascending: those it lists (-m cyclic, plane), else its block.
std::vector<uint32_t> TaskIdsOf(const v1::StepNode& n) {
  if (n.task_ids_size() > 0) return {n.task_ids().begin(), n.task_ids().end()};
  std::vector<uint32_t> ids(n.ntasks());
  for (uint32_t i = 0; i < n.ntasks(); ++i) ids[i] = n.first_task() + i;
  return ids;
}

// The launch request for node `n` of the step.
v1::StepLaunchRequest LaunchRequest(const v1::CreateStepResponse& step, const v1::StepNode& n,
                                    const StepOptions& o, const StepLayout& layout, bool pmi) {
  v1::StepLaunchRequest req;
  req.set_job_id(step.job_id());
  req.set_step_id(step.step_id());
  req.set_credential(n.credential());
  for (const auto& a : o.argv) req.add_argv(a);
  for (const auto& e : o.environment) {
    if (e.rfind("PMI_JOBID=", 0) != 0) req.add_environment(e);  // another step's
  }
  // What MPICH's and MVAPICH's PMI-2 clients read beside PMI_FD, PMI_RANK and PMI_SIZE (the
  // node sets those): the job id job-getid answers, as Slurm's mpi/pmi2 sets it.
  if (pmi && o.pmi2) req.add_environment("PMI_JOBID=" + PmiJobId(step));
  req.set_work_dir(o.work_dir);
  req.set_node_id(n.node_id());
  req.set_first_task(n.first_task());
  *req.mutable_task_ids() = n.task_ids();
  req.set_ntasks(n.ntasks());
  req.set_total_tasks(step.total_tasks());
  req.set_total_nodes(static_cast<uint32_t>(step.nodes_size()));
  req.set_step_nodelist(layout.nodelist);
  req.set_tasks_per_node(layout.tasks_per_node);
  req.set_gpus_given(step.gpus_given());
  *req.mutable_gpu_indices() = n.gpu_indices();
  *req.mutable_cpu_ids() = n.cpu_ids();
  req.set_cpus_per_task(step.cpus_per_task());
  req.set_step_name(step.name());
  req.set_run(step.run());
  req.set_pmi(pmi);
  req.set_gpus_per_task(o.gpus_per_task);
  req.set_gpu_bind(o.gpu_bind);
  req.set_stdin_mode(o.pty ? v1::StepLaunchRequest::STDIN_TASK : o.stdin_mode);
  req.set_stdin_task(o.pty ? 0 : o.stdin_task);
  req.set_stdin_pattern(o.stdin_pattern);
  req.set_stdout_pattern(o.stdout_pattern);
  req.set_stderr_pattern(o.stderr_pattern);
  req.set_open_mode_append(o.open_mode_append);
  req.set_pty(o.pty);
  if (o.pty) *req.mutable_window() = WindowOf(o.stdin_fd);
  req.set_cpu_bind(o.cpu_bind);
  req.set_cpu_distribution(o.cpu_distribution);
  req.set_task_prolog(o.task_prolog);
  req.set_task_epilog(o.task_epilog);
  if (!layout.commands.empty()) {
    for (uint32_t t : TaskIdsOf(n)) {
      if (t >= layout.commands.size()) break;
      v1::TaskCommand* command = req.add_task_commands();
      for (const std::string& a : layout.commands[t]) command->add_argv(a);
    }
  }
  return req;
}

// Gives a created step up before anything of it runs (its prolog failed): each of its nodes is
// sent its launch request marked withdrawn, and ends the step without starting a task, so that
// the controller frees what the step holds. (An agent older than the mark runs /bin/false.)
void WithdrawStep(const v1::CreateStepResponse& step, const StepOptions& o,
                  const StepLayout& layout) {
  StepOptions nothing = o;
  nothing.argv = {"/bin/false"};
  nothing.stdin_mode = v1::StepLaunchRequest::STDIN_NONE;
  nothing.stdin_pattern.clear();
  nothing.stdout_pattern = nothing.stderr_pattern = "";
  nothing.pty = false;
  nothing.cpu_bind.clear();
  nothing.task_prolog.clear();
  nothing.task_epilog.clear();
  StepLayout plain = layout;
  plain.commands.clear();
  std::vector<int> fds;
  for (const v1::StepNode& n : step.nodes()) {
    if (n.ntasks() == 0 || n.step_address().empty()) continue;
    auto fd = ConnectTcp(n.step_address(), 5000, 2000);
    if (!fd.ok()) continue;
    v1::StepLaunchRequest req = LaunchRequest(step, n, nothing, plain, /*pmi=*/false);
    req.set_withdrawn(true);
    if (WriteFrame(*fd, 0, req.SerializeAsString()).ok()) {
      fds.push_back(*fd);
    } else {
      ::close(*fd);
    }
  }
  // Each node answers once it has ended the step (with the reason, or the end of the stream).
  for (int fd : fds) {
    (void)ReadFrame(fd, 10'000);
    ::close(fd);
  }
}

// Launches the created step on its nodes (with --bcast, sending them the program behind the
// launch) and relays its I/O until every task has ended.
Result<int> LaunchAndWatch(const v1::CreateStepResponse& step, const StepLayout& layout,
                           const StepOptions& o, const BcastSource* bcast, FILE* out, FILE* err) {
  const char* prog = o.program.c_str();
  const std::string jid = std::to_string(step.job_id());
  const bool forward_stdin = o.stdin_mode != v1::StepLaunchRequest::STDIN_NONE;

  struct Conn {
    std::string node;
    int fd = -1;
    std::vector<uint32_t> tasks;  // its task ids, ascending
    bool Has(uint32_t task) const { return std::binary_search(tasks.begin(), tasks.end(), task); }
    uint32_t pending_tasks = 0;
    bool stdin_here = false;                   // a task here reads our stdin
    uint64_t stdin_sent = 0, stdin_taken = 0;  // its window (kStepStdinWindow)
    bool tty_here = false;                     // task 0's terminal is here
  };
  std::vector<Conn> conns;
  int worst = 0;
  auto give_up = [&](const Status& s) {
    for (auto& c : conns) {
      if (c.fd >= 0) ::close(c.fd);  // closing makes every agent kill its tasks
    }
    return s;
  };
  auto signal_all = [&](int sig) {
    v1::StepSignal m;
    m.set_signal(sig);
    const std::string payload = m.SerializeAsString();
    for (auto& c : conns) {
      if (c.fd >= 0) WriteFrame(c.fd, 1, payload).IgnoreError();
    }
  };
  for (const v1::StepNode& n : step.nodes()) {
    if (n.ntasks() == 0) continue;
    if (n.step_address().empty()) {
      return give_up(
          Unavailable("node " + n.node() + " has no step address (agent not registered?)"));
    }
    // A refusal is tried again a while: the node's agent may be restarting (an upgrade), and the
    // step's grant outlives that.
    auto fd = ConnectTcp(n.step_address(), 5000, kAgentRestartGraceMs);
    if (!fd.ok()) return give_up(fd.status().Prepend("node " + n.node()));
    std::vector<uint32_t> ids = TaskIdsOf(n);
    auto has = [&](uint32_t task) { return std::binary_search(ids.begin(), ids.end(), task); };
    const bool stdin_here =
        o.stdin_mode == v1::StepLaunchRequest::STDIN_ALL ||
        (o.stdin_mode == v1::StepLaunchRequest::STDIN_TASK && has(o.stdin_task)) ||
        (o.pty && has(0));
    conns.push_back({.node = n.node(),
                     .fd = *fd,
                     .tasks = ids,
                     .pending_tasks = n.ntasks(),
                     .stdin_here = stdin_here,
                     .tty_here = o.pty && has(0)});
  }
  // PMI for MPI programs: the tasks' PMI sockets come through each node's connection, and the
  // answers go back the same way (to the node that runs the rank).
  std::optional<PmiServer> pmi;
  std::vector<size_t> conn_of_rank;
  if (o.pmi && !conns.empty()) {
    conn_of_rank.resize(step.total_tasks(), 0);
    for (size_t i = 0; i < conns.size(); ++i) {
      for (uint32_t t : conns[i].tasks) {
        if (t < conn_of_rank.size()) conn_of_rank[t] = i;
      }
    }
    // Which node runs each rank, in the step's node order (PMI_process_mapping, node attributes).
    std::vector<uint32_t> node_of_rank(step.total_tasks(), 0);
    for (int k = 0; k < step.nodes_size(); ++k) {
      for (uint32_t t : TaskIdsOf(step.nodes(k))) {
        if (t < node_of_rank.size()) node_of_rank[t] = static_cast<uint32_t>(k);
      }
    }
    pmi.emplace(
        o.pmi2 ? PmiJobId(step) : "muster_" + jid + "_" + std::to_string(step.step_id()),
        std::move(node_of_rank),
        [&](uint32_t rank, const std::string& bytes) {
          if (rank >= conn_of_rank.size()) return;
          Conn& c = conns[conn_of_rank[rank]];
          v1::PmiData answer;
          answer.set_task(rank);
          answer.set_data(bytes);
          if (c.fd >= 0) WriteFrame(c.fd, 4, answer.SerializeAsString()).IgnoreError();
        },
        o.pmi2 ? PmiServer::Wire::kPmi2 : PmiServer::Wire::kPmi1);
  }
  size_t next_conn = 0;
  for (const v1::StepNode& n : step.nodes()) {
    if (n.ntasks() == 0) continue;
    const int fd = conns[next_conn++].fd;
    v1::StepLaunchRequest req = LaunchRequest(step, n, o, layout, pmi.has_value());
    if (bcast) {
      req.set_bcast_path(BcastPathOnNode(o.bcast_dest, step.job_id(), step.step_id(), n.node()));
      req.set_bcast_size(bcast->size);
    }
    Status s = WriteFrame(fd, 0, req.SerializeAsString());
    if (!s.ok()) return give_up(s.Prepend("node " + n.node()));
  }
  if (bcast) {
    // Every node gets the program once, behind its launch. A node that gives up says why in the
    // loop below, as any node that cannot start its tasks; one that does not get it all (srun
    // interrupted, the file changed) starts nothing.
    std::vector<int> fds;
    for (const Conn& c : conns) fds.push_back(c.fd);
    Status sent = SendBcast(*bcast, &fds, [] {
      for (int sig : TakeSignals()) {
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) return true;
      }
      return false;
    });
    if (!sent.ok()) {
      return give_up(sent.Prepend("job step " + jid + "." + std::to_string(step.step_id()) +
                                  " was not started"));
    }
  }

  LineWriter writer(out, err, o.label);
  std::optional<RawTerminal> raw;
  if (o.pty) {
    raw.emplace(o.stdin_fd);
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGWINCH, &sa, nullptr);
  }
  // Our stdin goes to the agents of the tasks that read it, as it comes; an empty frame ends it.
  bool stdin_open = forward_stdin || o.pty;
  // A background srun must not read the terminal (it would be stopped by SIGTTIN): its tasks
  // read end of file, as from /dev/null.
  if (stdin_open && ::isatty(o.stdin_fd) && ::tcgetpgrp(o.stdin_fd) != ::getpgrp()) {
    stdin_open = false;
  }
  auto send_stdin = [&](const std::string& chunk) {
    for (auto& c : conns) {
      if (c.fd < 0 || !c.stdin_here) continue;
      if (!WriteFrame(c.fd, 2, chunk).ok()) c.stdin_here = false;
      c.stdin_sent += chunk.size();
    }
  };
  // Our stdin is read only while every node that takes it has room in its window, so that a
  // node never has to stop reading us (PMI answers and signals would wait behind the input).
  auto stdin_room = [&] {
    for (const auto& c : conns) {
      if (c.fd >= 0 && c.stdin_here && c.stdin_sent - c.stdin_taken >= kStepStdinWindow) {
        return false;
      }
    }
    return true;
  };
  if (!stdin_open) send_stdin("");
  size_t open = conns.size();
  int64_t last_interrupt_ms = -10'000;
  // srun -W: when the tasks still running are killed (set once the first task has ended).
  int64_t wait_until_ms = -1;
  bool killing = false;
  bool killed_after_failure = false;
  while (open > 0) {
    std::vector<pollfd> pfds;
    for (const auto& c : conns)
      pfds.push_back({c.fd, static_cast<short>(c.fd >= 0 ? POLLIN : 0), 0});
    if (g_signal_pipe[0] >= 0) pfds.push_back({g_signal_pipe[0], POLLIN, 0});
    const size_t stdin_at = pfds.size();
    const bool read_stdin = stdin_open && stdin_room();
    if (read_stdin) pfds.push_back({o.stdin_fd, POLLIN, 0});
    int timeout_ms = -1;
    if (wait_until_ms >= 0 && !killing) {
      timeout_ms = static_cast<int>(std::clamp<int64_t>(wait_until_ms - MonotonicMs(), 0, 60'000));
    }
    int r = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return give_up(ErrnoStatus("poll", errno));
    }
    if (read_stdin && (pfds[stdin_at].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))) {
      char buf[65536];
      ssize_t n = ::read(o.stdin_fd, buf, sizeof buf);
      if (n > 0) {
        send_stdin(std::string(buf, static_cast<size_t>(n)));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        send_stdin("");  // end of input (or an unreadable stdin: the tasks read end of file)
        stdin_open = false;
      }
    }
    for (int sig : TakeSignals()) {
      if (sig == SIGINT) {
        const int64_t now = MonotonicMs();
        if (o.quit_on_interrupt || now - last_interrupt_ms <= 1000) {
          std::fprintf(err, "%s: forcing job step %s.%u to end\n", prog, jid.c_str(),
                       step.step_id());
          killing = true;
          signal_all(SIGKILL);
        } else {
          std::fprintf(err, "%s: interrupt (one more within 1 sec to abort)\n", prog);
          signal_all(SIGINT);
        }
        last_interrupt_ms = now;
      } else if (sig == SIGWINCH) {
        const std::string size = WindowOf(o.stdin_fd).SerializeAsString();
        for (auto& c : conns) {
          if (c.fd >= 0 && c.tty_here) WriteFrame(c.fd, 3, size).IgnoreError();
        }
      } else {
        signal_all(sig);
      }
    }
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = conns[i];
      if (c.fd < 0 || !(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto frame = ReadFrame(c.fd, 30'000);
      bool close_it = false;
      if (!frame.ok()) {
        if (c.pending_tasks > 0) {
          std::fprintf(err, "%s: error: lost node %s: %s\n", prog, c.node.c_str(),
                       frame.status().message().c_str());
          worst = std::max(worst, 1);
          for (uint32_t t : c.tasks) {
            if (pmi) pmi->TaskEnded(t);
          }
          // As Slurm: a node failure ends the whole step unless srun -k keeps the rest going.
          if (!o.no_kill && !killing) {
            std::fprintf(err,
                         "%s: error: ending step %s.%u: node %s lost (srun -k keeps the "
                         "others running)\n",
                         prog, jid.c_str(), step.step_id(), c.node.c_str());
            killing = true;
            killed_after_failure = true;
            signal_all(SIGKILL);
          }
        }
        close_it = true;
      } else if (frame->type != 0) {
        std::fprintf(err, "%s: error: node %s: %s\n", prog, c.node.c_str(), frame->payload.c_str());
        worst = std::max(worst, 1);
        close_it = true;
      } else {
        v1::StepEvent ev;
        if (!ev.ParseFromString(frame->payload)) {
          close_it = true;
        } else if (ev.has_output() && c.tty_here && ev.output().task() == 0) {
          // A terminal's output goes out as it comes (prompts end without a newline).
          std::fwrite(ev.output().data().data(), 1, ev.output().data().size(), out);
          std::fflush(out);
        } else if (ev.has_output()) {
          writer.Add(ev.output().task(), ev.output().stream(), ev.output().data());
        } else if (ev.has_stdin_taken()) {
          c.stdin_taken = std::max(c.stdin_taken, ev.stdin_taken());
        } else if (ev.has_pmi()) {
          // A node speaks only for its own tasks.
          const uint32_t task = ev.pmi().task();
          if (pmi && c.Has(task)) {
            pmi->FromTask(task, ev.pmi().data());
          }
        } else if (ev.has_exit()) {
          writer.Flush(ev.exit().task());
          // A rank gone can never join a fence: the others must not wait for it forever.
          if (pmi && c.Has(ev.exit().task())) {
            pmi->TaskEnded(ev.exit().task());
          }
          const v1::TaskExit& x = ev.exit();
          int code = x.signal() ? 128 + x.signal() : x.exit_code();
          // Tasks we killed after another failed (-K) do not hide that failure's code.
          if (!(killed_after_failure && x.signal() == SIGKILL)) worst = std::max(worst, code);
          if (code != 0 && !killing) {
            // As srun reports a failed task.
            if (x.signal()) {
              std::fprintf(err, "%s: error: %s: task %u: %s\n", prog, c.node.c_str(), x.task(),
                           x.signal() == SIGKILL ? "Killed" : ::strsignal(x.signal()));
            } else {
              std::fprintf(err, "%s: error: %s: task %u: Exited with exit code %d\n", prog,
                           c.node.c_str(), x.task(), x.exit_code());
            }
            if (o.kill_on_bad_exit) {
              killing = true;
              killed_after_failure = true;
              signal_all(SIGKILL);
            }
          }
          if (wait_until_ms < 0 && o.wait_s > 0) {
            wait_until_ms = MonotonicMs() + static_cast<int64_t>(o.wait_s) * 1000;
          }
          if (--c.pending_tasks == 0) close_it = true;
        }
      }
      if (close_it) {
        ::close(c.fd);
        c.fd = -1;
        --open;
      }
    }
    if (wait_until_ms >= 0 && !killing && open > 0 && MonotonicMs() >= wait_until_ms) {
      std::fprintf(err, "%s: error: first task exited %us ago: ending job step %s.%u (--wait)\n",
                   prog, o.wait_s, jid.c_str(), step.step_id());
      killing = true;
      signal_all(SIGKILL);
    }
    if (pmi && pmi->aborted() && !killing) {
      std::fprintf(err, "%s: error: %s; ending step %s.%u\n", prog, pmi->abort_message().c_str(),
                   jid.c_str(), step.step_id());
      killing = true;
      killed_after_failure = true;
      worst = std::max(worst, 1);
      signal_all(SIGKILL);
    }
  }
  return worst;
}

}  // namespace

Result<int> RunStep(ControllerClient& controller, const StepOptions& o, FILE* out, FILE* err) {
  // --bcast: the program is opened (and checked) before the step exists.
  std::optional<BcastSource> bcast;
  struct CloseProgram {
    std::optional<BcastSource>& source;
    ~CloseProgram() {
      if (source) ::close(source->fd);
    }
  } close_program{bcast};
  if (!o.bcast_program.empty()) {
    if (o.multi_prog) {
      return InvalidArgument("--bcast copies one program: it cannot be combined with --multi-prog");
    }
    MUSTER_ASSIGN_OR_RETURN(bcast, OpenBcastSource(o.bcast_program));
  }
  MUSTER_ASSIGN_OR_RETURN(const v1::CreateStepResponse step,
                          CreateStepWhenFree(controller, o, err));
  StepLayout layout = LayoutOf(step);
  const char* prog = o.program.c_str();
  if (o.multi_prog) {
    // Each rank's command, now that the step's task count is known; nothing runs otherwise.
    auto commands = MultiProgCommands(*o.multi_prog, step.total_tasks(), o.multi_prog_args);
    if (!commands.ok()) {
      WithdrawStep(step, o, layout);
      return commands.status();
    }
    layout.commands = std::move(*commands);
  }
  if (!o.prolog.empty()) {
    auto rc = RunHostProgram(
        o.prolog, o.argv,
        HostProgramEnv(o.environment, step, layout.nodelist, layout.tasks_per_node, "prolog_srun"));
    if (!rc.ok() || *rc != 0) {
      WithdrawStep(step, o, layout);
      return FailedPrecondition(
          "--prolog " + o.prolog + " failed" +
          (rc.ok() ? " with exit code " + std::to_string(*rc) : ": " + rc.status().message()) +
          "; job step " + std::to_string(step.job_id()) + "." + std::to_string(step.step_id()) +
          " was not started");
    }
  }
  Result<int> code = LaunchAndWatch(step, layout, o, bcast ? &*bcast : nullptr, out, err);
  if (!o.epilog.empty()) {
    // Its status is reported, and changes nothing.
    auto rc = RunHostProgram(
        o.epilog, o.argv,
        HostProgramEnv(o.environment, step, layout.nodelist, layout.tasks_per_node, "epilog_srun"));
    if (!rc.ok()) {
      std::fprintf(err, "%s: error: --epilog %s: %s\n", prog, o.epilog.c_str(),
                   rc.status().message().c_str());
    } else if (*rc != 0) {
      std::fprintf(err, "%s: error: --epilog %s failed with exit code %d\n", prog, o.epilog.c_str(),
                   *rc);
    }
  }
  return code;
}

}  // namespace muster::client
