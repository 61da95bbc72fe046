// The step supervisor's side of srun's standard input: the client's bytes to the tasks that
// read it, within the window the client keeps (StepEvent.stdin_taken says how much was taken).
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "step_supervisor.h"

namespace muster::agent {

namespace asio = boost::asio;

size_t StepSupervisor::StdinBacklog() const {
  size_t n = 0;
  for (const StdinSink& k : sinks_) n = std::max(n, k.queued);
  return n;
}

// Client stdin to every sink; an empty chunk is the end of input.
void StepSupervisor::ToStdin(const std::string& data) {
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

void StepSupervisor::WriteStdin(size_t i) {
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
    TellStdinTaken();
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
    TellStdinTaken();
    WriteStdin(i);
  });
}

// The client's window moves on as the tasks take their input: told in steps of a quarter
// window, and whenever everything sent has been taken.
void StepSupervisor::TellStdinTaken() {
  const uint64_t taken = stdin_in_ - std::min<uint64_t>(stdin_in_, StdinBacklog());
  if (taken == stdin_told_ || (taken - stdin_told_ < kStepStdinWindow / 4 && taken < stdin_in_)) {
    return;
  }
  stdin_told_ = taken;
  v1::StepEvent ev;
  ev.set_stdin_taken(taken);
  Write(0, ev.SerializeAsString());
}

void StepSupervisor::CloseStdin() {
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

}  // namespace muster::agent
