// A munged of the test's own: its own key, socket and files in a directory the test made, started
// in the foreground and stopped by its pid. Tests of MUNGE authentication never touch the
// machine's munged (if it has one).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "muster/common/status.h"

namespace muster::testing {

class TestMunged {
 public:
  // Starts munged with a fresh random key in `dir` (created 0755: munged wants its socket's
  // directory searchable by all). FAILED_PRECONDITION when munged is not installed.
  static Result<std::unique_ptr<TestMunged>> Start(const std::string& dir) {
    const char* munged = "/usr/sbin/munged";
    if (::access(munged, X_OK) != 0) {
      return FailedPrecondition("munged is not installed (scripts/install-deps.sh installs it)");
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    ::chmod(dir.c_str(), 0755);
    const std::string key = dir + "/munge.key";
    {
      std::random_device rd;
      std::ofstream out(key, std::ios::binary);
      for (int i = 0; i < 1024; ++i) out.put(static_cast<char>(rd() & 0xff));
    }
    ::chmod(key.c_str(), 0600);
    auto m = std::unique_ptr<TestMunged>(new TestMunged());
    m->socket_ = dir + "/munge.sock";
    m->log_ = dir + "/munged.log";
    const std::string args[] = {"--foreground",
                                "--socket=" + m->socket_,
                                "--key-file=" + key,
                                "--log-file=" + m->log_,
                                "--pid-file=" + dir + "/munged.pid",
                                "--seed-file=" + dir + "/munged.seed",
                                "--num-threads=2"};
    m->pid_ = ::fork();
    if (m->pid_ < 0) return ErrnoStatus("fork", errno);
    if (m->pid_ == 0) {
      std::vector<char*> argv{const_cast<char*>(munged)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      int devnull = ::open("/dev/null", O_RDWR);
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execv(munged, argv.data());
      ::_exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!std::filesystem::exists(m->socket_)) {
      int status = 0;
      if (::waitpid(m->pid_, &status, WNOHANG) == m->pid_) {
        m->pid_ = -1;
        return FailedPrecondition("munged exited at start; see " + m->log_);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return DeadlineExceeded("munged did not create its socket; see " + m->log_);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return m;
  }

  ~TestMunged() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  const std::string& socket() const { return socket_; }

 private:
  TestMunged() = default;
  pid_t pid_ = -1;
  std::string socket_, log_;
};

}  // namespace muster::testing
