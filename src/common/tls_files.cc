#include "muster/common/tls_files.h"

#include "muster/common/own_files.h"

namespace muster {
namespace {

// PEM certificates and keys are a few KiB; a CA bundle a few hundred.
constexpr size_t kMaxPemBytes = 1 << 20;

Result<std::string> ReadPem(const std::string& path, bool secret) {
  MUSTER_ASSIGN_OR_RETURN(std::string data,
                          ReadProtectedFile(path, "TLS file", secret, kMaxPemBytes));
  if (data.find("-----BEGIN ") == std::string::npos) {
    return FailedPrecondition("TLS file " + path + " holds no PEM data");
  }
  return data;
}

}  // namespace

Result<TlsIdentity> LoadTlsIdentity(const std::string& ca_file, const std::string& cert_file,
                                    const std::string& key_file) {
  TlsIdentity id;
  MUSTER_ASSIGN_OR_RETURN(id.ca_pem, ReadPem(ca_file, false));
  MUSTER_ASSIGN_OR_RETURN(id.cert_pem, ReadPem(cert_file, false));
  MUSTER_ASSIGN_OR_RETURN(id.key_pem, ReadPem(key_file, true));
  return id;
}

Result<TlsIdentity> LoadControllerTlsIdentity(const TlsConfig& tls) {
  return LoadTlsIdentity(tls.ca_file, tls.controller_cert_file, tls.controller_key_file);
}

Result<TlsIdentity> LoadNodeTlsIdentity(const TlsConfig& tls, const std::string& node) {
  return LoadTlsIdentity(tls.ca_file, tls.NodeCertFile(node), tls.NodeKeyFile(node));
}

}  // namespace muster
