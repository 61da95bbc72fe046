// musterctld: the controller daemon. Command line -> config -> ControllerServer -> wait for a
// signal -> Shutdown.
#include <absl/synchronization/mutex.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>  // getpid

#include <atomic>
#include <cstdio>
#include <thread>

#include "muster/common/config.h"
#include "muster/common/service_notify.h"
#include "muster/common/signals.h"
#include "muster/common/version.h"
#include "muster/ha/controller_candidate.h"
#include "muster/logging/logging.h"
#include "muster/rpc/controller_server.h"

int main(int argc, char** argv) {
  // gRPC locks absl mutexes on every message, and Debian's absl checks each lock for deadlock
  // cycles (a debugging aid): a fifth of the controller's CPU for 12,500 agents' heartbeats
  // (docs/benchmarks.md).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto cl = muster::rpc::ParseControllerCommandLine(argc, argv);
  if (!cl.ok()) {
    std::fprintf(stderr, "musterctld: %s\n%s", cl.status().message().c_str(),
                 muster::rpc::ControllerUsage().c_str());
    return 2;
  }
  if (cl->help || cl->version) {
    std::fputs(cl->help ? muster::rpc::ControllerUsage().c_str()
                        : (std::string("musterctld ") + muster::kVersion + "\n").c_str(),
               stdout);
    return 0;
  }
  if (!cl->check_state.empty()) return muster::rpc::CheckStateCommand(cl->check_state, stdout);
  auto config = muster::LoadConfig(muster::ResolveConfigPath(cl->config_path));
  if (!config.ok()) {
    std::fprintf(stderr, "musterctld: %s\n", config.status().message().c_str());
    return 1;
  }
  const auto& cc = config->controller;
  muster::LogOptions logging;
  logging.program = "musterctld";
  logging.level = cl->log_level.empty() ? cc.log_level : cl->log_level;
  logging.file = cc.log_file;
  logging.format = cc.log_format;
  auto log = muster::InitLogging(logging);
  if (!log.ok()) {
    std::fprintf(stderr, "musterctld: %s\n", log.message().c_str());
    return 1;
  }
  spdlog::info("musterctld {} starting with {}", muster::kVersion, config->source);
  const std::string name = cl->name.empty() ? muster::DefaultControllerName(*config) : cl->name;
  auto mine = muster::ConfigForController(*config, name);
  if (!mine.ok()) {
    spdlog::critical("cannot start: {}", mine.status().ToString());
    return 1;
  }
  // One-shot: this controller's state directory, restored from a backup.
  if (cl->after_restore) return muster::rpc::AfterRestoreCommand(*mine, cl->job_id_gap, stdout);
  muster::BlockTerminationSignals();
  muster::ServiceNotifier& systemd = muster::ServiceNotifier::Get();
  // SIGHUP (systemctl reload, Slurm's habit): the config file again, as `muster reconfigure`.
  auto reload_with = [](muster::rpc::ControllerServer* server) {
    if (!server) {
      spdlog::warn(
          "SIGHUP: standing by; the configuration is read again when this controller "
          "takes the lead");
      return;
    }
    server->ReloadForServiceManager();
  };
  if (mine->controller.etcd_endpoints.empty()) {
    muster::rpc::ControllerServerOptions options{*mine};
    options.log_level_follows_config = cl->log_level.empty();
    auto server = muster::rpc::ControllerServer::Create(std::move(options));
    muster::Status st = server.ok() ? (*server)->Start() : server.status();
    if (!st.ok()) {
      spdlog::critical("cannot start: {}", st.ToString());
      return 1;
    }
    // Ready for systemd (Type=notify) only now: state recovered, listeners bound.
    if (const std::string p = systemd.problem(); !p.empty()) spdlog::warn("{}", p);
    systemd.Ready("serving " + std::to_string(mine->nodes.size()) + " nodes, epoch " +
                  std::to_string((*server)->epoch()));
    auto watchdog = muster::StartSystemdWatchdog(
        [&](std::function<void()> ping) { return (*server)->PostToLoop(std::move(ping)); });
    const int sig = muster::WaitForStopSignal([&] { reload_with(server->get()); });
    spdlog::info("signal {}: shutting down", sig);
    systemd.Stopping("shutting down (signal " + std::to_string(sig) + ")");
    watchdog.reset();
    (*server)->Shutdown();
    return 0;
  }
  // A hot standby's controller: follows until it leads; a leader that loses the lead exits with
  // an error so that systemd starts it again, as a standby.
  auto candidate = muster::ha::ControllerCandidate::Create({*mine, name});
  muster::Status st = candidate.ok() ? (*candidate)->Start() : candidate.status();
  if (!st.ok()) {
    spdlog::critical("cannot start: {}", st.ToString());
    return 1;
  }
  if (const std::string p = systemd.problem(); !p.empty()) spdlog::warn("{}", p);
  systemd.Ready(std::string((*candidate)->leading() ? "leading" : "standing by") + " as " + name);
  // A leader's loop feeds the watchdog; a standby has no one loop to probe: it pings itself.
  auto watchdog = muster::StartSystemdWatchdog([&](std::function<void()> ping) {
    if (muster::rpc::ControllerServer* s = (*candidate)->server()) {
      return s->PostToLoop(std::move(ping));
    }
    ping();
    return true;
  });
  std::atomic<bool> ended{false};
  muster::Status why;
  std::thread watch([&] {
    why = (*candidate)->Wait();
    ended = true;
    ::kill(::getpid(), SIGTERM);  // wakes the signal wait below
  });
  const int sig = muster::WaitForStopSignal([&] { reload_with((*candidate)->server()); });
  if (!ended) spdlog::info("signal {}: shutting down", sig);
  systemd.Stopping(ended ? "stopped" : "shutting down (signal " + std::to_string(sig) + ")");
  watchdog.reset();
  (*candidate)->Shutdown(/*resign=*/true);
  watch.join();
  if (!why.ok()) {
    spdlog::critical("stopped: {}", why.ToString());
    return 1;
  }
  return 0;
}
