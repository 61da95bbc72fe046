// `muster certs`: the certificates of the daemons' mutual TLS, made with the openssl command
// (Debian's `openssl` package): a cluster CA, the controller's certificate (naming the controller
// and good only for serving) and one per node (naming the node and good only as a client). What
// exists is kept unless a renewal is asked for, so the command can be run again for new nodes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::client {

struct CertificateOptions {
  std::string dir;  // holds ca.{crt,key}, controller.{crt,key} and <node>.{crt,key}
  std::string cluster_name = "muster";
  std::string controller_name = "musterctld";  // [tls] controller_name
  std::vector<std::string> nodes;
  bool controller = true;  // also the controller's certificate
  uint32_t days = 825;     // how long a controller or node certificate is valid
  uint32_t ca_days = 3650;
  bool renew = false;  // issue the controller's and the nodes' again (new keys), same CA
  // The controller's certificate's files (<controller_file>.{crt,key}) and what else it names
  // beside controller_name (subjectAltName entries: "IP:127.0.0.1", "DNS:localhost").
  std::string controller_file = "controller";
  std::vector<std::string> controller_sans;
  std::string openssl = "openssl";
};

struct CertificateReport {
  std::vector<std::string> written;  // files created or replaced
  std::vector<std::string> kept;     // certificates that existed and were left alone
};

// Makes what is missing (or, with renew, replaces the controller's and the nodes'). The
// directory must be this user's alone; keys are written 0600, certificates 0644, each file
// replaced whole (never half-written). FAILED_PRECONDITION when openssl fails or is missing.
Result<CertificateReport> MakeCertificates(const CertificateOptions& options);

// `muster certs --etcd`: etcd's own CA (ca.{crt,key}) in `dir`, its server's certificate
// (server.{crt,key}, naming "etcd", 127.0.0.1 and localhost; for its peers too) and the one
// certificate the controllers present to it (client.{crt,key}). etcd trusts that CA alone
// (--client-cert-auth), so no user, and no node (whose certificates come from the cluster's CA),
// can read or write the election's keys.
Result<CertificateReport> MakeEtcdCertificates(const std::string& dir, bool renew);

// etcd's command-line flags for those files in `dir`: TLS on its client and peer URLs (https://),
// and only clients and peers with a certificate from its CA.
std::vector<std::string> EtcdTlsFlags(const std::string& dir);

// `muster certs --node-keys`: without TLS, each node's [node_auth] key (dir/<node>.key, 64 random
// hex digits, 0600) that its agent proves itself with; the controllers need all of them, each
// node only its own. Missing ones are made (all of options.nodes' with renew); the directory
// must be this user's alone and no one else's to read.
Result<CertificateReport> MakeNodeKeys(const CertificateOptions& options);

}  // namespace muster::client
