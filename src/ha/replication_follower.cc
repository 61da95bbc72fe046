#include "muster/ha/replication_follower.h"

#include <spdlog/spdlog.h>

#include "muster/common/job_limits.h"
#include "muster/store/replica_applier.h"
#include "muster/v1/replication.grpc.pb.h"

namespace muster::ha {

ReplicationFollower::ReplicationFollower(ReplicationFollowerOptions options)
    : options_(std::move(options)) {
  if (!options_.credentials) options_.credentials = grpc::InsecureChannelCredentials();
}

ReplicationFollower::~ReplicationFollower() { Stop(); }

void ReplicationFollower::Start() {
  client_.Start([this] { Run(); });
}

void ReplicationFollower::Stop() { client_.Stop(); }

void ReplicationFollower::Run() {
  while (!client_.stopping()) {
    const std::string address = options_.leader_address();
    if (!address.empty()) FollowOnce(address);
    client_.WaitFor(std::chrono::milliseconds(200));  // a fixed pause between attempts
  }
}

void ReplicationFollower::FollowOnce(const std::string& address) {
  store::ReplicaApplier applier(options_.store);
  if (Status st = applier.Open(); !st.ok()) {
    spdlog::error("standby {}: cannot read its copy's position: {}", options_.name, st.ToString());
    return;
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxAgentMessageBytes));
  if (!options_.controller_name.empty()) {
    args.SetSslTargetNameOverride(options_.controller_name);
  }
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  auto channel = grpc::CreateCustomChannel(address, options_.credentials, args);
  auto stub = v1::Replication::NewStub(channel);
  grpc::ClientContext ctx;
  if (!client_.SetCurrent(&ctx)) return;
  auto stream = stub->Follow(&ctx);
  v1::FollowerMessage hello;
  hello.set_name(options_.name);
  if (applier.has_position()) *hello.mutable_position() = applier.position();
  if (stream->Write(hello)) {
    v1::ReplicationMessage m;
    while (stream->Read(&m)) {
      auto ack = applier.Apply(m);
      if (!ack.ok()) {
        spdlog::error("standby {}: {}; following again from what it has", options_.name,
                      ack.status().ToString());
        break;
      }
      if (!*ack) continue;
      applied_seq_ = **ack;
      leader_epoch_ = m.leader_epoch();
      v1::FollowerMessage a;
      a.set_acked_seq(**ack);
      if (!stream->Write(a)) break;
    }
  }
  ctx.TryCancel();
  grpc::Status st = stream->Finish();
  client_.SetCurrent(nullptr);
  if (!client_.stopping()) {
    spdlog::info("standby {}: the stream from {} ended: {}", options_.name, address,
                 st.error_message().empty() ? "closed" : st.error_message());
  }
}

}  // namespace muster::ha
