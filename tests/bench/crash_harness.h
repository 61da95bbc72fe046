// crash_harness's parts (crash_harness.cc: the clients, the kill rounds and the checks;
// crash_failover.cc: the rounds of a hot standby, --failover). See crash_harness.cc.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "crash_invariants.h"
#include "muster/client/controller_client.h"
#include "muster/common/config.h"

namespace muster::bench::crash {

using muster::Status;
using muster::StatusCode;
using muster::client::ControllerClient;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string cluster, musterctld, summary;
  int rounds = 20, clients = 4, max_kill_delay_ms = 1200;
  uint64_t seed = 0;
  bool failover = false;
};

// A transport failure leaves the outcome unknown; any other error is the controller's answer.
Outcome OutcomeOf(const Status& st);
int64_t WallMs();

// Lets the harness stop every client at an operation boundary, check, and let them go on.
class Gate {
 public:
  explicit Gate(int clients) : clients_(clients) {}
  void Checkpoint() {
    std::unique_lock l(mu_);
    if (!paused_) return;
    ++idle_;
    cv_.notify_all();
    cv_.wait(l, [&] { return !paused_; });
    --idle_;
  }
  void Pause() {
    std::unique_lock l(mu_);
    paused_ = true;
    cv_.wait(l, [&] { return idle_ == clients_ || stopped_ == clients_; });
  }
  void Resume() {
    std::lock_guard l(mu_);
    paused_ = false;
    cv_.notify_all();
  }
  void Stopped() {
    std::lock_guard l(mu_);
    ++stopped_;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int clients_;
  int idle_ = 0, stopped_ = 0;
  bool paused_ = false;
};

class Harness {
 public:
  explicit Harness(Options o)
      : o_(std::move(o)),
        socket_(o_.cluster + "/run/musterctld.sock"),
        runs_log_(o_.cluster + "/crash-runs.log"),
        gate_(o_.clients),
        ledgers_(o_.clients) {}

  int Run();

 private:
  void Client(int index);
  std::string Script(std::mt19937_64& rng) const;
  void Submit(int index, ControllerClient& c, std::mt19937_64& rng, bool* broken);
  void JobOp(int index, ControllerClient& c, char kind, uint64_t id, bool* broken);
  void NodeOp(int index, ControllerClient& c, const std::string& node, bool* broken);
  void Refresh(int index, ControllerClient& c, bool* broken);

  std::optional<ControllerClient> Connect() const;
  pid_t ControllerPid() const;
  bool KillController(pid_t pid);
  pid_t SpawnController(const std::string& log, const std::string& name) const;
  pid_t StartController();
  std::optional<double> WaitServing(pid_t pid);
  // --failover: the controllers of a standby cluster, by name.
  int Leader() const;  // index into config_.controllers of the one serving; -1 if none
  pid_t PidOf(int c) const;
  pid_t StartStandby(int c);
  bool FailoverRound(int round, std::mt19937_64& rng);
  // Whether controller `serving` counts `standby` in sync, within 60 s.
  bool InSync(int serving, int standby);

  // The invariants (crash_invariants.h) after a round and at the end; what they find is printed.
  void CheckRound(int round, const Jobs& running_at_kill);
  void CheckEnd();
  bool ListAll(Jobs* jobs);
  void Violation(const std::string& what);
  void Report(size_t found);
  bool DrainQueue(int timeout_s);

  Options o_;
  const std::string socket_, runs_log_;
  Gate gate_;
  std::vector<ClientLedger> ledgers_;  // ledgers_[i] only touched by client i (or while paused)
  std::vector<std::string> nodes_;
  std::atomic<int> gen_{0};
  std::atomic<bool> stop_{false};
  pid_t own_child_ = 0;                  // a controller this process started (reaped with waitpid)
  std::vector<std::string> violations_;  // all found, the checker's included
  muster::bench::crash::Checker checker_;
  std::vector<double> restart_ms_;
  int killed_in_recovery_ = 0;
  muster::Config config_;        // --failover
  std::vector<pid_t> children_;  // --failover: controllers this process started, to reap
  int frozen_rounds_ = 0;
};
}  // namespace muster::bench::crash
