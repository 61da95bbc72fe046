#include "controller_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace muster::agent {

v1::RegisterRequest ControllerSession::MakeRegister() const {
  v1::RegisterRequest r;
  r.set_instance_id(instance_id_);
  {
    std::lock_guard<std::mutex> l(ctx_.mu);
    *r.mutable_inventory() = ctx_.inventory;
  }
  for (uint64_t id : jobs_.JobIdsSnapshot()) r.add_running_job_ids(id);
  for (uint64_t id : jobs_.LostJobIdsSnapshot()) r.add_lost_job_ids(id);
  for (v1::AdoptedJob& a : jobs_.AdoptedJobsSnapshot()) *r.add_adopted_jobs() = std::move(a);
  return r;
}

void ControllerSession::OnMessage(const v1::ControllerMessage& msg) {
  if (msg.epoch() < epoch_) {
    ++refused_;
    spdlog::warn("node={} refuses a command from an older controller epoch {} (current {})",
                 ctx_.node(), msg.epoch(), epoch_.load());
    return;
  }
  switch (msg.msg_case()) {
    case v1::ControllerMessage::kLaunchJob:
      jobs_.Launch(msg.launch_job());
      break;
    case v1::ControllerMessage::kTerminateJob:
      jobs_.Terminate(msg.terminate_job());
      break;
    case v1::ControllerMessage::kSignalJob:
      jobs_.Signal(msg.signal_job());
      break;
    case v1::ControllerMessage::kSuspendJob:
      jobs_.Suspend(msg.suspend_job());
      break;
    case v1::ControllerMessage::kRebootNode:
      if (!jobs_.jobs().empty()) {
        // The controller issues a reboot only to a node without jobs; whatever still runs here
        // is not the reboot's to end.
        v1::AgentMessage m;
        m.mutable_reboot_failed()->set_error(std::to_string(jobs_.jobs().size()) +
                                             " job(s) still on the node");
        ctx_.Send(m);
        break;
      }
      RunRebootProgram(ctx_, msg.reboot_node());
      break;
    default:
      spdlog::warn("node={} got an unknown command; ignored", ctx_.node());
  }
}

void ControllerSession::OnConnected(const v1::RegisterResponse& resp) {
  if (resp.epoch() < epoch_) {
    // A controller older than one we have obeyed (a stale primary come back): its commands are
    // refused by OnMessage; say so once here.
    spdlog::error(
        "node={} registered with controller epoch {}, older than epoch {} seen before; "
        "its commands will be refused",
        ctx_.node(), resp.epoch(), epoch_.load());
  } else if (resp.epoch() > epoch_) {
    epoch_ = resp.epoch();
    // Remembered across agent restarts, so a stale controller stays fenced off.
    if (!spool_.SaveEpoch(epoch_)) {
      spdlog::warn("node={} cannot save the controller epoch in {}", ctx_.node(), spool_.dir());
    }
  }
  hb_interval_ms_ = std::max<uint32_t>(50, resp.heartbeat_interval_ms());
  if (resp.epoch() >= epoch_) ctx_.step_key = resp.step_key();
  // Events sent while the controller was away are sent again; it ignores what it already knows.
  jobs_.ReportAll();
  if (health_.last()) {
    v1::AgentMessage m;
    *m.mutable_node_health() = *health_.last();
    ctx_.Send(m);
  }
  Heartbeat();
}

void ControllerSession::Heartbeat() {
  hb_timer_.cancel();
  if (ctx_.stopping) return;
  v1::AgentMessage m;
  m.mutable_heartbeat()->set_seq(++hb_seq_);
  for (uint64_t id : jobs_.RunningJobIds()) m.mutable_heartbeat()->add_running_job_ids(id);
  ctx_.Send(m);
  // +-10% jitter so a cluster's heartbeats do not arrive in lockstep.
  const int jitter = static_cast<int>(hb_interval_ms_ / 10);
  const int ms =
      static_cast<int>(hb_interval_ms_) + std::uniform_int_distribution<int>(-jitter, jitter)(rng_);
  hb_timer_.expires_after(std::chrono::milliseconds(ms));
  hb_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Heartbeat();
  });
}

}  // namespace muster::agent
