// The controller without its transports (Kudu's master_runner): opens the state store, recovers
// the engine, owns it on the executor's strand, and drives time: the liveness tick and the
// coalesced scheduling passes (one at a time, their core off the strand). Services hand it their
// work with Post() and call AfterEvent() when the engine has answered; it delivers the engine's
// commands to the agents' sessions and arms the next pass.
//
// The daemon runs it on Asio (rpc::ControllerServer); a standby or a simulator runs it on a
// ManualExecutor with a ManualClock and an in-memory store: no sockets, no threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/executor.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/controller/service_stats.h"
#include "muster/store/replication_log.h"
#include "muster/store/state_store.h"

namespace muster::store {
class GroupCommitStore;
class ReplicatingStore;
}  // namespace muster::store

namespace muster::controller {

// The agents' side of the transport: delivers the engine's commands to their sessions (a command
// for a node without a session is dropped; reconciliation resends what matters when it
// reconnects). Called on the strand.
class AgentSessions {
 public:
  virtual ~AgentSessions() = default;
  virtual void Deliver(std::vector<Outgoing> commands) = 0;
};

// Where the engine's mails go (the daemon's sender runs controller.mail_prog for each): called on
// the strand once what each mail reports is durable; must not block.
class MailSink {
 public:
  virtual ~MailSink() = default;
  virtual void Send(std::vector<MailNotice> mails) = 0;
};

// A leader with hot standbys (store::ReplicationLog): what it commits is streamed to them, and
// nothing is acknowledged before the in-sync ones have it.
struct ControllerReplicationOptions {
  bool enabled = false;
  store::ReplicationLog::Membership membership;  // where the in-sync set is published (etcd)
  std::function<Status()> may_write;             // an error once this controller no longer leads
  std::chrono::milliseconds ack_timeout{2000};
};

struct ControllerRunnerOptions {
  Config config;
  Clock* clock = SystemClock::Get();
  Executor* executor = nullptr;  // required; outlives the runner
  // The state store (required): the daemon's RocksDB store, or an in-memory one.
  std::unique_ptr<store::StateStore> store;
  // Job credentials; empty: random.
  std::function<std::string()> make_credential;
  uint64_t min_epoch = 0;  // EngineOptions::min_epoch
  ControllerReplicationOptions replication;
  // How often the tick (liveness, allocations' limits, retention) runs; 0: a quarter of the
  // heartbeat interval, within 20 ms..1 s. muster-sim, whose agents never fall silent, ticks
  // rarely over months of virtual time.
  uint32_t tick_ms = 0;
};

// Create, Start, Stop and epoch() are thread-safe; everything else runs on the strand (from work
// given to Post).
class ControllerRunner {
 public:
  // Opens the store and recovers the engine (a new epoch, persisted). FAILED_PRECONDITION when the
  // state directory is in use; what Engine::Create returns otherwise.
  static Result<std::unique_ptr<ControllerRunner>> Create(ControllerRunnerOptions options);
  ~ControllerRunner();

  // Starts the tick and the first pass; commands go to `agents`, mails to `mail` (either may be
  // null: dropped).
  void Start(AgentSessions* agents, MailSink* mail = nullptr);
  // No more ticks or passes start; a pass in flight is dropped when it returns. Thread-safe.
  void Stop();
  bool stopped() const { return stopped_->load(); }

  // Runs `fn` on the strand unless the runner has stopped. Thread-safe.
  void Post(std::function<void()> fn);
  Executor& executor() { return *options_.executor; }

  // ---- On the strand. ----
  Engine& engine() { return *engine_; }
  TimeMs Now() const { return options_.clock->NowMs(); }
  // After each event: the engine's commands go out (once what they depend on is durable), and a
  // scheduling pass is armed when one is due (at most one every sched_min_interval_ms, one at a
  // time).
  void AfterEvent();
  // Runs `fn` (a reply, a delivery) once every change written so far is durable, and after every
  // `fn` handed over before it: at once when nothing waits; with group commit, after the next
  // sync. A failed sync ends the controller (recovery restarts from what is on disk).
  void WhenDurable(std::function<void()> fn);

  uint64_t epoch() const { return epoch_.load(); }

  // Takes a changed config file (`muster reconfigure`, SIGHUP): what it may change at once
  // (MergeReloadedConfig) replaces the engine with one recovered from the store under it, as a
  // restart would recover, while the listeners, the store and the clients' connections stay.
  // The new engine starts a new epoch; every agent is told to register again, and reports what
  // it runs. Refused, the running engine kept, when the new config would take something away
  // from an active job (Engine::CheckReconfiguration), or when recovery under it fails.
  struct Reconfigured {
    uint64_t epoch = 0;
    std::vector<std::string> changes;       // what changed (ConfigReload::changes)
    std::vector<std::string> restart_only;  // changed, but kept until the next start
  };
  Result<Reconfigured> Reconfigure(Config file);
  // muster partition create|update|delete|reset (scontrol's too): the engine plans and checks
  // the change, it is stored, and the engine is replaced as Reconfigure replaces it (the same
  // file, the new records), audited either way.
  Result<Reconfigured> ChangePartition(const Caller& caller, const v1::UpdatePartitionRequest& req);
  // muster node update|reset (scontrol update NodeName= Features=/Weight=/Gres=): the same for
  // nodes' live settings.
  Result<Reconfigured> ChangeNodes(const Caller& caller, const v1::UpdateNodeRequest& req);
  // Counts the engines this runner has had: a session or a pass of an earlier one is stale.
  uint64_t engine_generation() const { return generation_; }
  // With replication: the store standbys read from, and the log of changes (thread-safe).
  store::ReplicatingStore* replicating_store() { return replicating_.get(); }
  store::ReplicationLog* replication_log() { return replication_log_.get(); }
  // Thread-safe: what the controller spent its time on (sdiag).
  ServiceStats& stats() { return stats_; }
  // The config the controller started with: what its transports were set up from (listeners,
  // credentials). What the engine runs now is engine().config().
  const Config& config() const { return options_.config; }

 private:
  explicit ControllerRunner(ControllerRunnerOptions options);
  void ArmTick();
  void StartPass();
  void StartSync();
  void ReleaseDurable();
  // A planned live change (partitions, node settings): `store` it, then replace the engine as a
  // reconfiguration with the same file does; when that fails, `undo` puts the store back.
  Result<Reconfigured> TakeStoredChange(const std::string& summary, const std::string& user,
                                        const std::function<Status()>& store,
                                        const std::function<Status()>& undo);

  ControllerRunnerOptions options_;
  std::unique_ptr<store::StateStore> store_;
  std::unique_ptr<store::ReplicationLog> replication_log_;
  std::unique_ptr<store::ReplicatingStore> replicating_;  // over store_, with replication
  std::unique_ptr<store::GroupCommitStore> group_;  // over store_; the engine writes through it
  std::unique_ptr<Engine> engine_;                  // strand-confined
  std::atomic<uint64_t> epoch_{0};
  // Strand-confined.
  uint64_t generation_ = 0;
  AgentSessions* agents_ = nullptr;
  MailSink* mail_ = nullptr;
  bool sched_armed_ = false;
  bool pass_running_ = false;
  // Shared with work in flight, which may outlive a stop: it checks before touching the engine.
  std::shared_ptr<std::atomic<bool>> stopped_;
  ServiceStats stats_;
  // Group commit, strand-confined: completions waiting for a sync, with the write count each
  // needs durable; the count the last sync covered; whether a sync is under way.
  std::deque<std::pair<uint64_t, std::function<void()>>> waiting_;
  uint64_t synced_ = 0;
  bool sync_running_ = false;
};

}  // namespace muster::controller
