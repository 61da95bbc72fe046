#include "muster/common/tls_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "muster/common/own_files.h"

namespace muster {
namespace {

// PEM certificates and keys are a few KiB; a CA bundle a few hundred.
constexpr off_t kMaxPemBytes = 1 << 20;

// Opens first and checks the open file, so that what is checked is what is read.
Result<std::string> ReadPem(const std::string& path, bool secret) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return FailedPrecondition("cannot read TLS file " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    problem = "belongs to uid " + std::to_string(st.st_uid) + ", neither root nor uid " +
              std::to_string(::geteuid()) + " that runs this";
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    problem = "can be changed by other users (mode " + OctalMode(st.st_mode) + ")";
  } else if (secret && (st.st_mode & (S_IRWXG | S_IRWXO))) {
    problem =
        "is a private key that others can read (mode " + OctalMode(st.st_mode) + "; make it 0600)";
  } else if (st.st_size > kMaxPemBytes) {
    problem = "is larger than " + std::to_string(kMaxPemBytes) + " bytes";
  }
  std::string data;
  if (problem.empty()) {
    data.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < data.size()) {
      ssize_t n = ::read(fd, data.data() + got, data.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        problem = n < 0 ? std::strerror(errno) : "changed while it was read";
        break;
      }
      got += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!problem.empty()) return FailedPrecondition("refusing TLS file " + path + ": " + problem);
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
