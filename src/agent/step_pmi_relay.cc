// The step supervisor's side of PMI: each task's PMI_FD socket relayed to the client's PMI
// server over the step's connection (frames of type 4 down, StepEvent.pmi up), in order, one
// write at a time per task.
#include <array>
#include <memory>

#include "step_supervisor.h"

namespace muster::agent {

namespace asio = boost::asio;

// What the task writes to its PMI_FD goes to the client's PMI server as it comes.
void StepSupervisor::ReadPmi(size_t idx) {
  auto sd = pmi_[idx].fd;
  auto buf = std::make_shared<std::array<char, 16384>>();
  auto self = shared_from_this();
  sd->async_read_some(asio::buffer(*buf),
                      [this, self, sd, buf, idx](boost::system::error_code ec, size_t n) {
                        if (n > 0) SendPmi(idx, buf->data(), n);
                        if (ec || !pmi_[idx].fd) {
                          ClosePmi(idx);
                          --tasks_[idx].open_pipes;
                          MaybeReport(idx);
                          return;
                        }
                        WhenClientKeepsUp([this, self, idx] {
                          if (pmi_[idx].fd) return ReadPmi(idx);
                          --tasks_[idx].open_pipes;  // closed while paused: no read to end
                          MaybeReport(idx);
                        });
                      });
}

void StepSupervisor::SendPmi(size_t idx, const char* data, size_t n) {
  v1::StepEvent ev;
  ev.mutable_pmi()->set_task(tasks_[idx].id);
  ev.mutable_pmi()->set_data(data, n);
  Write(0, ev.SerializeAsString());
}

void StepSupervisor::DrainPmi(size_t idx) {
  if (!pmi_[idx].fd) return;
  const int fd = pmi_[idx].fd->native_handle();
  char buf[16384];
  // Bounded: a process the task left behind may go on writing.
  for (int i = 0; i < 64; ++i) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;
    SendPmi(idx, buf, static_cast<size_t>(n));
  }
  ClosePmi(idx);  // its pending read ends, which counts it and reports the task
}

// The PMI server's answer to a task here.
void StepSupervisor::ToPmi(const v1::PmiData& answer) {
  // Which of the tasks here it is: tasks_ are in the launch's (ascending) order.
  auto here = std::lower_bound(tasks_.begin(), tasks_.end(), answer.task(),
                               [](const Task& t, uint32_t id) { return t.id < id; });
  if (here == tasks_.end() || here->id != answer.task()) return;
  const size_t idx = static_cast<size_t>(here - tasks_.begin());
  if (idx >= pmi_.size()) return;
  StdinSink& k = pmi_[idx];
  if (!k.fd) return;
  // The server gave up on the rank (or it does not read its answers): it sees its socket end.
  if (answer.data().empty() || k.queued + answer.data().size() > kMaxPmiBacklog) {
    return ClosePmi(idx);
  }
  k.queue.push_back(answer.data());
  k.queued += answer.data().size();
  if (!k.writing) WritePmi(idx);
}

void StepSupervisor::WritePmi(size_t idx) {
  StdinSink& k = pmi_[idx];
  if (k.queue.empty() || !k.fd) {
    k.writing = false;
    return;
  }
  k.writing = true;
  auto self = shared_from_this();
  auto sd = k.fd;
  asio::async_write(*sd, asio::buffer(k.queue.front()), [this, self, sd, idx](auto ec, size_t) {
    StdinSink& sink = pmi_[idx];
    if (!sink.fd || ec) {  // closed meanwhile, or the task's end is gone
      sink.writing = false;
      return;
    }
    sink.queued -= sink.queue.front().size();
    sink.queue.pop_front();
    WritePmi(idx);
  });
}

void StepSupervisor::ClosePmi(size_t idx) {
  StdinSink& k = pmi_[idx];
  if (!k.fd) return;
  boost::system::error_code ignored;
  k.fd->close(ignored);  // a pending read ends (and is counted) in ReadPmi
  k.fd.reset();
  k.queue.clear();
  k.queued = 0;
}

}  // namespace muster::agent
