// The crash harness's invariants (tests/bench/crash_harness.cc): what the clients were told,
// checked against what the controller holds after a round and at the end. Pure: the harness
// reads the controller and the jobs' own record of their starts, and prints what is found.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "muster/v1/controller.pb.h"

namespace muster::bench::crash {

namespace v1 = muster::v1;

// What a client knows of one request's fate.
enum class Outcome { kAcked, kRefused, kUnknown };

struct Submission {
  std::string name;
  uint64_t id = 0;  // when acknowledged
  Outcome outcome = Outcome::kUnknown;
  bool hold = false;
  int gen_sent = 0;    // controller generation when sent
  int gen_after = 0;   // ... and when the answer (or failure) came
  uint32_t tasks = 0;  // a job array's task count (its tasks are jobs id .. id + tasks - 1)
};

struct Op {
  char kind;  // c: cancel, h: hold, r: release, d: drain, u: resume (undrain)
  Outcome outcome;
  int64_t answered_ms = 0;  // wall clock when the answer came
};

struct ClientLedger {
  std::vector<Submission> subs;
  std::map<uint64_t, std::vector<Op>> job_ops;      // per job, in the order sent
  std::map<std::string, std::vector<Op>> node_ops;  // per node (each client owns some nodes)
  std::set<uint64_t> open;                          // its jobs it believes unfinished
  std::set<uint64_t> held;                          // ... and held (what it releases)
};

bool IsFinal(v1::JobState s);

// Every job by id: accounting (every job, beyond the live view's retention) overlaid with the
// live view (allocations, holds, completing nodes).
using Jobs = std::map<uint64_t, v1::JobInfo>;

class Checker {
 public:
  // After a round. `at` prefixes each violation ("round 7: "); `running_at_kill` is what ran
  // just before the kill; `drained` each node's drain flag now. Returns how many it found.
  size_t Round(const std::string& at, const std::vector<ClientLedger>& ledgers, const Jobs& jobs,
               const Jobs& running_at_kill, const std::map<std::string, bool>& drained);
  // With every job over: `runs` counts the starts each job recorded itself.
  size_t End(const std::vector<ClientLedger>& ledgers, const Jobs& jobs,
             const std::map<uint64_t, int>& runs);
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  void Violation(const std::string& what) { violations_.push_back(what); }
  std::vector<std::string> violations_;
  // The start and allocation each job had when last seen running, for the end's checks.
  Jobs last_running_;
};

}  // namespace muster::bench::crash
