// Attacker's suite: a local user's own process on a cluster without TLS (loopback is no trust
// boundary) tries to register as a node, to be sent other users' launches and the node's step key.
// Each attempt must be refused while the real agent keeps its node and jobs.
#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <fstream>

#include "harness/cluster_test.h"
#include "muster/credentials/node_proof.h"
#include "muster/credentials/step_credential.h"
#include "muster/rpc/controller_server.h"
#include "muster/v1/node.grpc.pb.h"

namespace muster::testing {
namespace {

std::unique_ptr<v1::NodeRegistry::Stub> PlainRegistry(const std::string& address) {
  return v1::NodeRegistry::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

std::string ChallengeFrom(v1::NodeRegistry::Stub& stub) {
  v1::ChallengeResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Status st = stub.Challenge(&ctx, v1::ChallengeRequest(), &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp.challenge();
}

grpc::Status RegisterAs(v1::NodeRegistry::Stub& stub, const std::string& node,
                        const std::string& challenge, const std::string& proof,
                        v1::RegisterResponse* resp) {
  v1::RegisterRequest req;
  req.mutable_inventory()->set_name(node);
  req.mutable_inventory()->set_cpus(16);
  req.set_instance_id("intruder");
  req.set_challenge(challenge);
  req.set_proof(proof);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return stub.Register(&ctx, req, resp);
}

// Says Hello as `node` with `ticket`; how the controller ended the stream.
grpc::Status HelloAs(v1::NodeRegistry::Stub& stub, const std::string& node,
                     const std::string& ticket) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto stream = stub.Session(&ctx);
  v1::AgentMessage hello;
  hello.mutable_hello()->set_node(node);
  hello.mutable_hello()->set_instance_id("intruder");
  hello.mutable_hello()->set_session_ticket(ticket);
  stream->Write(hello);
  // The stream stays open from this side: only the controller's verdict ends it (a half-close
  // would end it too, whatever the verdict).
  v1::ControllerMessage msg;
  int messages = 0;
  while (stream->Read(&msg)) ++messages;
  EXPECT_EQ(messages, 0) << "the controller sent something to an impostor";
  return stream->Finish();
}

TEST(NodeRegistrationAttackTest, WithoutTlsNoOneRegistersWithoutTheNodesKey) {
  InProcessClusterOptions o;
  o.nodes = 2;
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  v1::JobSpec spec = Gang(1, 1);
  spec.add_required_nodes("node1");
  auto job = cluster.Submit("#!/bin/sh\nsleep 60\n", spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_EVENTUALLY(cluster.State(*job) == v1::RUNNING, 10'000);
  auto stub = PlainRegistry(cluster.config().controller.agent_address);

  // What the rogue musterd of the audit did: a registration with no proof at all.
  v1::RegisterResponse resp;
  grpc::Status bare = RegisterAs(*stub, "node1", "", "", &resp);
  EXPECT_EQ(bare.error_code(), grpc::StatusCode::PERMISSION_DENIED) << bare.error_message();
  EXPECT_TRUE(resp.step_key().empty());
  // A real challenge answered under a key of the attacker's own.
  const std::string challenge = ChallengeFrom(*stub);
  const std::string guess = credentials::NewSecret();
  grpc::Status forged =
      RegisterAs(*stub, "node1", challenge,
                 credentials::NodeProof(guess, challenge, "node1", "intruder"), &resp);
  EXPECT_EQ(forged.error_code(), grpc::StatusCode::PERMISSION_DENIED) << forged.error_message();
  EXPECT_TRUE(resp.step_key().empty());
  // Straight to the session, with no ticket or a made-up one.
  EXPECT_EQ(HelloAs(*stub, "node1", "").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(HelloAs(*stub, "node1", credentials::NewSecret()).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // The real agent kept its node and its job, and new jobs still run there.
  EXPECT_EQ(cluster.State(*job), v1::RUNNING);
  auto n = cluster.Node("node1");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->state(), v1::NODE_MIXED) << v1::NodeState_Name(n->state());
  auto next = cluster.Submit("#!/bin/sh\nexit 0\n", Gang(2, 1));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  ASSERT_EVENTUALLY(cluster.State(*next) == v1::COMPLETED, 15'000);
}

TEST(NodeRegistrationAttackTest, AControllerWithoutTlsOrNodeKeysDoesNotStart) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("muster-nokeys-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir + "/state");
  auto config =
      ParseConfig("[controller]\nsocket = \"" + dir + "/ctl.sock\"\nstate_dir = \"" + dir +
                      "/state\"\nagent_address = \"127.0.0.1:0\"\n"
                      "[[nodes]]\nnames = \"node1\"\ncpus = 4\nmemory_mb = 1000\n"
                      "[[partition]]\nname = \"p\"\nnodes = \"node1\"\n",
                  "test");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  rpc::ControllerServerOptions so;
  so.config = *config;
  auto server = rpc::ControllerServer::Create(so);
  Status started = server.ok() ? (*server)->Start() : server.status();
  EXPECT_EQ(started.code(), StatusCode::kFailedPrecondition) << started.ToString();
  EXPECT_NE(started.message().find("[node_auth]"), std::string::npos) << started.message();
  if (server.ok() && started.ok()) (*server)->Shutdown();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace muster::testing
