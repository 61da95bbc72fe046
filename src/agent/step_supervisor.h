// One step on one node once the agent has accepted its request: the tasks started as the job's
// user (their output through pipes, files or a terminal), their output streamed to the client,
// the client's input, signals and terminal sizes passed on, each task's exit reported to the
// client, and the step's end. It runs inside the agent, or in muster-stepd, a process of its own
// that holds the client's connection, so that a step can outlive its agent.
//
// Single-threaded: everything runs on the io_context it is given.
#pragma once

// clang-format off
#include <utility>  // Asio 1.74 uses std::exchange without including <utility> itself
#include <boost/asio.hpp>
// clang-format on
#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "muster/agent/launcher.h"
#include "muster/common/cpu_bind.h"
#include "muster/common/framing.h"
#include "muster/common/job_limits.h"
#include "muster/common/output_pattern.h"
#include "muster/common/status.h"
#include "muster/v1/agent.pb.h"
#include "muster/v1/node.pb.h"
#include "muster/v1/step_supervisor.pb.h"

namespace muster::agent {

class StepSupervisor : public std::enable_shared_from_this<StepSupervisor> {
 public:
  // Frames the client may send once the step runs: signals and terminal sizes (64 bytes at
  // most), stdin chunks, and PMI answers.
  static constexpr size_t kMaxStdinFrame = 1u << 20;
  static constexpr size_t kMaxPmiFrame = 64u << 10;

  struct Hooks {
    // A task started (its pid is also its process group) / ended with its output drained. Also
    // the step's helpers: a --task-prolog or --task-epilog, and srun --bcast's writer, so that
    // the job's end reaches them and waits for them.
    std::function<void(pid_t)> task_started;
    std::function<void(pid_t)> task_done;
    // Whether the job still takes steps here, asked before tasks start later than the request
    // was accepted (srun --bcast: once the program is whole). None: it is not asked (under
    // muster-stepd, which the job's end kills, tasks and all).
    std::function<bool()> job_takes_steps;
    // Once: every task here has ended (or the step failed to start).
    std::function<void(const v1::StepEnded&)> ended;
  };

  StepSupervisor(boost::asio::io_context& io, Launcher& launcher, v1::StepSupervisorSetup setup,
                 boost::asio::ip::tcp::socket socket, Hooks hooks);
  ~StepSupervisor();

  // Starts the tasks and serves the client until the step ends. A failure to start is told to
  // the client (an error frame) and ends the step.
  void Start();

  // srun --bcast: how long the program may take to arrive, instead of BcastDeadline's. Before
  // Start.
  void SetBcastDeadlineForTest(std::chrono::milliseconds d) { bcast_deadline_for_test_ = d; }

 private:
  struct Task {
    uint32_t id = 0;
    pid_t pid = -1;
    int open_pipes = 0;
    bool reaped = false;  // the task's process is gone (its epilog may still run)
    bool exited = false;  // ... and its epilog too: done here
    int status = 0;
    bool reported = false;
    pid_t helper = -1;  // its --task-prolog or --task-epilog while one runs
  };
  // Where the client's stdin goes: a task's stdin pipe, or its terminal (written in order; the
  // client is not read while too much waits, so a task that never reads cannot grow this).
  // Also a task's PMI socket, which the PMI server's answers are written to.
  struct StdinSink {
    std::shared_ptr<boost::asio::posix::stream_descriptor> fd;
    std::deque<std::string> queue;
    size_t queued = 0;
    bool writing = false;
    bool eof = false;  // close once the queue is written
  };
  // One task's I/O ends: what the supervisor keeps (output to read, input to write) and what the
  // child inherits (closed here once it has started).
  struct TaskIo {
    int out = -1, err = -1, in = -1, pmi = -1;  // ours
    int child_out = -1, child_err = -1, child_in = -1, child_pmi = -1;
    void CloseChildEnds();
    void CloseAll();
  };
  static constexpr size_t kMaxStdinBacklog = 2 * kStepStdinWindow;
  // What may wait to be sent to the client (output, PMI): past this the tasks' output is not
  // read until it drains, so a client that stops reading (srun stopped with Ctrl-Z) cannot grow
  // the supervisor, which runs as root.
  static constexpr size_t kMaxClientBacklog = 8u << 20;
  // PMI answers a task has not read: past this it is not speaking PMI, and its socket closes.
  static constexpr size_t kMaxPmiBacklog = 1u << 20;
  // What a --task-prolog may print (its export, unset and print lines); past this it is ignored.
  static constexpr size_t kMaxPrologOutput = 1u << 20;
  // A --task-epilog still running this long after it started is killed (Slurm's "a few seconds").
  static constexpr int kTaskEpilogTimeoutS = 10;
  // A task waiting for its --task-prolog: what it will be started with.
  struct PendingTask {
    SpawnSpec sp;
    TaskIo io;
  };
  // A task's --task-prolog or --task-epilog while it runs (step_task_helpers.cc).
  struct Helper;
  // srun --bcast (step_bcast.cc): the program, as it arrives from the client, and its writer.
  struct Bcast;

  Status Launch();
  // srun --bcast (step_bcast.cc): takes the program from the client (frames of type 5) into a
  // writer that is the job's user, then launches; a failure ends the step before any task runs,
  // and what the client still sends is read and dropped until it closes the connection.
  void ReceiveProgram();
  void ReadProgram();
  void ReadWriterResult();
  // The writer's end, with its wait status: the tasks start, or the step fails.
  void ProgramWritten(int wait_status);
  void ProgramFailed(const Status& s);
  void DrainClient();
  // The CPUs the step holds here: its own (--exact), else the job's.
  std::vector<uint32_t> StepCpus() const;
  // Starts task `idx` as pending_[idx] says (after its prolog, if any), or ends it when the step
  // was killed meanwhile.
  void StartTask(size_t idx);
  // Runs the task's --task-prolog (then starts the task) or --task-epilog (then finishes it).
  void RunPrologThenStart(size_t idx);
  void RunEpilogThenFinish(size_t idx);
  // Runs `path` as the task's user in `env`; `done` gets its wait status (-1: it could not start,
  // said on the task's stderr) and, with `keep_stdout`, what it printed (else that is the task's
  // stdout).
  void RunHelper(size_t idx, const std::string& what, const std::string& path,
                 const std::vector<std::string>& env, bool keep_stdout, int timeout_s,
                 std::function<void(int, std::string)> done);
  void ReadHelper(std::shared_ptr<Helper> h, bool err);
  // The task has ended (and its epilog): counted, reported once its output is drained.
  void FinishTask(size_t idx);
  Status OpenTaskIo(const PatternVars& vars, SpawnSpec& sp, uint32_t task,
                    std::set<std::string>& truncated, TaskIo* io);
  void ReadPipe(size_t idx, int fd, uint32_t stream);
  void ReadPmi(size_t idx);
  void SendPmi(size_t idx, const char* data, size_t n);
  // What the task left in its PMI socket when it ended, then the socket closes (a process it
  // left behind may hold its end open).
  void DrainPmi(size_t idx);
  void ToPmi(const v1::PmiData& answer);
  void WritePmi(size_t idx);
  void ClosePmi(size_t idx);
  // Reads the tasks' output again now, or once the client has taken enough of what waits.
  void WhenClientKeepsUp(std::function<void()> read);
  void TellStdinTaken();
  void WatchExit(size_t idx, pid_t pid, int pidfd);
  void MaybeReport(size_t idx);
  void ReportEnd();
  void SendOutput(uint32_t task, uint32_t stream, std::string data);
  void Fail(const Status& s);
  void Write(uint32_t type, const std::string& payload);
  void WriteNext();
  void WatchClient();
  size_t StdinBacklog() const;
  void ToStdin(const std::string& data);
  void WriteStdin(size_t i);
  void SignalTasks(int sig);
  void KillTasks();
  void CloseStdin();
  void Close();
  // The step has a cgroup of its own (not just the job's): killed when its tasks have ended.
  bool OwnCgroup() const;

  boost::asio::io_context& io_;
  Launcher& launcher_;
  const v1::StepSupervisorSetup setup_;
  const v1::StepLaunchRequest& req_;  // setup_.request()
  boost::asio::ip::tcp::socket socket_;
  Hooks hooks_;
  FrameAssembler frames_{kMaxStdinFrame};
  std::array<char, 16 * 1024> chunk_;
  int exit_code_ = 0;  // the highest of the tasks here
  int signal_ = 0;
  bool killed_ = false;  // we killed tasks (the client went away, or the step failed)
  // KillTasks ran: no task starts (its prolog may have ended, not yet drained, with nothing left
  // to kill), and no epilog runs. Unlike killed_, set even when nothing was killed.
  bool stopping_ = false;
  std::vector<StdinSink> sinks_;
  std::vector<StdinSink> pmi_;  // by tasks_ index: each task's PMI socket (with req_.pmi())
  bool client_paused_ = false;  // too much stdin waits for the tasks: the client is not read
  int tty_fd_ = -1;             // srun --pty: the terminal's master side (owned by its reader)
  bool reported_end_ = false;
  std::vector<Task> tasks_;
  std::vector<std::unique_ptr<PendingTask>> pending_;  // by tasks_ index, until started
  std::shared_ptr<Bcast> bcast_;                       // with --bcast
  std::chrono::milliseconds bcast_deadline_for_test_{0};
  std::vector<std::vector<std::string>> task_env_;  // by tasks_ index: for its epilog
  bool launching_ = false;                          // in Launch: no task is reported yet
  CpuBind cpu_bind_;                                // --cpu-bind
  std::vector<std::vector<uint32_t>> task_cpus_;    // each task's CPUs here (empty: not bound)
  // -S/--core-spec, --thread-spec: the step's CPUs here less those its job sets aside, which
  // every task is bound within (empty: the job sets none aside).
  std::vector<uint32_t> cpus_left_;
  size_t reported_ = 0;
  bool done_ = false;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  std::vector<std::function<void()>> paused_reads_;  // until queue_ drains (kMaxClientBacklog)
  bool writing_ = false;
  uint64_t stdin_in_ = 0;    // bytes of stdin the client sent
  uint64_t stdin_told_ = 0;  // what StepEvent.stdin_taken last said
};

// Where a step's records live in its job's directory: "tasks" (StepTaskPids) and "end"
// (StepEnded).
std::string StepRecordPath(const std::string& job_dir, uint32_t step_id, const char* what);

}  // namespace muster::agent
