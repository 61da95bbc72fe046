// crash_harness --failover: each round stops the leading controller of a hot standby (SIGKILL,
// or SIGSTOP every other round) and checks that the standby takes over and the old leader stops.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <thread>

#include "crash_harness.h"
#include "muster/common/procfs.h"

namespace muster::bench::crash {

int Harness::Leader() const {
  for (size_t i = 0; i < config_.controllers.size(); ++i) {
    auto c = ControllerClient::Connect(config_.controllers[i].socket_path);
    if (c.ok() && c->ControllerInfo().ok()) return static_cast<int>(i);
  }
  return -1;
}

pid_t Harness::PidOf(int c) const {
  std::ifstream in(o_.cluster + "/run/musterctld-" + config_.controllers[c].name + ".pid");
  pid_t pid = 0;
  in >> pid;
  return pid;
}

pid_t Harness::StartStandby(int c) {
  const std::string& name = config_.controllers[c].name;
  const pid_t pid = SpawnController(o_.cluster + "/log/musterctld-" + name + ".log", name);
  if (pid > 0) {
    children_.push_back(pid);
    std::ofstream(o_.cluster + "/run/musterctld-" + name + ".pid") << pid << "\n";
  }
  return pid;
}

// Stops the leader (SIGKILL, or SIGSTOP every other round), times the standby's takeover, checks
// that a frozen leader stops on its own once thawed, and brings the stopped one back as the
// standby, in sync, for the next round.
bool Harness::FailoverRound(int round, std::mt19937_64& rng) {
  const std::string at = "round " + std::to_string(round) + ": ";
  const int leader = Leader();
  if (leader < 0) {
    Violation(at + "no controller serves");
    return false;
  }
  const int standby = 1 - leader;
  // A standby that never caught up may not take over (by design): the first round waits for
  // the cluster's standby to be in sync, as the later rounds do for the restarted one.
  if (round == 1 && !InSync(leader, standby)) {
    Violation(at + "the standby " + config_.controllers[standby].name +
              " was not in sync within 60 s of the start");
    return false;
  }
  const pid_t victim = PidOf(leader);
  const bool freeze = round % 2 == 0;
  ++gen_;
  const auto stopped = Clock::now();
  if (victim <= 0 || ::kill(victim, freeze ? SIGSTOP : SIGKILL) != 0) {
    Violation(at + "cannot stop the leader (pid " + std::to_string(victim) + ")");
    return false;
  }
  std::optional<double> served;
  const auto deadline = stopped + std::chrono::seconds(30);
  while (!served && Clock::now() < deadline) {
    auto c = ControllerClient::Connect(config_.controllers[standby].socket_path);
    if (c.ok() && c->ControllerInfo().ok()) {
      served = std::chrono::duration<double, std::milli>(Clock::now() - stopped).count();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (freeze) {
    ++frozen_rounds_;
    ::kill(victim, SIGCONT);
  }
  if (!served) {
    Violation(at + "the standby " + config_.controllers[standby].name + " never served");
    return false;
  }
  restart_ms_.push_back(*served);
  // Killed, or thawed: either way it must be gone (a thawed one finds its lease lost and stops).
  bool gone = false;
  for (const auto until = Clock::now() + std::chrono::seconds(15); Clock::now() < until;) {
    int status = 0;
    if (::waitpid(victim, &status, WNOHANG) == victim) {
      gone = true;
      children_.erase(std::remove(children_.begin(), children_.end(), victim), children_.end());
      break;
    }
    if (!muster::ProcessAlive(victim) &&
        std::find(children_.begin(), children_.end(), victim) == children_.end()) {
      gone = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!gone) {
    Violation(at + "the old leader (pid " + std::to_string(victim) +
              ") still runs 15 s after it was " + (freeze ? "thawed" : "killed") + ": not fenced");
    ::kill(victim, SIGKILL);
    ::waitpid(victim, nullptr, 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
  if (StartStandby(leader) <= 0) {
    Violation(at + "cannot start the old leader again");
    return false;
  }
  // In sync again, so that the next round has a standby that may take over.
  if (InSync(standby, leader)) return true;
  Violation(at + config_.controllers[leader].name + " did not come back in sync within 60 s");
  return false;
}

bool Harness::InSync(int serving, int standby) {
  const std::string& name = config_.controllers[standby].name;
  for (const auto until = Clock::now() + std::chrono::seconds(60); Clock::now() < until;) {
    if (auto c = ControllerClient::Connect(config_.controllers[serving].socket_path); c.ok()) {
      if (auto d = c->Diagnostics(); d.ok()) {
        for (const std::string& s : d->standbys_in_sync()) {
          if (s == name) return true;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace muster::bench::crash
