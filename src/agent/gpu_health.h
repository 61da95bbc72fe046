// GPU health: where it comes from (NVML on a real node: critical XID events, uncorrectable ECC
// errors, retired pages and row remapping, a GPU fallen off the bus; in fixture mode the captured
// health plus faults injected through a file) and the periodic check that tells the controller of
// every change (it drains the node and requeues the jobs on a sick GPU).
//
// Io thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "agent_context.h"
#include "nvml.h"

namespace muster::agent {

class GpuHealthSource {
 public:
  // No GPUs, or none whose health can be read.
  GpuHealthSource() = default;
  static GpuHealthSource FromNvml(std::unique_ptr<Nvml> nvml);
  // Fixture mode: the captured health by GPU index, and the file faults are injected through
  // (ParseGpuFaults' format; a missing file injects nothing).
  static GpuHealthSource FromFixture(std::map<uint32_t, std::string> captured,
                                     std::string fault_file);

  // The GPUs unhealthy now, by index, with why.
  std::map<uint32_t, std::string> Now();
  Nvml* nvml() { return nvml_.get(); }

 private:
  std::unique_ptr<Nvml> nvml_;
  std::map<uint32_t, std::string> captured_;
  std::string fault_file_;
  std::string fault_file_error_;  // the last complaint about it, said once
};

// Every gpu_health_interval_ms: compares the source with the inventory and reports changes.
class GpuHealthWatch {
 public:
  GpuHealthWatch(AgentContext& ctx, GpuHealthSource& source)
      : ctx_(ctx), source_(source), timer_(ctx.io) {}
  void Start() { Tick(); }
  void Stop() { timer_.cancel(); }

 private:
  void Tick();

  AgentContext& ctx_;
  GpuHealthSource& source_;
  boost::asio::steady_timer timer_;
};

}  // namespace muster::agent
