// The PEM files one side of the daemons' mutual TLS is made of, read with the checks a root
// daemon owes them: the CA and the certificate may be read by anyone but changed only by their
// owner (this process's user or root); the private key is readable by its owner alone.
#pragma once

#include <string>

#include "muster/common/config.h"
#include "muster/common/status.h"

namespace muster {

struct TlsIdentity {
  std::string ca_pem;    // the CA(s) the peer's certificate must chain to
  std::string cert_pem;  // this side's certificate (chain)
  std::string key_pem;   // and its private key
};

// Reads the three files. FAILED_PRECONDITION naming the file and what is wrong with it.
Result<TlsIdentity> LoadTlsIdentity(const std::string& ca_file, const std::string& cert_file,
                                    const std::string& key_file);

// The controller's identity, or a node's (with %n replaced), from the [tls] section.
Result<TlsIdentity> LoadControllerTlsIdentity(const TlsConfig& tls);
Result<TlsIdentity> LoadNodeTlsIdentity(const TlsConfig& tls, const std::string& node);

}  // namespace muster
