// musterd: the node agent. Command line -> config -> Agent -> wait for a signal -> Stop.
#include <absl/synchronization/mutex.h>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "muster/agent/agent.h"
#include "muster/common/config.h"
#include "muster/common/service_notify.h"
#include "muster/common/signals.h"
#include "muster/common/version.h"
#include "muster/logging/logging.h"

int main(int argc, char** argv) {
  // As in musterctld: gRPC's absl mutexes without the debugging aid of deadlock detection.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto cl = muster::agent::ParseAgentCommandLine(argc, argv);
  if (!cl.ok()) {
    std::fprintf(stderr, "musterd: %s\n%s", cl.status().message().c_str(),
                 muster::agent::AgentUsage().c_str());
    return 2;
  }
  if (cl->help) {
    std::fputs(muster::agent::AgentUsage().c_str(), stdout);
    return 0;
  }
  if (cl->version) {
    std::printf("musterd %s\n", muster::kVersion);
    return 0;
  }
  muster::agent::AgentOptions& o = cl->options;
  o.config_path = muster::ResolveConfigPath(cl->config_path);
  auto config = muster::LoadConfig(o.config_path);
  if (cl->probe) {
    // Discovery needs no configuration: `musterd --probe` is how a new node's entry is written.
    if (config.ok()) o.config = *config;
    muster::InitLogging("musterd", "warn", "").IgnoreError();
    auto report = muster::agent::Agent::Probe(std::move(o));
    if (!report.ok()) {
      std::fprintf(stderr, "musterd: %s\n", report.status().message().c_str());
      return 1;
    }
    std::fputs(report->c_str(), stdout);
    return 0;
  }
  if (!config.ok()) {
    std::fprintf(stderr, "musterd: %s\n", config.status().message().c_str());
    return 1;
  }
  o.config = *config;
  muster::LogOptions logging;
  logging.program = "musterd";
  logging.level = cl->log_level.empty() ? config->agent.log_level : cl->log_level;
  logging.file = cl->log_file;
  logging.format = config->agent.log_format;
  auto log = muster::InitLogging(logging);
  if (!log.ok()) {
    std::fprintf(stderr, "musterd: %s\n", log.message().c_str());
    return 1;
  }
  muster::BlockTerminationSignals();
  auto agent = muster::agent::Agent::Create(std::move(o));
  muster::Status st = agent.ok() ? (*agent)->Start() : agent.status();
  if (!st.ok()) {
    spdlog::critical("cannot start: {}", st.ToString());
    return 1;
  }
  // Ready for systemd (Type=notify): the hardware probed, jobs re-adopted, the step port bound
  // (the controller may still be out of reach: the agent keeps trying, as it does later).
  muster::ServiceNotifier& systemd = muster::ServiceNotifier::Get();
  if (const std::string p = systemd.problem(); !p.empty()) spdlog::warn("{}", p);
  systemd.Ready("node " + (*agent)->node_name() + " started");
  auto watchdog = muster::StartSystemdWatchdog(
      [&](std::function<void()> ping) { return (*agent)->PostToLoop(std::move(ping)); });
  const int sig = muster::WaitForStopSignal(muster::WarnReloadNotSupported);
  systemd.Stopping("stopping (signal " + std::to_string(sig) + ")");
  watchdog.reset();
  spdlog::info("signal {}: stopping ({})", sig,
               config->agent.kill_jobs_on_stop ? "ending the jobs here: kill_jobs_on_stop"
                                               : "jobs keep running");
  (*agent)->Stop();
  return 0;
}
