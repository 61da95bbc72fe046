// Fakes for the agent's two seams: a launcher that "runs" processes without starting any (the
// test decides when they exit and how they answer signals), and a controller link the test plays
// the controller through. With them an Agent runs in milliseconds, without root or a controller.
#pragma once

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "job_spool.h"
#include "muster/agent/controller_link.h"
#include "muster/agent/launcher.h"

namespace muster::agent::testing {

// Thread-safe: the agent calls it on its io thread, the test from its own.
class FakeLauncher final : public Launcher {
 public:
  struct Process {
    pid_t pid = 0;       // the keeper, for a batch script; else the task
    pid_t task_pid = 0;  // the process group
    SpawnSpec spec;      // empty for a process a previous agent started
    bool alive = true;
    int status = 0;
    uint64_t start_time = 0;
    std::vector<int> events;  // eventfds that read ready when it exits
  };

  ~FakeLauncher() override {
    for (auto& [pid, p] : procs_) {
      for (int fd : p.events) ::close(fd);
    }
  }

  // Signals a fake process ends on: SIGTERM and SIGKILL by default; a stubborn one only on
  // SIGKILL.
  void SetStubborn(bool stubborn) {
    std::lock_guard<std::mutex> l(mu_);
    stubborn_ = stubborn;
  }

  Result<Spawned> Spawn(const SpawnSpec& spec) override {
    std::lock_guard<std::mutex> l(mu_);
    if (!fail_next_.empty()) {
      std::string why = std::move(fail_next_);
      fail_next_.clear();
      return Internal(why);
    }
    Process p;
    p.pid = next_pid_;
    p.task_pid = spec.exit_file.empty() ? next_pid_ : next_pid_ + 1;  // a keeper, then its task
    next_pid_ += 2;
    p.spec = spec;
    p.start_time = 1000 + static_cast<uint64_t>(p.pid);
    Spawned s;
    s.pid = p.pid;
    s.task_pid = p.task_pid;
    s.pidfd = NewEvent(p);
    procs_[p.pid] = std::move(p);
    cv_.notify_all();
    return s;
  }

  void Kill(pid_t pid, int sig) override {
    std::vector<pid_t> ending;
    {
      std::lock_guard<std::mutex> l(mu_);
      signals_.emplace_back(pid, sig);
      for (auto& [p, proc] : procs_) {
        const bool hit = pid < 0 ? proc.task_pid == -pid : proc.pid == pid;
        if (!hit || !proc.alive) continue;
        if (sig == SIGKILL || (sig == SIGTERM && !stubborn_)) ending.push_back(p);
      }
      cv_.notify_all();
    }
    for (pid_t p : ending) Exit(p, sig);  // killed by the signal
  }

  bool GroupAlive(pid_t pgid) override {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [p, proc] : procs_) {
      if (proc.task_pid == pgid && proc.alive) return true;
    }
    return false;
  }
  std::vector<pid_t> Descendants(pid_t) override { return {}; }
  uint64_t StartTime(pid_t pid) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = procs_.find(pid);
    return it != procs_.end() && it->second.alive ? it->second.start_time : 0;
  }
  int OpenPidfd(pid_t pid) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = procs_.find(pid);
    if (it == procs_.end() || !it->second.alive) return -1;
    return NewEvent(it->second);
  }
  int Reap(pid_t pid, bool) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = procs_.find(pid);
    return it != procs_.end() && !it->second.alive ? it->second.status : -1;
  }
  std::vector<gid_t> GroupsOf(const std::string&, gid_t gid) override { return {gid}; }

  // ---- The test's side. ----
  // A process a previous agent started: still running, with this start time.
  void AddRunning(pid_t pid, pid_t task_pid, uint64_t start_time) {
    std::lock_guard<std::mutex> l(mu_);
    Process p;
    p.pid = pid;
    p.task_pid = task_pid;
    p.start_time = start_time;
    procs_[pid] = std::move(p);
  }
  // The process ends with wait status `status`; a keeper records it in its exit file first.
  void Exit(pid_t pid, int status, const std::string& exit_file = "") {
    std::lock_guard<std::mutex> l(mu_);
    auto it = procs_.find(pid);
    if (it == procs_.end() || !it->second.alive) return;
    Process& p = it->second;
    const std::string& file = exit_file.empty() ? p.spec.exit_file : exit_file;
    if (!file.empty()) WriteFileCloexec(file, std::to_string(status), 0600);
    p.alive = false;
    p.status = status;
    for (int fd : p.events) {
      uint64_t one = 1;
      (void)!::write(fd, &one, sizeof one);
    }
    cv_.notify_all();
  }
  void FailNextSpawn(std::string why) {
    std::lock_guard<std::mutex> l(mu_);
    fail_next_ = std::move(why);
  }
  // Waits (up to 5 s) until `n` processes were started; returns them, by pid.
  std::vector<Process> WaitForSpawns(size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(5), [&] { return SpawnCount() >= n; });
    std::vector<Process> out;
    for (const auto& [p, proc] : procs_) {
      if (!proc.spec.argv.empty()) out.push_back(proc);
    }
    return out;
  }
  // Waits (up to 5 s) until `sig` was sent to process group `pgid`.
  bool WaitForSignal(pid_t pgid, int sig) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(5), [&] {
      for (const auto& [p, s] : signals_) {
        if (p == -pgid && s == sig) return true;
      }
      return false;
    });
  }
  std::vector<std::pair<pid_t, int>> signals() {
    std::lock_guard<std::mutex> l(mu_);
    return signals_;
  }

 private:
  size_t SpawnCount() const {
    size_t n = 0;
    for (const auto& [p, proc] : procs_) n += !proc.spec.argv.empty();
    return n;
  }
  // An eventfd that reads ready when `p` exits (the agent owns the fd returned).
  int NewEvent(Process& p) {
    const int fd = ::eventfd(p.alive ? 0 : 1, EFD_CLOEXEC | EFD_NONBLOCK);
    const int ours = ::dup(fd);
    p.events.push_back(ours);
    return fd;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<pid_t, Process> procs_;
  std::vector<std::pair<pid_t, int>> signals_;
  pid_t next_pid_ = 100'000;
  bool stubborn_ = false;
  std::string fail_next_;
};

// The test plays the controller: it registers the agent, sends commands, and reads what the agent
// sent. Thread-safe.
class FakeLink final : public ControllerLink {
 public:
  explicit FakeLink(Callbacks cb) : cb_(std::move(cb)) {}

  void Start() override {}
  void Stop() override {
    std::lock_guard<std::mutex> l(mu_);
    connected_ = false;
  }
  bool Send(const v1::AgentMessage& msg) override {
    std::lock_guard<std::mutex> l(mu_);
    if (!connected_) return false;
    sent_.push_back(msg);
    cv_.notify_all();
    return true;
  }
  bool connected() const override {
    std::lock_guard<std::mutex> l(mu_);
    return connected_;
  }
  void SetPausedForTest(bool) override {}

  // ---- The controller's side. ----
  v1::RegisterRequest Register() { return cb_.make_register(); }
  // `step_key`: what the agent checks step credentials with (none: it starts no step).
  void Connect(uint64_t epoch, const std::string& step_key = "") {
    {
      std::lock_guard<std::mutex> l(mu_);
      connected_ = true;
    }
    v1::RegisterResponse resp;
    resp.set_epoch(epoch);
    resp.set_step_key(step_key);
    resp.set_heartbeat_interval_ms(60'000);  // heartbeats are not what these tests watch
    cb_.on_connected(resp);
  }
  void Command(v1::ControllerMessage msg) { cb_.on_message(std::move(msg)); }
  // Waits (up to 5 s) for a message the agent sent that `match` accepts.
  bool WaitFor(const std::function<bool(const v1::AgentMessage&)>& match) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(5), [&] {
      for (const auto& m : sent_) {
        if (match(m)) return true;
      }
      return false;
    });
  }
  std::vector<v1::AgentMessage> sent() {
    std::lock_guard<std::mutex> l(mu_);
    return sent_;
  }

 private:
  Callbacks cb_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool connected_ = false;
  std::vector<v1::AgentMessage> sent_;
};

}  // namespace muster::agent::testing
