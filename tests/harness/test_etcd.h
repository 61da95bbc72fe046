// An etcd of the test's own (Debian's etcd-server): one member on two free loopback ports, its
// data and log in a directory the test made, started in the foreground and stopped by its pid.
// As a real one: TLS with client certificates from its own CA (`muster certs --etcd`'s code in
// <dir>/certs), for clients and peers.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "muster/client/certificates.h"
#include "muster/common/status.h"
#include "muster/common/tls_files.h"
#include "muster/ha/etcd_election.h"

namespace muster::testing {

class TestEtcd {
 public:
  static constexpr const char* kProgram = "/usr/bin/etcd";
  static bool Installed() { return ::access(kProgram, X_OK) == 0; }

  // Starts etcd with its data in `dir` and waits until it answers. FAILED_PRECONDITION when
  // etcd is not installed.
  static Result<std::unique_ptr<TestEtcd>> Start(const std::string& dir) {
    if (!Installed()) {
      return FailedPrecondition("etcd is not installed (scripts/install-deps.sh installs it)");
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    auto e = std::unique_ptr<TestEtcd>(new TestEtcd());
    e->log_ = dir + "/etcd.log";
    e->certs_ = dir + "/certs";
    MUSTER_RETURN_IF_ERROR(client::MakeEtcdCertificates(e->certs_, false).status());
    MUSTER_ASSIGN_OR_RETURN(e->tls_,
                            LoadTlsIdentity(e->certs_ + "/ca.crt", e->certs_ + "/client.crt",
                                            e->certs_ + "/client.key"));
    const auto [client_port, peer_port] = FreePorts();
    e->endpoint_ = "127.0.0.1:" + std::to_string(client_port);
    const std::string peer = "https://127.0.0.1:" + std::to_string(peer_port);
    std::vector<std::string> args = {kProgram,
                                     "--name=t",
                                     "--data-dir=" + dir + "/data",
                                     "--listen-client-urls=https://" + e->endpoint_,
                                     "--advertise-client-urls=https://" + e->endpoint_,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=t=" + peer};
    for (const std::string& a : client::EtcdTlsFlags(e->certs_)) args.push_back(a);
    args.push_back("--logger=zap");
    args.push_back("--log-outputs=" + e->log_);
    e->pid_ = ::fork();
    if (e->pid_ < 0) return ErrnoStatus("fork", errno);
    if (e->pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(kProgram, argv.data());
      ::_exit(127);
    }
    ha::EtcdElectionOptions probe_options = e->Options("/probe", "probe");
    MUSTER_ASSIGN_OR_RETURN(auto probe, ha::EtcdElection::Create(probe_options));
    Status last;
    for (int i = 0; i < 150; ++i) {
      int status;
      if (::waitpid(e->pid_, &status, WNOHANG) == e->pid_) {
        e->pid_ = -1;
        return Internal("etcd exited at start; see " + e->log_);
      }
      auto leader = probe->Leader();
      if (leader.status().code() == StatusCode::kNotFound) return e;
      last = leader.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Internal("etcd did not start (" + last.ToString() + "); see " + e->log_);
  }

  ~TestEtcd() {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      int status;
      ::waitpid(pid_, &status, 0);
    }
  }

  const std::string& endpoint() const { return endpoint_; }
  // Where ca.crt, client.crt and client.key are.
  const std::string& certs() const { return certs_; }
  // An election on this etcd, as a controller would have it.
  ha::EtcdElectionOptions Options(const std::string& key, const std::string& candidate) const {
    ha::EtcdElectionOptions o;
    o.endpoints = {endpoint_};
    o.key = key;
    o.candidate = candidate;
    o.tls = tls_;
    return o;
  }
  const std::string& log() const { return log_; }
  // Freezes (SIGSTOP) or thaws (SIGCONT) etcd: to its clients, cut off.
  void Freeze(bool frozen) { ::kill(pid_, frozen ? SIGSTOP : SIGCONT); }

 private:
  TestEtcd() = default;

  // Two distinct free loopback ports (both held open while chosen, so they differ).
  static std::pair<uint16_t, uint16_t> FreePorts() {
    uint16_t ports[2];
    int fds[2];
    for (int i = 0; i < 2; ++i) {
      fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ::bind(fds[i], reinterpret_cast<sockaddr*>(&a), sizeof a);
      socklen_t len = sizeof a;
      ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&a), &len);
      ports[i] = ntohs(a.sin_port);
    }
    ::close(fds[0]);
    ::close(fds[1]);
    return {ports[0], ports[1]};
  }

  std::string endpoint_, log_, certs_;
  TlsIdentity tls_;
  pid_t pid_ = -1;
};

}  // namespace muster::testing
