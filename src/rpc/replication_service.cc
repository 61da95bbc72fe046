#include "replication_service.h"

#include <spdlog/spdlog.h>

#include <thread>

namespace muster::rpc {
namespace {

// A burst of changes or a part of a snapshot, well under the channel's message limit.
constexpr size_t kMessageBytes = 4u << 20;
constexpr size_t kMaxStandbyName = 128;

}  // namespace

grpc::Status ReplicationService::CheckPeer(grpc::ServerContext* ctx) const {
  if (controller_name_.empty()) {
    const std::string peer = ctx->peer();
    if (peer.rfind("ipv4:127.", 0) == 0 || peer.rfind("ipv6:[::1]", 0) == 0 ||
        peer.rfind("unix:", 0) == 0) {
      return grpc::Status::OK;
    }
    spdlog::warn("refused a standby from {}: without TLS only one on loopback may follow", peer);
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "without TLS only a standby on loopback may follow");
  }
  auto auth = ctx->auth_context();
  if (auth && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& name : auth->GetPeerIdentity()) {
      if (std::string(name.data(), name.size()) == controller_name_) return grpc::Status::OK;
    }
  }
  spdlog::warn("refused a standby from {}: its certificate does not name {}", ctx->peer(),
               controller_name_);
  return grpc::Status(
      grpc::StatusCode::PERMISSION_DENIED,
      "only a controller (a certificate naming " + controller_name_ + ") may follow");
}

bool ReplicationService::SendSnapshot(
    grpc::ServerReaderWriter<v1::ReplicationMessage, v1::FollowerMessage>* stream, uint64_t* seq) {
  v1::ReplicationMessage m;
  m.set_leader_epoch(log_->leader_epoch());
  m.set_snapshot_begin(true);
  size_t bytes = 0;
  bool sent = true;
  Status st = store_->ReadSnapshotAt(
      seq, [&](store::Family f, const std::string& key, const std::string& value) {
        v1::ReplicatedOp* op = m.add_snapshot_ops();
        op->set_family(static_cast<uint32_t>(f));
        op->set_key(key);
        op->set_value(value);
        bytes += key.size() + value.size();
        if (bytes < kMessageBytes) return true;
        sent = stream->Write(m);
        m.Clear();
        m.set_leader_epoch(log_->leader_epoch());
        bytes = 0;
        return sent && !stopping_;
      });
  if (!st.ok()) {
    spdlog::error("cannot read a snapshot for a standby: {}", st.ToString());
    return false;
  }
  if (!sent || stopping_) return false;
  m.set_snapshot_end(true);
  m.set_snapshot_seq(*seq);
  return stream->Write(m);
}

grpc::Status ReplicationService::Follow(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::ReplicationMessage, v1::FollowerMessage>* stream) {
  if (grpc::Status peer = CheckPeer(ctx); !peer.ok()) return peer;
  v1::FollowerMessage hello;
  if (!stream->Read(&hello)) return grpc::Status(grpc::StatusCode::CANCELLED, "no hello");
  const std::string name = hello.name();
  if (name.empty() || name.size() > kMaxStandbyName) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a standby needs a name (1-128 bytes)");
  }
  // Two streams under one name would share one place in the in-sync set: the second waits until
  // the first has ended (a standby reconnecting) or is refused for good (two named alike).
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!following_.insert(name).second) {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                          "a standby named " + name + " already follows");
    }
  }
  // Acknowledgements arrive on their own thread; the stream ends when the standby goes.
  std::atomic<bool> gone{false};
  std::thread acks([&] {
    v1::FollowerMessage m;
    while (stream->Read(&m)) log_->Acked(name, m.acked_seq());
    gone = true;
  });
  uint64_t sent = 0;
  bool need_snapshot =
      !(hello.has_position() && hello.position().leader_epoch() == log_->leader_epoch() &&
        hello.position().seq() <= log_->last_seq());
  if (!need_snapshot) sent = hello.position().seq();
  spdlog::info("standby {} follows from {} ({})", name, ctx->peer(),
               need_snapshot ? "a snapshot" : "change " + std::to_string(sent));
  std::vector<store::ReplicationLog::Batch> batches;
  while (!gone && !stopping_ && !ctx->IsCancelled()) {
    if (need_snapshot) {
      if (!SendSnapshot(stream, &sent)) break;
      need_snapshot = false;
      spdlog::info("standby {} has a snapshot as of change {}", name, sent);
    }
    batches.clear();
    if (!log_->Read(sent, kMessageBytes, std::chrono::milliseconds(200), &batches)) {
      need_snapshot = true;  // fell behind what is kept
      continue;
    }
    if (batches.empty()) continue;
    v1::ReplicationMessage m;
    m.set_leader_epoch(log_->leader_epoch());
    for (const auto& b : batches) m.add_batches()->ParseFromString(*b);  // made by the log
    if (!stream->Write(m)) break;
    sent = m.batches(m.batches_size() - 1).seq();
  }
  ctx->TryCancel();
  acks.join();
  log_->Detached(name);
  {
    std::lock_guard<std::mutex> l(mu_);
    following_.erase(name);
  }
  spdlog::info("standby {} no longer follows", name);
  return grpc::Status::OK;
}

}  // namespace muster::rpc
