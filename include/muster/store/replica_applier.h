// A standby's side of replication: applies the leader's stream (v1::ReplicationMessage) to the
// standby's own store, in order, and says what it may acknowledge. A snapshot replaces the whole
// copy (the store is wiped first, and holds no position until the snapshot is whole); each burst
// of changes is written with the position it reaches and synced before it is acknowledged.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>

#include "muster/common/status.h"
#include "muster/store/state_store.h"
#include "muster/v1/replication.pb.h"

namespace muster::store {

class ReplicaApplier {
 public:
  explicit ReplicaApplier(StateStore* store) : store_(store) {}

  // Reads the store's position (none: a snapshot is needed).
  Status Open();
  // What to ask the leader for.
  const v1::ReplicaPosition& position() const { return position_; }
  bool has_position() const { return has_position_; }

  // Applies one message. Returns the seq to acknowledge (once applied and synced), or nullopt when
  // the message needs none (a part of a snapshot). DATA_LOSS for a message out of order.
  Result<std::optional<uint64_t>> Apply(const v1::ReplicationMessage& m);

 private:
  StateStore* store_;
  v1::ReplicaPosition position_;
  bool has_position_ = false;
  bool in_snapshot_ = false;
};

}  // namespace muster::store
