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

// `muster certs --node-keys`: without TLS, each node's [node_auth] key (dir/<node>.key, 64 random
// hex digits, 0600) that its agent proves itself with; the controllers need all of them, each
// node only its own. Missing ones are made (all of options.nodes' with renew); the directory
// must be this user's alone and no one else's to read.
Result<CertificateReport> MakeNodeKeys(const CertificateOptions& options);

}  // namespace muster::client
