// Mutual TLS between the controller and the agents: a cluster runs on it, and nothing else gets
// in. A registration is accepted only from a certificate of the cluster's CA that names the node;
// an agent talks only to a server whose certificate names the controller.
#include <grpcpp/grpcpp.h>

#include <atomic>

#include "harness/cluster_test.h"
#include "muster/agent/controller_link.h"
#include "muster/client/certificates.h"
#include "muster/common/tls_files.h"
#include "muster/v1/node.grpc.pb.h"

namespace muster::testing {
namespace {

std::shared_ptr<grpc::ChannelCredentials> PresentingIdentity(const TlsIdentity& id) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = id.ca_pem;
  o.pem_cert_chain = id.cert_pem;
  o.pem_private_key = id.key_pem;
  return grpc::SslCredentials(o);
}

std::unique_ptr<v1::NodeRegistry::Stub> Registry(const std::string& address,
                                                 std::shared_ptr<grpc::ChannelCredentials> creds) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("musterctld");
  return v1::NodeRegistry::NewStub(grpc::CreateCustomChannel(address, creds, args));
}

grpc::Status RegisterAs(v1::NodeRegistry::Stub& stub, const std::string& node) {
  v1::RegisterRequest req;
  req.mutable_inventory()->set_name(node);
  req.mutable_inventory()->set_cpus(16);
  req.set_instance_id("intruder");
  v1::RegisterResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return stub.Register(&ctx, req, &resp);
}

// Opens a Session and says Hello as `node`; returns how the controller ended the stream.
grpc::Status HelloAs(v1::NodeRegistry::Stub& stub, const std::string& node) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto stream = stub.Session(&ctx);
  v1::AgentMessage hello;
  hello.mutable_hello()->set_node(node);
  hello.mutable_hello()->set_instance_id("intruder");
  stream->Write(hello);
  stream->WritesDone();
  v1::ControllerMessage msg;
  int messages = 0;
  while (stream->Read(&msg)) ++messages;
  EXPECT_EQ(messages, 0) << "the controller sent something to an impostor";
  return stream->Finish();
}

Result<TlsIdentity> NodeIdentity(const InProcessCluster& c, const std::string& node) {
  return LoadNodeTlsIdentity(c.config().tls, node);
}

// Starts node1 with a job on it: what an impostor would take over.
uint64_t StartVictimJob(InProcessCluster& cluster) {
  v1::JobSpec spec = Gang(1, 1);
  spec.add_required_nodes("node1");
  auto id = cluster.Submit("#!/bin/sh\nsleep 60\n", spec);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : 0;
}

void ExpectVictimUntouched(InProcessCluster& cluster, uint64_t job) {
  EXPECT_EQ(cluster.State(job), v1::RUNNING);
  auto n = cluster.Node("node1");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->state(), v1::NODE_MIXED) << v1::NodeState_Name(n->state());
}

TEST(ClusterTlsTest, AGangJobRunsOverMutualTls) {
  InProcessClusterOptions o;
  o.nodes = 2;
  o.tls = true;
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto id = (*c)->Submit("#!/bin/sh\nexit 0\n", Gang(2, 4));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EVENTUALLY((*c)->State(*id) == v1::COMPLETED, 15'000);
  EXPECT_EQ((*c)->Job(*id)->nodes_size(), 2);
}

TEST(ClusterTlsTest, ACertificateRegistersOnlyTheNodeItNames) {
  InProcessClusterOptions o;
  o.nodes = 2;
  o.tls = true;
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  uint64_t job = StartVictimJob(cluster);
  ASSERT_EVENTUALLY(cluster.State(job) == v1::RUNNING, 10'000);

  auto node2 = NodeIdentity(cluster, "node2");
  ASSERT_TRUE(node2.ok()) << node2.status().ToString();
  auto stub = Registry(cluster.config().controller.agent_address, PresentingIdentity(*node2));
  grpc::Status reg = RegisterAs(*stub, "node1");
  EXPECT_EQ(reg.error_code(), grpc::StatusCode::PERMISSION_DENIED) << reg.error_message();
  EXPECT_NE(reg.error_message().find("names node2"), std::string::npos) << reg.error_message();
  grpc::Status hello = HelloAs(*stub, "node1");
  EXPECT_EQ(hello.error_code(), grpc::StatusCode::PERMISSION_DENIED) << hello.error_message();
  ExpectVictimUntouched(cluster, job);
}

TEST(ClusterTlsTest, ASelfMadeCertificateOrNoneGetsNoConnection) {
  InProcessClusterOptions o;
  o.nodes = 1;
  o.tls = true;
  auto c = InProcessCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  InProcessCluster& cluster = **c;
  uint64_t job = StartVictimJob(cluster);
  ASSERT_EVENTUALLY(cluster.State(job) == v1::RUNNING, 10'000);
  const std::string address = cluster.config().controller.agent_address;

  // A CA of the intruder's own, with a certificate that says node1, every field right.
  client::CertificateOptions rogue;
  rogue.dir = cluster.dir() + "/rogue";
  rogue.nodes = {"node1"};
  ASSERT_TRUE(client::MakeCertificates(rogue).ok());
  auto rogue_id = LoadTlsIdentity(cluster.config().tls.ca_file, rogue.dir + "/node1.crt",
                                  rogue.dir + "/node1.key");
  ASSERT_TRUE(rogue_id.ok()) << rogue_id.status().ToString();
  grpc::Status st = RegisterAs(*Registry(address, PresentingIdentity(*rogue_id)), "node1");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();

  // TLS without a client certificate.
  grpc::SslCredentialsOptions anonymous;
  anonymous.pem_root_certs = rogue_id->ca_pem;
  st = RegisterAs(*Registry(address, grpc::SslCredentials(anonymous)), "node1");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();

  // Plain TCP, as agents spoke before.
  st = RegisterAs(*Registry(address, grpc::InsecureChannelCredentials()), "node1");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();

  // The controller's own certificate is a client's too (a standby follows the leader with it),
  // but it names no node: it cannot register as one, neither as node1 nor under its own name.
  auto controller_id = LoadControllerTlsIdentity(cluster.config().tls);
  ASSERT_TRUE(controller_id.ok());
  st = RegisterAs(*Registry(address, PresentingIdentity(*controller_id)), "node1");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  st = RegisterAs(*Registry(address, PresentingIdentity(*controller_id)),
                  cluster.config().tls.controller_name);
  EXPECT_NE(st.error_code(), grpc::StatusCode::OK) << "the controller registered as a node";

  ExpectVictimUntouched(cluster, job);
}

// Counts registrations: a stand-in controller.
class CountingRegistry final : public v1::NodeRegistry::CallbackService {
 public:
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx, const v1::RegisterRequest*,
                                     v1::RegisterResponse*) override {
    ++registrations;
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stand-in"));
    return r;
  }
  std::atomic<int> registrations{0};
};

// How many times an agent's real link registers, within a second and a half, with a server that
// presents this certificate.
int RegistrationsWithServerPresenting(const TlsIdentity& agent, const std::string& cert_file,
                                      const std::string& key_file) {
  grpc::SslServerCredentialsOptions so(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  so.pem_root_certs = agent.ca_pem;
  so.pem_key_cert_pairs.push_back({Read(key_file), Read(cert_file)});
  CountingRegistry service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(so), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  EXPECT_NE(port, 0);
  agent::ControllerLink::Callbacks cb;
  cb.make_register = [] {
    v1::RegisterRequest r;
    r.mutable_inventory()->set_name("node1");
    return r;
  };
  cb.on_connected = [](const v1::RegisterResponse&) {};
  cb.on_message = [](v1::ControllerMessage) {};
  cb.on_disconnected = [] {};
  auto link = agent::NewGrpcControllerLink({"127.0.0.1:" + std::to_string(port)}, "node1", "i1",
                                           agent::ControllerLinkTls{agent, "musterctld"}, "", cb);
  link->Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  link->Stop();
  server->Shutdown();
  return service.registrations.load();
}

TEST(ClusterTlsTest, AnAgentTalksOnlyToTheControllersCertificate) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("muster-tls-" + std::to_string(::getpid()));
  client::CertificateOptions certs;
  certs.dir = dir + "/tls";
  certs.nodes = {"node1", "node2"};
  ASSERT_TRUE(client::MakeCertificates(certs).ok());
  auto node1 =
      LoadTlsIdentity(certs.dir + "/ca.crt", certs.dir + "/node1.crt", certs.dir + "/node1.key");
  ASSERT_TRUE(node1.ok()) << node1.status().ToString();
  // The controller's certificate: the agent registers (the stand-in refuses it, so it retries).
  EXPECT_GT(RegistrationsWithServerPresenting(*node1, certs.dir + "/controller.crt",
                                              certs.dir + "/controller.key"),
            0);
  // Another node's, from the same CA: a compromised node cannot pose as the controller.
  EXPECT_EQ(
      RegistrationsWithServerPresenting(*node1, certs.dir + "/node2.crt", certs.dir + "/node2.key"),
      0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace muster::testing
