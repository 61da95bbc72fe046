#include "muster/store/replica_applier.h"

namespace muster::store {
namespace {

Status AddOp(Mutation& m, const v1::ReplicatedOp& op) {
  if (op.family() >= static_cast<uint32_t>(kNumFamilies) ||
      op.family() == static_cast<uint32_t>(Family::kReplica)) {
    return DataLoss("replicated change names no known record family (" +
                    std::to_string(op.family()) + ")");
  }
  const Family f = static_cast<Family>(op.family());
  if (op.erase()) {
    m.EraseRaw(f, op.key());
  } else {
    m.PutRaw(f, op.key(), op.value());
  }
  return Status::Ok();
}

}  // namespace

Status ReplicaApplier::Open() {
  auto p = store_->ReadReplicaPosition();
  if (p.ok()) {
    position_ = *p;
    has_position_ = true;
    return Status::Ok();
  }
  if (p.status().code() == StatusCode::kNotFound) {
    has_position_ = false;
    return Status::Ok();
  }
  return p.status();
}

Result<std::optional<uint64_t>> ReplicaApplier::Apply(const v1::ReplicationMessage& m) {
  if (m.snapshot_begin()) {
    MUSTER_RETURN_IF_ERROR(store_->Wipe());
    has_position_ = false;
    in_snapshot_ = true;
  }
  if (m.snapshot_ops_size() > 0) {
    if (!in_snapshot_) return DataLoss("a snapshot's records outside a snapshot");
    Mutation chunk;
    for (const auto& op : m.snapshot_ops()) MUSTER_RETURN_IF_ERROR(AddOp(chunk, op));
    MUSTER_RETURN_IF_ERROR(store_->Commit(chunk, Durability::kBuffered));
  }
  if (m.snapshot_end()) {
    if (!in_snapshot_) return DataLoss("the end of a snapshot that did not begin");
    in_snapshot_ = false;
    position_.set_leader_epoch(m.leader_epoch());
    position_.set_seq(m.snapshot_seq());
    Mutation done;
    done.PutReplicaPosition(position_);
    MUSTER_RETURN_IF_ERROR(store_->Commit(done, Durability::kSync));
    has_position_ = true;
  }
  if (m.batches_size() > 0) {
    if (in_snapshot_ || !has_position_ || m.leader_epoch() != position_.leader_epoch()) {
      return DataLoss("changes from a leader whose stream this copy does not follow");
    }
    for (int i = 0; i < m.batches_size(); ++i) {
      const v1::ReplicatedBatch& b = m.batches(i);
      if (b.seq() != position_.seq() + 1) {
        return DataLoss("change " + std::to_string(b.seq()) + " where " +
                        std::to_string(position_.seq() + 1) + " was due");
      }
      Mutation change;
      for (const auto& op : b.ops()) MUSTER_RETURN_IF_ERROR(AddOp(change, op));
      position_.set_seq(b.seq());
      change.PutReplicaPosition(position_);
      // One sync for the burst: the last change's write makes all of them durable.
      const bool last = i + 1 == m.batches_size();
      MUSTER_RETURN_IF_ERROR(
          store_->Commit(change, last ? Durability::kSync : Durability::kBuffered));
    }
  }
  if (m.snapshot_end() || m.batches_size() > 0) return std::optional<uint64_t>(position_.seq());
  return std::optional<uint64_t>();
}

}  // namespace muster::store
