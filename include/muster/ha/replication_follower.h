// A standby controller's copy of the leader's state: follows the leader's Replication stream on a
// thread of its own and applies it to the standby's store (store::ReplicaApplier), acknowledging
// each burst once it is on disk. When the stream breaks (the leader died, stepped down or dropped
// this standby) it connects again, to whoever leads by then.
// Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "muster/grpc_client/client_thread.h"
#include "muster/store/state_store.h"

namespace muster::ha {

struct ReplicationFollowerOptions {
  std::string name;  // this standby's name, as the leader's in-sync set knows it
  // The leader's address (host:port of its agents' gRPC port); "" while none is known.
  std::function<std::string()> leader_address;
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // default: insecure (loopback)
  std::string controller_name;  // the name the leader's certificate must carry (TLS)
  store::StateStore* store = nullptr;
};

class ReplicationFollower {
 public:
  explicit ReplicationFollower(ReplicationFollowerOptions options);
  ~ReplicationFollower();

  void Start();
  // Ends the stream and the thread; the store is left as far as it got.
  void Stop();
  // The last change applied and acknowledged, and whose (0: none yet).
  uint64_t applied_seq() const { return applied_seq_; }
  uint64_t leader_epoch() const { return leader_epoch_; }

 private:
  void Run();
  void FollowOnce(const std::string& address);

  ReplicationFollowerOptions options_;
  grpc_client::ClientThread client_;  // the thread; cancels the stream in progress on Stop
  std::atomic<uint64_t> applied_seq_{0};
  std::atomic<uint64_t> leader_epoch_{0};
};

}  // namespace muster::ha
