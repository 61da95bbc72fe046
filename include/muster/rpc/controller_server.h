// musterctld as a library: the ControllerRunner (the engine, its strand and timers) on an Asio
// executor, with its transports: the framed user API on a Unix socket and the agents' gRPC service
// (NodeRegistry) on TCP, both feeding the one dispatch layer. The daemon's main() and the
// in-process test cluster run this same class.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/controller/controller_runner.h"

namespace muster::rpc {

struct ControllerServerOptions {
  Config config;
  int threads = 2;  // io_context threads (one strand owns the engine)
  Clock* clock = SystemClock::Get();
  // A leader with hot standbys: they follow its store through the Replication service on the
  // agents' port.
  controller::ControllerReplicationOptions replication;
  uint64_t min_epoch = 0;  // a leader elected through etcd: its leader key's revision
  // A reconfiguration sets the log level to the file's controller.log_level (false: musterctld
  // --log-level fixed it).
  bool log_level_follows_config = true;
  // With a hot standby: which [[controllers]] entry this is, applied to the file a
  // reconfiguration reads as at the start (ConfigForController).
  std::string controller_name;
};

// musterctld's command line.
struct ControllerCommandLine {
  std::string config_path;  // empty: $MUSTER_CONF, else the default path
  std::string log_level;    // empty: the config's
  bool help = false;
  bool version = false;
  std::string check_state;  // --check-state DIR: verify a state directory offline and exit
  std::string name;         // --name: which [[controllers]] entry this is; empty: the host's name
  // --after-restore [--job-id-gap N]: make the config's state directory, restored from a
  // backup, safe to start on, and exit.
  bool after_restore = false;
  uint64_t job_id_gap = 10'000'000;
};
// Parses musterctld's arguments (argv[0] is the program). INVALID_ARGUMENT, naming the option,
// for an unknown option, a missing value or a stray argument.
Result<ControllerCommandLine> ParseControllerCommandLine(int argc, char** argv);
std::string ControllerUsage();
// --check-state DIR: prints what the state directory holds and every problem found, read-only.
// Returns the exit code: 0 sound, 1 problems found, 2 unreadable.
int CheckStateCommand(const std::string& dir, std::FILE* out);
// --after-restore: the state directory of `config` (a copy restored from a backup; the
// controller stopped) gets an epoch past any the agents can have obeyed and job ids past any
// issued since the copy (store::PrepareRestoredState). Says what it did; returns the exit code:
// 0 done, 1 not (the store is in use, unreadable, or not a controller's).
int AfterRestoreCommand(const Config& config, uint64_t job_id_gap, std::FILE* out);

// Thread-safe: Start/Shutdown/Wait may be called from any thread (once each).
class ControllerServer {
 public:
  // Validates options only; no I/O.
  static Result<std::unique_ptr<ControllerServer>> Create(ControllerServerOptions options);
  ~ControllerServer();

  // Opens the state store, recovers, binds the agent port and the Unix socket, starts serving.
  // FAILED_PRECONDITION when the state dir is in use or another controller owns the socket.
  Status Start();
  // Stops serving and closes the store. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() was called.
  void Wait();

  int agent_port() const;    // the bound TCP port (useful with port 0)
  int api_port() const;      // the user API's TCP port; 0 without controller.api_address
  int metrics_port() const;  // /metrics' port; 0 without controller.metrics_address
  int web_port() const;      // the web view's port; 0 without controller.web_address
  uint64_t epoch() const;
  // With replication: the standbys in sync now (their acknowledgement is awaited). Thread-safe.
  std::vector<std::string> standbys_in_sync() const;
  const std::string& socket_path() const;
  // Runs `fn` on the controller's event loop (the strand the engine runs on), after what is
  // queued there: a watchdog pinged from there stops when the loop is wedged. Dropped unless
  // the server is serving (false).
  bool PostToLoop(std::function<void()> fn);
  // Reads config.source again and applies it as `muster reconfigure` does, on the service
  // manager's behalf (SIGHUP, systemctl reload). `done` runs on the event loop; UNAVAILABLE
  // unless the server is serving.
  void Reconfigure(std::function<void(Result<v1::ReconfigureResponse>)> done);
  // SIGHUP, `systemctl reload`: Reconfigure, with systemd told RELOADING and then READY (and the
  // outcome logged: a refused file's error, or the new epoch).
  void ReloadForServiceManager();

 private:
  class Impl;
  explicit ControllerServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::rpc
