#include "muster/controller/controller_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "muster/common/config_reload.h"
#include "muster/store/group_commit_store.h"
#include "muster/store/replicating_store.h"
#include "node_overlay.h"
#include "partition_overlay.h"

namespace muster::controller {

ControllerRunner::ControllerRunner(ControllerRunnerOptions options)
    : options_(std::move(options)), stopped_(std::make_shared<std::atomic<bool>>(false)) {}

ControllerRunner::~ControllerRunner() {
  Stop();
  engine_.reset();  // before the store it writes to
  group_.reset();
  replicating_.reset();
  replication_log_.reset();
  store_.reset();
}

Result<std::unique_ptr<ControllerRunner>> ControllerRunner::Create(
    ControllerRunnerOptions options) {
  if (!options.executor) return InvalidArgument("ControllerRunner needs an executor");
  auto runner = std::unique_ptr<ControllerRunner>(new ControllerRunner(std::move(options)));
  ControllerRunnerOptions& o = runner->options_;
  // The store comes from outside, so what links the runner (muster-sim) need not link RocksDB.
  if (!o.store) return InvalidArgument("ControllerRunner needs a state store");
  runner->store_ = std::move(o.store);
  store::StateStore* below_group = runner->store_.get();
  if (o.replication.enabled) {
    runner->replicating_ =
        std::make_unique<store::ReplicatingStore>(below_group, o.replication.may_write);
    below_group = runner->replicating_.get();
  }
  runner->group_ = std::make_unique<store::GroupCommitStore>(
      below_group, [stats = &runner->stats_](auto took) { stats->Record("store/write", took); });
  EngineOptions eo;
  eo.config = o.config;
  eo.make_credential = o.make_credential;
  eo.min_epoch = o.min_epoch;
  // Recovery's writes (the new epoch) are synced one by one, before anything is served.
  MUSTER_ASSIGN_OR_RETURN(runner->engine_,
                          Engine::Create(std::move(eo), runner->group_.get(), runner->Now()));
  runner->group_->set_grouping(o.config.controller.group_commit);
  runner->epoch_ = runner->engine_->epoch();
  runner->generation_ = 1;
  if (runner->replicating_) {
    // Numbered within this epoch (the leader's first: a reconfiguration's new epochs keep it): a
    // standby that followed another epoch starts from a snapshot.
    runner->replication_log_ = std::make_unique<store::ReplicationLog>(
        store::ReplicationLog::Options{.leader_epoch = runner->epoch_.load(),
                                       .ack_timeout = o.replication.ack_timeout},
        o.replication.membership);
    runner->replicating_->set_log(runner->replication_log_.get());
  }
  return runner;
}

void ControllerRunner::Post(std::function<void()> fn) {
  options_.executor->Post([stopped = stopped_, fn = std::move(fn)] {
    if (!stopped->load()) fn();
  });
}

void ControllerRunner::Start(AgentSessions* agents, MailSink* mail) {
  Post([this, agents, mail] {
    agents_ = agents;
    mail_ = mail;
    ArmTick();
    AfterEvent();
  });
}

void ControllerRunner::Stop() { stopped_->store(true); }

void ControllerRunner::AfterEvent() {
  std::vector<Outgoing> out = engine_->TakeOutgoing();
  if (!out.empty()) {
    // An agent acts on a command at once (a launch runs a script): what it follows from must
    // survive a crash first.
    WhenDurable([this, out = std::move(out)]() mutable {
      if (agents_) {
        agents_->Deliver(std::move(out));
      } else {
        spdlog::debug("{} agent command(s) dropped: no agent service", out.size());
      }
    });
  }
  std::vector<MailNotice> mail = engine_->TakeMail();
  if (!mail.empty()) {
    // A mail says what happened: only once that is durable (a crash before would have it lie).
    WhenDurable([this, mail = std::move(mail)]() mutable {
      if (mail_) {
        mail_->Send(std::move(mail));
      } else {
        spdlog::debug("{} mail(s) dropped: no mail sender", mail.size());
      }
    });
  }
  if (engine_->schedule_requested() && !sched_armed_ && !pass_running_ && !stopped_->load()) {
    sched_armed_ = true;
    options_.executor->PostAfter(engine_->config().scheduling.sched_min_interval_ms,
                                 [this, stopped = stopped_] {
                                   if (stopped->load()) return;
                                   sched_armed_ = false;
                                   StartPass();
                                 });
  }
}

void ControllerRunner::StartPass() {
  const auto began = ServiceStats::Clock::now();
  auto in = engine_->PreparePass(Now());
  if (!in) {
    AfterEvent();
    return;
  }
  pass_running_ = true;
  const uint64_t generation = generation_;
  auto input = std::make_shared<Engine::PassInput>(std::move(*in));
  // The core's part runs off the strand, so requests and agents are served while it computes.
  const auto prepared = ServiceStats::Clock::now() - began;
  options_.executor->Offload(
      Executor::Lane::kScheduling, [this, input, began, prepared, generation, stopped = stopped_] {
        if (stopped->load()) return;
        auto pass = std::make_shared<core::SchedulePass>(Engine::ComputePass(*input));
        options_.executor->Post([this, pass, began, prepared, generation, stopped] {
          if (stopped->load()) return;
          // Computed for an engine that was replaced meanwhile (its successor passes anew).
          if (generation != generation_) return;
          pass_running_ = false;
          const auto applying = ServiceStats::Clock::now();
          engine_->ApplyPass(*pass, Now());
          const auto done = ServiceStats::Clock::now();
          // The whole pass, and the part of it that held the strand (requests and agents waited).
          stats_.Record("scheduler/pass", done - began);
          stats_.Record("scheduler/pass_on_strand", prepared + (done - applying));
          AfterEvent();
        });
      });
}

void ControllerRunner::WhenDurable(std::function<void()> fn) {
  const uint64_t need = group_->written();
  if (waiting_.empty() && need <= synced_) {
    fn();
    return;
  }
  waiting_.emplace_back(need, std::move(fn));
  StartSync();
}

void ControllerRunner::ReleaseDurable() {
  // In order: a completion never overtakes one handed over before it.
  while (!waiting_.empty() && waiting_.front().first <= synced_) {
    auto fn = std::move(waiting_.front().second);
    waiting_.pop_front();
    fn();
  }
}

void ControllerRunner::StartSync() {
  ReleaseDurable();
  if (sync_running_ || waiting_.empty()) return;
  sync_running_ = true;
  // Everything written before the sync starts is covered by it.
  const uint64_t covers = group_->written();
  const auto began = ServiceStats::Clock::now();
  options_.executor->Offload(Executor::Lane::kSync, [this, covers, began, stopped = stopped_] {
    if (stopped->load()) return;
    if (Status s = group_->Sync(); !s.ok()) {
      if (stopped->load()) return;  // shutting down: a standby wait was cut short
      spdlog::critical("{}; exiting so that recovery restarts from what is on disk", s.ToString());
      spdlog::default_logger()->flush();
      std::abort();
    }
    Post([this, covers, began] {
      stats_.Record("store/sync", ServiceStats::Clock::now() - began);
      sync_running_ = false;
      synced_ = std::max(synced_, covers);
      StartSync();
    });
  });
}

Result<ControllerRunner::Reconfigured> ControllerRunner::Reconfigure(Config file) {
  // File against file: the partitions changed live are laid over the new one as over the old.
  ConfigReload reload = MergeReloadedConfig(engine_->file_config(), std::move(file));
  Overlaid overlaid = OverlayPartitions(reload.config, engine_->partition_records());
  OverlayNodeSettings(overlaid.config, engine_->node_settings(), &overlaid.problems);
  if (!overlaid.problems.empty()) {
    // A file that undoes a live definition (takes a node of its away) would silently change
    // who may use the partition: it waits until an admin settles the live one.
    std::string why;
    for (const std::string& p : overlaid.problems) why += (why.empty() ? "" : "; ") + p;
    return FailedPrecondition("the running configuration is kept: " + why);
  }
  MUSTER_RETURN_IF_ERROR(engine_->CheckReconfiguration(overlaid.config));
  // What the running engine decided goes out first, in order, as ever.
  AfterEvent();
  const TimeMs now = Now();
  engine_->PrepareHandOver(now);
  EngineOptions eo;
  eo.config = reload.config;
  eo.make_credential = options_.make_credential;
  eo.min_epoch = options_.min_epoch;
  auto next = Engine::Create(std::move(eo), group_.get(), now);
  if (!next.ok()) {
    return Status(next.status().code(),
                  "the running configuration is kept: recovery under the new one failed: " +
                      next.status().message());
  }
  std::unique_ptr<Engine> previous = std::move(engine_);
  engine_ = std::move(*next);
  engine_->ContinueFrom(*previous);
  ++generation_;          // the previous engine's sessions and pass in flight are stale
  pass_running_ = false;  // the one in flight is dropped when it returns
  epoch_ = engine_->epoch();
  // Every agent registers again, under the new epoch, and reports what it runs (as after a
  // restart); after the commands the previous engine sent, which go to its sessions.
  std::vector<Outgoing> register_again;
  for (const NodeConfig& n : previous->config().nodes) {
    register_again.push_back(
        {n.name, {}, /*close_session=*/true, "the controller was reconfigured; register again"});
  }
  WhenDurable([this, out = std::move(register_again)]() mutable {
    if (agents_) agents_->Deliver(std::move(out));
  });
  std::string changes;
  for (const std::string& c : reload.changes) changes += (changes.empty() ? "" : "; ") + c;
  spdlog::info("reconfigured: epoch={} nodes={} partitions={} changes: {}", epoch_.load(),
               engine_->config().nodes.size(), engine_->config().partitions.size(),
               changes.empty() ? "none" : changes);
  for (const std::string& key : reload.restart_only) {
    spdlog::warn("reconfigure: {} changed; it takes effect at the next start", key);
  }
  AfterEvent();
  return Reconfigured{.epoch = epoch_.load(),
                      .changes = std::move(reload.changes),
                      .restart_only = std::move(reload.restart_only)};
}

Result<ControllerRunner::Reconfigured> ControllerRunner::TakeStoredChange(
    const std::string& summary, const std::string& user, const std::function<Status()>& store,
    const std::function<Status()>& undo) {
  MUSTER_RETURN_IF_ERROR(store());
  Result<Reconfigured> swapped = Reconfigure(engine_->file_config());
  if (!swapped.ok()) {
    if (Status back = undo(); !back.ok()) {
      spdlog::error("{}: not taken ({}), and the stored change could not be undone: {}", summary,
                    swapped.status().ToString(), back.ToString());
    }
    return swapped.status();
  }
  spdlog::info("{} by user={}", summary, user);
  return swapped;
}

Result<ControllerRunner::Reconfigured> ControllerRunner::ChangePartition(
    const Caller& caller, const v1::UpdatePartitionRequest& req) {
  const TimeMs now = Now();
  std::string summary;
  Result<Reconfigured> outcome = [&]() -> Result<Reconfigured> {
    MUSTER_ASSIGN_OR_RETURN(Engine::PartitionPlan plan,
                            engine_->PlanPartitionChange(caller, req, now));
    summary = plan.summary;
    // What the store holds for it now, to put back if the new engine cannot be made.
    Engine::PartitionPlan undo{.name = plan.name, .records = engine_->partition_records()};
    for (const v1::PartitionRecord& r : undo.records) {
      if (r.name() == plan.name) undo.record = r;
    }
    return TakeStoredChange(
        summary, caller.user, [&] { return engine_->CommitPartitionChange(plan); },
        [&] { return engine_->CommitPartitionChange(undo); });
  }();
  // In the engine that now runs: the new one when it took over.
  engine_->AuditPartitionChange(caller, req, summary, outcome.status(), now);
  return outcome;
}

Result<ControllerRunner::Reconfigured> ControllerRunner::ChangeNodes(
    const Caller& caller, const v1::UpdateNodeRequest& req) {
  const TimeMs now = Now();
  std::string summary;
  Result<Reconfigured> outcome = [&]() -> Result<Reconfigured> {
    MUSTER_ASSIGN_OR_RETURN(Engine::NodeSettingsPlan plan,
                            engine_->PlanNodeSettings(caller, req, now));
    summary = plan.summary;
    // The nodes' settings as stored now, to put back if the new engine cannot be made.
    Engine::NodeSettingsPlan undo{.nodes = plan.nodes};
    const std::map<std::string, v1::NodeSettings> before = engine_->node_settings();
    for (const std::string& n : plan.nodes) {
      if (auto it = before.find(n); it != before.end()) undo.settings[n] = it->second;
    }
    return TakeStoredChange(
        summary, caller.user, [&] { return engine_->CommitNodeSettings(plan); },
        [&] { return engine_->CommitNodeSettings(undo); });
  }();
  engine_->AuditNodeSettings(caller, req, summary, outcome.status(), now);
  return outcome;
}

void ControllerRunner::ArmTick() {
  const auto& s = engine_->config().scheduling;
  const uint32_t ms = options_.tick_ms > 0
                          ? options_.tick_ms
                          : std::clamp<uint32_t>(s.heartbeat_interval_ms / 4, 20, 1000);
  options_.executor->PostAfter(ms, [this, stopped = stopped_] {
    if (stopped->load()) return;
    engine_->Tick(Now());
    AfterEvent();
    ArmTick();
  });
}

}  // namespace muster::controller
