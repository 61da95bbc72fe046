// Attacker's suite: a user with a shell on a controller host talks to the election's etcd. The
// audit deleted and overwrote the leader key with two HTTP calls, leaving the cluster with no
// controller, or two. etcd must answer only the controllers: no certificate, a certificate of
// the user's own, or a node's (from the cluster's CA, which root on any compute node holds)
// gets no answer.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "etcd/election.grpc.pb.h"
#include "harness/test_etcd.h"
#include "muster/client/certificates.h"

namespace muster::testing {
namespace {

grpc::Status ReadLeaderKey(const std::string& endpoint,
                           std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("etcd");
  auto kv = etcdserverpb::KV::NewStub(grpc::CreateCustomChannel(endpoint, credentials, args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  etcdserverpb::RangeRequest req;
  req.set_key("/muster/local/leader");
  etcdserverpb::RangeResponse resp;
  return kv->Range(&ctx, req, &resp);
}

std::shared_ptr<grpc::ChannelCredentials> Presenting(const std::string& ca, const TlsIdentity* id) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca;
  if (id) {
    o.pem_cert_chain = id->cert_pem;
    o.pem_private_key = id->key_pem;
  }
  return grpc::SslCredentials(o);
}

TEST(EtcdAttackTest, EtcdAnswersOnlyTheControllersCertificate) {
  if (!TestEtcd::Installed()) GTEST_SKIP() << "etcd-server is not installed";
  const std::string dir =
      std::filesystem::temp_directory_path() / ("muster-etcd-attack-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto etcd = TestEtcd::Start(dir + "/etcd");
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  const std::string endpoint = (*etcd)->endpoint();
  auto controllers = LoadTlsIdentity((*etcd)->certs() + "/ca.crt", (*etcd)->certs() + "/client.crt",
                                     (*etcd)->certs() + "/client.key");
  ASSERT_TRUE(controllers.ok()) << controllers.status().ToString();
  const std::string& etcd_ca = controllers->ca_pem;

  // The controllers' certificate works (else the rest proves nothing).
  grpc::Status ok = ReadLeaderKey(endpoint, Presenting(etcd_ca, &*controllers));
  ASSERT_TRUE(ok.ok()) << ok.error_message();

  // Plain HTTP/2, as curl or etcdctl without flags.
  EXPECT_FALSE(ReadLeaderKey(endpoint, grpc::InsecureChannelCredentials()).ok());
  // TLS with no client certificate.
  EXPECT_FALSE(ReadLeaderKey(endpoint, Presenting(etcd_ca, nullptr)).ok());
  // A node's certificate from the cluster's CA, as root on a compute node has.
  client::CertificateOptions cluster;
  cluster.dir = dir + "/cluster-tls";
  cluster.nodes = {"node1"};
  ASSERT_TRUE(client::MakeCertificates(cluster).ok());
  auto node = LoadTlsIdentity(cluster.dir + "/ca.crt", cluster.dir + "/node1.crt",
                              cluster.dir + "/node1.key");
  ASSERT_TRUE(node.ok());
  EXPECT_FALSE(ReadLeaderKey(endpoint, Presenting(etcd_ca, &*node)).ok());
  // A CA of the user's own, with a certificate that says "client" like the controllers'.
  ASSERT_TRUE(client::MakeEtcdCertificates(dir + "/own", false).ok());
  auto own = LoadTlsIdentity(dir + "/own/ca.crt", dir + "/own/client.crt", dir + "/own/client.key");
  ASSERT_TRUE(own.ok());
  EXPECT_FALSE(ReadLeaderKey(endpoint, Presenting(etcd_ca, &*own)).ok());
  etcd->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace muster::testing
