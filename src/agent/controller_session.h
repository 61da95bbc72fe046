// The agent's side of its session with the controller (Kudu's heartbeater): what it registers
// with, the epoch fence (commands from a controller older than one obeyed before are refused,
// across agent restarts too), the heartbeats, and what it sends again after a reconnect. The
// ControllerLink carries it; this decides what it says.
//
// Io thread, but for MakeRegister (the link thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <random>
#include <string>

#include "admin_scripts.h"
#include "agent_context.h"
#include "job_spool.h"
#include "job_supervisor.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

class ControllerSession {
 public:
  ControllerSession(AgentContext& ctx, JobSupervisor& jobs, JobSpool& spool,
                    const HealthCheck& health, std::string instance_id)
      : ctx_(ctx),
        jobs_(jobs),
        spool_(spool),
        health_(health),
        instance_id_(std::move(instance_id)),
        hb_timer_(ctx.io) {}

  // The epoch obeyed before this agent started (the spool remembers it).
  void LoadEpoch() { epoch_ = spool_.LoadEpoch(); }
  // Link thread: the inventory, the jobs held here, and those whose state was lost.
  v1::RegisterRequest MakeRegister() const;
  void OnConnected(const v1::RegisterResponse& resp);
  void OnMessage(const v1::ControllerMessage& msg);
  void OnDisconnected() { hb_timer_.cancel(); }
  void Stop() { hb_timer_.cancel(); }
  uint64_t epoch() const { return epoch_; }
  // Any thread: whether a controller at `epoch` is older than one this node obeyed.
  bool IsStale(uint64_t epoch) const { return epoch < epoch_.load(); }
  const std::string& instance_id() const { return instance_id_; }
  // Any thread: commands refused as coming from an older epoch (the fence at work).
  uint64_t refused_commands() const { return refused_.load(); }

 private:
  void Heartbeat();

  AgentContext& ctx_;
  JobSupervisor& jobs_;
  JobSpool& spool_;
  const HealthCheck& health_;
  const std::string instance_id_;
  boost::asio::steady_timer hb_timer_;
  std::atomic<uint64_t> epoch_{0};  // written on the I/O thread; IsStale reads it from the link's
  std::atomic<uint64_t> refused_{0};
  uint32_t hb_interval_ms_ = 5000;
  uint64_t hb_seq_ = 0;
  std::mt19937 rng_{std::random_device{}()};
};

}  // namespace muster::agent
