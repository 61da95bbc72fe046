#include "muster/client/certificates.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "muster/common/config.h"
#include "muster/common/node_keys.h"
#include "muster/common/own_files.h"
#include "muster/common/strings.h"

namespace muster::client {
namespace {

namespace fs = std::filesystem;

// Runs openssl with these arguments (never through a shell), with a umask that keeps every file
// it writes private. Its stderr is returned in the error.
Status RunOpenssl(const std::string& openssl, const std::vector<std::string>& args) {
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(openssl.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    return ErrnoStatus("fork", errno);
  }
  if (pid == 0) {
    ::umask(077);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
      ::dup2(devnull, STDOUT_FILENO);
    }
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execvp(argv[0], argv.data());
    std::string msg = "cannot run " + openssl + ": " + std::strerror(errno) +
                      " (install Debian's openssl package)\n";
    (void)!::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  std::string err;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (err.size() < 16384) err.append(buf, static_cast<size_t>(n));
  }
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return FailedPrecondition("openssl " + (args.empty() ? "" : args[0]) +
                            " failed: " + std::string(Trim(err)));
}

std::string RandomSerial() {
  std::random_device rd;
  std::string hex = "0x4";  // positive, 128 bits
  static const char* kDigits = "0123456789abcdef";
  for (int i = 0; i < 31; ++i) hex += kDigits[rd() % 16];
  return hex;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

Status Rename(const std::string& from, const std::string& to, mode_t mode) {
  if (::chmod(from.c_str(), mode) != 0) return ErrnoStatus("chmod " + from, errno);
  if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("rename " + to, errno);
  return Status::Ok();
}

const std::vector<std::string> kEcKey = {"-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:prime256v1", "-nodes"};

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Status MakeCa(const CertificateOptions& o, CertificateReport* report) {
  std::string tmp_key = o.dir + "/.ca.key.tmp", tmp_crt = o.dir + "/.ca.crt.tmp";
  MUSTER_RETURN_IF_ERROR(RunOpenssl(
      o.openssl, Concat({"req", "-x509", "-new"},
                        Concat(kEcKey, {"-keyout", tmp_key, "-out", tmp_crt, "-days",
                                        std::to_string(o.ca_days), "-subj",
                                        "/O=muster/OU=" + o.cluster_name + "/CN=muster CA",
                                        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
                                        "-addext", "keyUsage=critical,keyCertSign,cRLSign"}))));
  MUSTER_RETURN_IF_ERROR(Rename(tmp_key, o.dir + "/ca.key", 0600));
  MUSTER_RETURN_IF_ERROR(Rename(tmp_crt, o.dir + "/ca.crt", 0644));
  report->written.push_back(o.dir + "/ca.key");
  report->written.push_back(o.dir + "/ca.crt");
  return Status::Ok();
}

// A key and a certificate for `name` signed by the CA: serverAuth for the controller, clientAuth
// for a node, so that a node cannot stand in for the controller. The controller's is a client's
// too: a standby follows the leader with it (a node's name is never the controller's, so the
// controller's cannot register as a node).
Status Issue(const CertificateOptions& o, const std::string& file, const std::string& name,
             bool server, CertificateReport* report) {
  std::string sans = "subjectAltName=DNS:" + name;
  if (server) {
    for (const std::string& extra : o.controller_sans) sans += "," + extra;
  }
  std::string key = o.dir + "/" + file + ".key", crt = o.dir + "/" + file + ".crt";
  if (!o.renew && Exists(crt) && Exists(key)) {
    report->kept.push_back(crt);
    return Status::Ok();
  }
  std::string tmp_key = o.dir + "/." + file + ".key.tmp";
  std::string tmp_csr = o.dir + "/." + file + ".csr.tmp";
  std::string tmp_crt = o.dir + "/." + file + ".crt.tmp";
  Status st = RunOpenssl(
      o.openssl,
      Concat({"req", "-new"}, Concat(kEcKey, {"-keyout", tmp_key, "-out", tmp_csr, "-subj",
                                              "/O=muster/OU=" + o.cluster_name + "/CN=" + name,
                                              "-addext", sans, "-addext",
                                              std::string("extendedKeyUsage=") +
                                                  (server ? "serverAuth,clientAuth" : "clientAuth"),
                                              "-addext", "basicConstraints=critical,CA:FALSE",
                                              "-addext", "keyUsage=critical,digitalSignature"})));
  if (st.ok()) {
    st = RunOpenssl(o.openssl,
                    {"x509", "-req", "-in", tmp_csr, "-CA", o.dir + "/ca.crt", "-CAkey",
                     o.dir + "/ca.key", "-set_serial", RandomSerial(), "-days",
                     std::to_string(o.days), "-copy_extensions", "copyall", "-out", tmp_crt});
  }
  ::unlink(tmp_csr.c_str());
  if (st.ok()) st = Rename(tmp_key, key, 0600);
  if (st.ok()) st = Rename(tmp_crt, crt, 0644);
  if (!st.ok()) {
    ::unlink(tmp_key.c_str());
    ::unlink(tmp_crt.c_str());
    return st;
  }
  report->written.push_back(key);
  report->written.push_back(crt);
  return Status::Ok();
}

}  // namespace

Result<CertificateReport> MakeCertificates(const CertificateOptions& o) {
  if (o.dir.empty()) return InvalidArgument("no directory for the certificates");
  if (!IsValidNodeName(o.controller_name)) {
    return InvalidArgument("'" + o.controller_name + "' is not a valid controller name");
  }
  for (const auto& n : o.nodes) {
    if (!IsValidNodeName(n)) return InvalidArgument("'" + n + "' is not a valid node name");
    if (n == o.controller_name || n == "ca" || n == o.controller_file) {
      return InvalidArgument("a node cannot be named '" + n + "' (its files would be another's)");
    }
  }
  if (o.days == 0 || o.days > 36500 || o.ca_days == 0 || o.ca_days > 36500) {
    return InvalidArgument("certificates are valid for 1 to 36500 days");
  }
  std::error_code ec;
  if (!Exists(o.dir)) {
    fs::create_directories(o.dir, ec);
    if (ec) return FailedPrecondition("cannot create " + o.dir + ": " + ec.message());
    fs::permissions(o.dir, fs::perms(0755), ec);
  }
  if (Status st = CheckOwnDirectory(o.dir); !st.ok()) {
    return FailedPrecondition("refusing to keep keys in " + o.dir + ": " + st.message());
  }
  CertificateReport report;
  bool have_ca_key = Exists(o.dir + "/ca.key"), have_ca_crt = Exists(o.dir + "/ca.crt");
  if (have_ca_key != have_ca_crt) {
    return FailedPrecondition(o.dir + " has " +
                              (have_ca_key ? "ca.key without ca.crt" : "ca.crt without ca.key") +
                              ": restore the missing file, or move both aside for a new CA");
  }
  if (!have_ca_key) {
    MUSTER_RETURN_IF_ERROR(MakeCa(o, &report));
  } else {
    MUSTER_RETURN_IF_ERROR(CheckOwnFile(o.dir + "/ca.key"));
  }
  if (o.controller) {
    MUSTER_RETURN_IF_ERROR(Issue(o, o.controller_file, o.controller_name, true, &report));
  }
  for (const auto& n : o.nodes) MUSTER_RETURN_IF_ERROR(Issue(o, n, n, false, &report));
  return report;
}

Result<CertificateReport> MakeEtcdCertificates(const std::string& dir, bool renew) {
  CertificateOptions o;
  o.dir = dir;
  o.cluster_name = "etcd";
  o.controller_name = "etcd";
  o.controller_file = "server";
  o.controller_sans = {"IP:127.0.0.1", "DNS:localhost"};
  o.nodes = {"client"};
  o.renew = renew;
  return MakeCertificates(o);
}

std::vector<std::string> EtcdTlsFlags(const std::string& dir) {
  return {"--cert-file=" + dir + "/server.crt",        "--key-file=" + dir + "/server.key",
          "--trusted-ca-file=" + dir + "/ca.crt",      "--client-cert-auth",
          "--peer-cert-file=" + dir + "/server.crt",   "--peer-key-file=" + dir + "/server.key",
          "--peer-trusted-ca-file=" + dir + "/ca.crt", "--peer-client-cert-auth"};
}

Result<CertificateReport> MakeNodeKeys(const CertificateOptions& o) {
  if (o.dir.empty()) return InvalidArgument("no directory for the node keys");
  for (const auto& n : o.nodes) {
    if (!IsValidNodeName(n)) return InvalidArgument("'" + n + "' is not a valid node name");
  }
  std::error_code ec;
  if (!Exists(o.dir)) {
    fs::create_directories(o.dir, ec);
    if (ec) return FailedPrecondition("cannot create " + o.dir + ": " + ec.message());
    fs::permissions(o.dir, fs::perms(0700), ec);
  }
  if (Status st = CheckOwnDirectory(o.dir); !st.ok()) {
    return FailedPrecondition("refusing to keep node keys in " + o.dir + ": " + st.message());
  }
  CertificateReport report;
  for (const auto& n : o.nodes) {
    const std::string path = o.dir + "/" + n + ".key";
    if (Exists(path) && !o.renew) {
      MUSTER_RETURN_IF_ERROR(CheckOwnFile(path));  // not a link someone left for us
      report.kept.push_back(path);
      continue;
    }
    std::string raw(kNodeKeyBytes, '\0');
    for (size_t got = 0; got < raw.size();) {
      ssize_t r = ::getrandom(raw.data() + got, raw.size() - got, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return ErrnoStatus("getrandom", errno);
      got += static_cast<size_t>(r);
    }
    const std::string tmp = o.dir + "/." + n + ".key.tmp";
    ::unlink(tmp.c_str());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return ErrnoStatus("create " + tmp, errno);
    const std::string text = NodeKeyText(raw);
    const bool wrote = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
    ::close(fd);
    if (!wrote) return ErrnoStatus("write " + tmp, errno);
    MUSTER_RETURN_IF_ERROR(Rename(tmp, path, 0600));
    report.written.push_back(path);
  }
  return report;
}

}  // namespace muster::client
