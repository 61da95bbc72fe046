#include "crash_invariants.h"

#include <algorithm>

namespace muster::bench::crash {

bool IsFinal(v1::JobState s) { return s != v1::PENDING && s != v1::RUNNING && s != v1::SUSPENDED; }

size_t Checker::Round(const std::string& at, const std::vector<ClientLedger>& ledgers,
                      const Jobs& jobs, const Jobs& running_at_kill,
                      const std::map<std::string, bool>& drained) {
  const size_t found_before = violations_.size();

  // Names: each acknowledged submission once, an unanswered one at most once, nothing else.
  std::map<std::string, std::vector<uint64_t>> by_name;
  for (const auto& [id, j] : jobs) by_name[j.name()].push_back(id);
  std::set<std::string> asked;
  // Acknowledged ids with the generations bounding who answered them.
  std::vector<const Submission*> acked;
  for (const ClientLedger& l : ledgers) {
    uint64_t last = 0;
    for (const Submission& s : l.subs) {
      asked.insert(s.name);
      const auto it = by_name.find(s.name);
      const size_t copies = it == by_name.end() ? 0 : it->second.size();
      // An array's tasks share its name: each once, with consecutive ids from the array's.
      const size_t expect = s.tasks > 0 ? s.tasks : 1;
      if (s.outcome == Outcome::kAcked) {
        acked.push_back(&s);
        if (copies != expect) {
          Violation(at + "acknowledged job " + std::to_string(s.id) + " (" + s.name + ") exists " +
                    std::to_string(copies) + " times" +
                    (s.tasks > 0 ? " (an array of " + std::to_string(s.tasks) + " tasks)" : ""));
        } else {
          for (size_t k = 0; k < expect; ++k) {
            if (it->second[k] == s.id + k) continue;
            Violation(at + s.name + " was acknowledged as job " + std::to_string(s.id + k) +
                      " but is job " + std::to_string(it->second[k]));
            break;
          }
        }
        if (s.id <= last) {
          Violation(at + "ids not increasing for one client: " + std::to_string(last) + " then " +
                    std::to_string(s.id));
        }
        last = s.id;
      } else if (copies > expect) {
        Violation(at + "unanswered submission " + s.name + " exists " + std::to_string(copies) +
                  " times");
      }
    }
  }
  for (const auto& [name, ids] : by_name) {
    if (!asked.count(name)) {
      Violation(at + "job " + std::to_string(ids[0]) + " (" + name + ") that no client submitted");
    }
  }
  // An id a later controller acknowledged is above every id an earlier one did.
  std::map<int, uint64_t> max_by_gen;  // the highest id acknowledged by generation <= g
  for (const Submission* s : acked) {
    max_by_gen[s->gen_after] = std::max(max_by_gen[s->gen_after], s->id);
  }
  for (auto it = max_by_gen.begin(); it != max_by_gen.end(); ++it) {
    if (it != max_by_gen.begin()) it->second = std::max(it->second, std::prev(it)->second);
  }
  for (const Submission* s : acked) {
    // Sent after generation gen_sent - 1 had died: answered by a later controller.
    auto before = max_by_gen.lower_bound(s->gen_sent);
    if (before == max_by_gen.begin()) continue;
    --before;
    if (s->id <= before->second) {
      Violation(at + "job id " + std::to_string(s->id) + " from a restarted controller is not " +
                "above " + std::to_string(before->second) + ", acknowledged before");
    }
  }

  // No GPU in two jobs' allocations: running jobs hold all their nodes, finished ones those that
  // have not reported them clean yet.
  std::map<std::pair<std::string, uint32_t>, uint64_t> gpu_owner;
  for (const auto& [id, j] : jobs) {
    if (j.state() != v1::RUNNING && !j.completing()) continue;
    for (const auto& na : j.allocation().nodes()) {
      if (j.state() != v1::RUNNING &&
          std::find(j.completing_nodes().begin(), j.completing_nodes().end(), na.node()) ==
              j.completing_nodes().end()) {
        continue;
      }
      for (uint32_t g : na.gpu_indices()) {
        auto [it, fresh] = gpu_owner.emplace(std::make_pair(na.node(), g), id);
        if (!fresh) {
          Violation(at + na.node() + " GPU " + std::to_string(g) + " is in jobs " +
                    std::to_string(it->second) + " and " + std::to_string(id));
        }
      }
    }
    if (j.state() == v1::RUNNING) last_running_[id] = j;
  }

  // Jobs running at the kill ran on, or ended on their own or by a cancel someone sent.
  std::set<uint64_t> cancel_sent;
  for (const ClientLedger& l : ledgers) {
    for (const auto& [id, ops] : l.job_ops) {
      for (const Op& op : ops) {
        if (op.kind == 'c' && op.outcome != Outcome::kRefused) cancel_sent.insert(id);
      }
    }
  }
  for (const auto& [id, before] : running_at_kill) {
    const auto it = jobs.find(id);
    const std::string jid = "job " + std::to_string(id);
    if (it == jobs.end()) {
      Violation(at + jid + " was running at the kill and is gone");
      continue;
    }
    const v1::JobInfo& now = it->second;
    if (now.requeue_count() != 0 || now.state() == v1::PENDING) {
      Violation(at + jid + " was running at the kill and was requeued");
    } else if (now.state() == v1::RUNNING) {
      if (now.start_time_ms() != before.start_time_ms() ||
          now.allocation().SerializeAsString() != before.allocation().SerializeAsString()) {
        Violation(at + jid + " runs on with another start or allocation");
      }
    } else if (now.state() == v1::CANCELLED
                   // A cancel of a job array's id reaches each of its tasks.
                   ? !cancel_sent.count(id) &&
                         !(now.has_array() && cancel_sent.count(now.array().array_job_id()))
                   : now.state() != v1::COMPLETED) {
      Violation(at + jid + " was running at the kill and ended " + v1::JobState_Name(now.state()) +
                " (" + now.reason() + ")");
    }
  }

  // The last acknowledged operation on each job and node holds (when none sent later is unknown).
  for (const ClientLedger& l : ledgers) {
    for (const auto& [id, ops] : l.job_ops) {
      const auto it = jobs.find(id);
      if (it == jobs.end() || ops.back().outcome != Outcome::kAcked) continue;
      const v1::JobInfo& j = it->second;
      const std::string jid = "job " + std::to_string(id);
      switch (ops.back().kind) {
        case 'c':
          // A running job is being stopped (it ends CANCELLED, checked at the end).
          if (j.state() == v1::PENDING) Violation(at + jid + " was cancelled but is pending");
          break;
        case 'h':
          // Held by its array's id, the hold is the array's pending tasks': the task that has
          // the array's id may have started before it (scontrol hold holds what still waits).
          if (j.has_array() && j.array().array_job_id() == id && j.state() != v1::PENDING) break;
          if (j.state() != v1::PENDING || !j.hold()) {
            Violation(at + jid + " was held but is " + v1::JobState_Name(j.state()) +
                      (j.hold() ? " held" : " not held"));
          }
          break;
        case 'r':
          if (j.hold()) Violation(at + jid + " was released but is held");
          break;
      }
    }
    for (const Submission& s : l.subs) {
      if (s.outcome != Outcome::kAcked || !s.hold || l.job_ops.count(s.id)) continue;
      const auto it = jobs.find(s.id);
      if (it != jobs.end() && (!it->second.hold() || it->second.state() != v1::PENDING)) {
        Violation(at + "job " + std::to_string(s.id) + " was submitted held but is " +
                  v1::JobState_Name(it->second.state()));
      }
    }
  }
  for (const ClientLedger& l : ledgers) {
    for (const auto& [node, ops] : l.node_ops) {
      if (ops.back().outcome != Outcome::kAcked || !drained.count(node)) continue;
      if (drained.at(node) != (ops.back().kind == 'd')) {
        Violation(at + node + " was " + (ops.back().kind == 'd' ? "drained" : "resumed") +
                  " but is " + (drained.at(node) ? "drained" : "not drained"));
      }
    }
  }
  return violations_.size() - found_before;
}

size_t Checker::End(const std::vector<ClientLedger>& ledgers, const Jobs& jobs,
                    const std::map<uint64_t, int>& runs) {
  const size_t found_before = violations_.size();
  for (const auto& [id, n] : runs) {
    if (n > 1) Violation("job " + std::to_string(id) + " ran " + std::to_string(n) + " times");
    if (!jobs.count(id)) Violation("job " + std::to_string(id) + " ran but is not accounted");
  }
  // An acknowledged cancel ends the job CANCELLED, unless it had ended before the answer came.
  for (const ClientLedger& l : ledgers) {
    for (const auto& [id, ops] : l.job_ops) {
      const auto it = jobs.find(id);
      for (const Op& op : ops) {
        if (op.kind != 'c' || op.outcome != Outcome::kAcked || it == jobs.end()) continue;
        const v1::JobInfo& j = it->second;
        if (j.state() != v1::CANCELLED && j.end_time_ms() > op.answered_ms) {
          Violation("job " + std::to_string(id) + " was cancelled but ended " +
                    v1::JobState_Name(j.state()) + " after that");
        }
      }
    }
  }
  for (const auto& [id, j] : jobs) {
    const std::string jid = "job " + std::to_string(id);
    if (!IsFinal(j.state())) Violation(jid + " never ended");
    if (j.state() == v1::COMPLETED && !runs.count(id)) Violation(jid + " completed but never ran");
    const auto seen = last_running_.find(id);
    if (seen != last_running_.end() && seen->second.start_time_ms() != j.start_time_ms()) {
      Violation(jid + " is accounted with another start than it ran with");
    }
  }
  return violations_.size() - found_before;
}

}  // namespace muster::bench::crash
