// StepSupervisor: srun --bcast. The program arrives behind the launch request, in frames of type
// 5, and is written here by a child process that is the job's user (bcast_writer.h), as it
// comes: one frame at a time is held, never the file. The tasks start once the copy is whole, and
// only if the job still takes steps here (srun may hold back the last byte until the job has
// ended); any failure (a destination that cannot be written, too many bytes or too few, the
// program not whole within BcastDeadline) ends the step here before anything of it runs, with
// the reason sent to srun. The writer is the job's as its tasks are (Hooks::task_started): the
// job's end stops it and waits for it.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "bcast_writer.h"
#include "muster/common/strings.h"
#include "step_supervisor.h"

namespace muster::agent {

namespace asio = boost::asio;

static_assert(kBcastChunk <= StepSupervisor::kMaxStdinFrame,
              "a --bcast frame must fit the supervisor's frame limit");

struct StepSupervisor::Bcast {
  BcastWriterSpec spec;
  pid_t pid = -1;
  bool writer_done = false;                                // the writer has ended (and was reaped)
  std::unique_ptr<asio::steady_timer> deadline;            // for the whole program to be here
  std::shared_ptr<asio::posix::stream_descriptor> data;    // the writer's input
  std::shared_ptr<asio::posix::stream_descriptor> result;  // its report
  std::string report;
  uint64_t received = 0;     // bytes of the program taken from srun
  bool busy = false;         // a read from srun, or a write to the writer, is under way
  bool failed = false;       // the step has failed here: what srun still sends is dropped
  bool client_done = false;  // srun has closed its side: there is nothing more to read
};

void StepSupervisor::ReceiveProgram() {
  auto b = std::make_shared<Bcast>();
  bcast_ = b;
  if (Status s = CheckBcastRequest(req_.bcast_path(), req_.bcast_size()); !s.ok()) {
    return ProgramFailed(s);
  }
  if (req_.task_commands_size() != 0) {
    return ProgramFailed(InvalidArgument("--bcast cannot be combined with --multi-prog"));
  }
  const v1::JobSpec& spec = setup_.launch().spec();
  b->spec.path = req_.bcast_path();
  b->spec.temp_path = BcastTempPath(b->spec.path);
  b->spec.size = req_.bcast_size();
  b->spec.change_user = ::geteuid() == 0 && spec.uid() != 0;
  b->spec.uid = spec.uid();
  b->spec.gid = spec.gid();
  if (b->spec.change_user) b->spec.groups = launcher_.GroupsOf(spec.user(), spec.gid());
  // In the step's cgroup, so that what it writes is charged to the job and ends with it.
  if (!setup_.step_cgroup().empty()) {
    const std::string procs = setup_.step_cgroup() + "/cgroup.procs";
    b->spec.cgroup_procs_fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
  }
  auto started = StartBcastWriter(b->spec);
  if (b->spec.cgroup_procs_fd >= 0) ::close(b->spec.cgroup_procs_fd);
  b->spec.cgroup_procs_fd = -1;
  if (!started.ok()) return ProgramFailed(started.status());
  b->pid = started->pid;
  if (hooks_.task_started) hooks_.task_started(b->pid);
  b->data = std::make_shared<asio::posix::stream_descriptor>(io_, started->data_fd);
  b->result = std::make_shared<asio::posix::stream_descriptor>(io_, started->result_fd);
  const std::chrono::milliseconds limit =
      bcast_deadline_for_test_.count() > 0 ? bcast_deadline_for_test_ : BcastDeadline(b->spec.size);
  b->deadline = std::make_unique<asio::steady_timer>(io_, limit);
  // Not holding the supervisor: a step that is over does not wait for this.
  std::weak_ptr<StepSupervisor> weak = shared_from_this();
  b->deadline->async_wait([this, weak, limit](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    Bcast& bc = *bcast_;
    if (bc.writer_done || bc.failed) return;
    // A client that stalls is not waited for any longer, nor read: the connection closes once
    // it is told why.
    bc.client_done = true;
    ProgramFailed(DeadlineExceeded(
        "--bcast: " + std::to_string(bc.received) + " of the program's " +
        std::to_string(bc.spec.size) + " bytes arrived in the " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) +
        " s a node waits for it (the partial copy is removed)"));
  });
  ReadWriterResult();
  if (b->spec.size == 0) {
    boost::system::error_code ignored;
    b->data->close(ignored);  // nothing to write: the writer sees its end of file at once
  }
  ReadProgram();
}

void StepSupervisor::ReadProgram() {
  Bcast& b = *bcast_;
  if (b.failed) return DrainClient();
  if (b.received == b.spec.size) return;  // all here: the writer's report starts the tasks
  auto self = shared_from_this();
  Frame f;
  if (frames_.Pop(&f)) {
    const uint64_t left = b.spec.size - b.received;
    if (f.type != 5) {
      return ProgramFailed(InvalidArgument("--bcast: srun sent a frame of type " +
                                           std::to_string(f.type) + " after " +
                                           std::to_string(b.received) + " of the program's " +
                                           std::to_string(b.spec.size) + " bytes"));
    }
    if (f.payload.size() > kBcastChunk || f.payload.size() > left) {
      return ProgramFailed(InvalidArgument("--bcast: srun sent more than the program's " +
                                           std::to_string(b.spec.size) + " bytes"));
    }
    b.received += f.payload.size();
    auto payload = std::make_shared<std::string>(std::move(f.payload));
    b.busy = true;
    auto data = b.data;
    asio::async_write(*data, asio::buffer(*payload),
                      [this, self, data, payload](boost::system::error_code ec, size_t) {
                        Bcast& bc = *bcast_;
                        bc.busy = false;
                        if (bc.failed) return DrainClient();
                        // The writer has stopped reading (it failed): its report says why.
                        if (ec) return;
                        if (bc.received == bc.spec.size) {
                          boost::system::error_code ignored;
                          data->close(ignored);  // the end of the program: the writer finishes
                        }
                        ReadProgram();
                      });
    return;
  }
  b.busy = true;
  socket_.async_read_some(asio::buffer(chunk_), [this, self](auto ec, size_t n) {
    Bcast& bc = *bcast_;
    bc.busy = false;
    if (bc.failed && ec) {
      // srun has closed its side: no read after that would ever complete (Asio waits for the
      // next readiness, which a closed socket never gives again). The reason, once written, is
      // the last word.
      done_ = true;
      if (!writing_) Close();
      return;
    }
    if (bc.failed) return DrainClient();
    if (ec) {
      bc.client_done = true;
      return ProgramFailed(Unavailable("--bcast: srun went away after sending " +
                                       std::to_string(bc.received) + " of the program's " +
                                       std::to_string(bc.spec.size) + " bytes"));
    }
    if (!frames_.Append(chunk_.data(), n).ok()) {
      return ProgramFailed(InvalidArgument("--bcast: a bad frame from srun"));
    }
    ReadProgram();
  });
}

void StepSupervisor::ReadWriterResult() {
  auto self = shared_from_this();
  auto buf = std::make_shared<std::array<char, 64>>();
  auto result = bcast_->result;
  result->async_read_some(asio::buffer(*buf),
                          [this, self, result, buf](boost::system::error_code ec, size_t n) {
                            Bcast& b = *bcast_;
                            if (b.report.size() + n <= buf->size()) b.report.append(buf->data(), n);
                            if (!ec) return ReadWriterResult();
                            // Its end of file: the writer has exited (it held the only other end).
                            boost::system::error_code ignored;
                            result->close(ignored);
                            int status = 0;
                            while (::waitpid(b.pid, &status, 0) < 0 && errno == EINTR) {
                            }
                            ProgramWritten(status);
                          });
}

void StepSupervisor::ProgramWritten(int wait_status) {
  Bcast& b = *bcast_;
  b.writer_done = true;
  if (b.deadline) b.deadline->cancel();
  if (hooks_.task_done) hooks_.task_done(b.pid);
  if (b.failed) return;
  // A job that ended meanwhile (srun can hold back the last byte until then), or that takes no
  // more steps, starts nothing: its end would never reach tasks started after it.
  if (hooks_.job_takes_steps && !hooks_.job_takes_steps()) {
    return ProgramFailed(FailedPrecondition(
        "--bcast: job " + std::to_string(req_.job_id()) + " no longer takes steps on " +
        setup_.node() +
        " (it ended, was suspended, or its batch script ended while the program arrived): "
        "nothing of the step was started"));
  }
  const Status outcome = BcastOutcome(b.report, wait_status, b.spec);
  if (!outcome.ok()) return ProgramFailed(outcome);
  // The program is whole (the writer took every byte srun announced): the tasks start.
  if (Status s = Launch(); !s.ok()) return Fail(s);
  WatchClient();
}

void StepSupervisor::ProgramFailed(const Status& s) {
  Bcast& b = *bcast_;
  if (b.failed) return;
  b.failed = true;
  if (b.deadline) b.deadline->cancel();
  if (b.data) {
    boost::system::error_code ignored;
    b.data->close(ignored);  // the writer stops at its end of file, and removes its copy
  }
  spdlog::warn("job={} step={} node={} {}", req_.job_id(), req_.step_id(), setup_.node(),
               Printable(s.message()));  // it names a path the user chose
  // As Fail, with no task to kill, except that the connection stays open until srun closes it:
  // what it still sends is read and dropped, so that srun is not cut off before it reads why.
  Write(static_cast<uint32_t>(s.code()), s.message());
  if (exit_code_ == 0) exit_code_ = 1;
  ReportEnd();
  if (b.client_done) {
    done_ = true;  // the connection closes once the reason is written
    if (!writing_) Close();
  } else if (!b.busy) {
    DrainClient();
  }
}

void StepSupervisor::DrainClient() {
  auto self = shared_from_this();
  socket_.async_read_some(asio::buffer(chunk_), [this, self](auto ec, size_t) {
    if (!ec) return DrainClient();
    done_ = true;
    if (!writing_) Close();
  });
}

}  // namespace muster::agent
