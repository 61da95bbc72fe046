// The leader's Replication service: streams its store's changes to standbys (a snapshot first
// when a standby cannot resume from its position) and feeds their acknowledgements to the
// ReplicationLog. One gRPC thread per standby, and one more that reads its acknowledgements.
// Only a controller may follow: with mutual TLS, a peer whose certificate names the controller;
// without TLS, a peer on loopback.
// Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "muster/store/replicating_store.h"
#include "muster/store/replication_log.h"
#include "muster/v1/replication.grpc.pb.h"

namespace muster::rpc {

class ReplicationService final : public v1::Replication::Service {
 public:
  // `controller_name`: what a standby's certificate must name (empty: no TLS, loopback only).
  ReplicationService(store::ReplicatingStore* store, store::ReplicationLog* log,
                     std::string controller_name)
      : store_(store), log_(log), controller_name_(std::move(controller_name)) {}

  grpc::Status Follow(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::ReplicationMessage, v1::FollowerMessage>* stream) override;
  // Ends the streams (the leader is stepping down or stopping).
  void Stop() { stopping_ = true; }

 private:
  grpc::Status CheckPeer(grpc::ServerContext* ctx) const;
  bool SendSnapshot(grpc::ServerReaderWriter<v1::ReplicationMessage, v1::FollowerMessage>* stream,
                    uint64_t* seq);

  store::ReplicatingStore* store_;
  store::ReplicationLog* log_;
  const std::string controller_name_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::set<std::string> following_;  // mu_: names with a stream now (one stream per name)
};

}  // namespace muster::rpc
