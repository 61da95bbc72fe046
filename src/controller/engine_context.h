// What the engine's managers share: the configuration, the store, the controller's meta record
// (epoch, next job id), the configured nodes by name, the commands for agents that wait to be
// sent, and whether a scheduling pass is due.
//
// Strand-confined: owned by the Engine, used by its managers on the controller strand.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/store/state_store.h"
#include "muster/v1/node.pb.h"
#include "muster/v1/records.pb.h"
#include "partition_limits.h"

namespace muster::controller {

class EngineContext {
 public:
  EngineContext(EngineOptions options, store::StateStore* store);

  const Config& config() const { return options_.config; }
  const SchedulingConfig& scheduling() const { return options_.config.scheduling; }
  store::StateStore& store() const { return *store_; }
  std::string MakeCredential() const { return options_.make_credential(); }

  // The controller's epoch and next job id (persisted by whoever changes them).
  v1::MetaRecord& meta() { return meta_; }
  const v1::MetaRecord& meta() const { return meta_; }
  uint64_t epoch() const { return meta_.epoch(); }
  // The key `node` checks its step grants with (credentials/step_credential.h): derived from the
  // secret in the meta record, so it survives restarts and every node's differs.
  std::string StepKeyOf(std::string_view node) const;

  // The largest node of each partition, per GPU type (submissions are sized against it).
  const PartitionLimitMap& partition_limits() const { return partition_limits_; }

  // A configured node's index (configuration order, the same in every manager); nullopt for a
  // name the configuration does not define.
  std::optional<size_t> NodeIndex(const std::string& name) const;
  // The node's configuration by name, through the index (Config::FindNode walks every node).
  const NodeConfig* NodeConfigOf(const std::string& name) const;

  // Commands for agents, stamped with the epoch; the runner delivers them after each event.
  void Send(const std::string& node, v1::ControllerMessage msg);
  // Drops the node's session: its agent registers again and reports what it still runs.
  void CloseSession(const std::string& node);
  std::vector<Outgoing> TakeOutgoing();
  // Mail for a job's --mail-type (job_mail.h decides it); the runner sends it once durable. At
  // most kMaxMailWaiting wait between two takes: beyond that one is dropped, with a warning.
  static constexpr size_t kMaxMailWaiting = 10'000;
  void Mail(MailNotice notice);
  std::vector<MailNotice> TakeMail();

  // Something changed that a scheduling pass should look at.
  void RequestPass() { schedule_requested_ = true; }
  bool schedule_requested() const { return schedule_requested_; }
  void PassStarted() { schedule_requested_ = false; }

  // Whether the store's disk has room for new jobs (store::SpaceGuard); the reason if not.
  Status RoomForNewWork() const { return store_->RoomForNewWork(); }
  // For changes a request asked for: the error goes back to the caller, nothing changed.
  Status Commit(const store::Mutation& m,
                store::Durability durability = store::Durability::kSync) const;
  // For changes the controller decides itself (a job ended, a node was lost): memory must never
  // run ahead of the store, so a failed write stops the controller; the restart recovers the last
  // durable state and the agents report again.
  void CommitOrDie(const store::Mutation& m,
                   store::Durability durability = store::Durability::kSync) const;

 private:
  EngineOptions options_;
  store::StateStore* store_;
  v1::MetaRecord meta_;
  std::map<std::string, size_t> node_index_;
  PartitionLimitMap partition_limits_;
  std::vector<Outgoing> outgoing_;
  std::vector<MailNotice> mail_;
  bool schedule_requested_ = true;
};

}  // namespace muster::controller
