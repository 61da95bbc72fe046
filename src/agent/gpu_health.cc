#include "gpu_health.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "inventory.h"

namespace muster::agent {

GpuHealthSource GpuHealthSource::FromNvml(std::unique_ptr<Nvml> nvml) {
  GpuHealthSource s;
  s.nvml_ = std::move(nvml);
  return s;
}

GpuHealthSource GpuHealthSource::FromFixture(std::map<uint32_t, std::string> captured,
                                             std::string fault_file) {
  GpuHealthSource s;
  s.captured_ = std::move(captured);
  s.fault_file_ = std::move(fault_file);
  return s;
}

std::map<uint32_t, std::string> GpuHealthSource::Now() {
  std::map<uint32_t, std::string> now;
  if (nvml_) return nvml_->Health();
  for (const auto& [index, why] : captured_) {
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
      spdlog::warn("ignoring {}: {}", fault_file_, fault_file_error_);
    }
    return now;
  }
  fault_file_error_.clear();
  for (const auto& [index, why] : *faults) now.emplace(index, why);
  return now;
}

void GpuHealthWatch::Tick() {
  if (ctx_.stopping) return;
  std::map<uint32_t, std::string> now = source_.Now();
  std::vector<v1::GpuHealth> changes;
  {
    std::lock_guard<std::mutex> l(ctx_.mu);
    for (auto& g : *ctx_.inventory.mutable_gpus()) {
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
      spdlog::info("node={} gpu{} is healthy again", ctx_.node(), h.index());
    } else {
      spdlog::error("node={} gpu{} unhealthy: {}", ctx_.node(), h.index(), h.health());
    }
    v1::AgentMessage m;
    *m.mutable_gpu_health() = h;
    ctx_.Send(m);  // lost while disconnected: the next registration carries the health
  }
  timer_.expires_after(std::chrono::milliseconds(ctx_.options.config.agent.gpu_health_interval_ms));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Tick();
  });
}

}  // namespace muster::agent
