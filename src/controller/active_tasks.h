// The jobs pending or running, counted by account and by QoS, in total and per user: what the
// submit-job limits (GrpSubmitJobs, MaxSubmitJobs) compare against at every submission, kept
// as records change instead of counted by walking the job table. A carrier counts each task it
// stands for (array_tasks.h).
//
// Strand-confined (JobManager keeps it with the table).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "muster/v1/records.pb.h"

namespace muster::controller {

class ActiveTasks {
 public:
  // What one job entry is counted as now. The names point at this object's keys, which are
  // never erased (accounts and QoS are few), so an entry remembers its key without a copy.
  struct Counted {
    const std::string* account = nullptr;
    const std::string* qos = nullptr;
    uint32_t uid = 0;
    uint64_t tasks = 0;  // 0: not counted (not pending or running)
  };

  // Moves the job from what `counted` says to what `rec` says now (or out, when it is no longer
  // pending or running).
  void Recount(Counted& counted, const v1::JobRecord& rec);

  // Tasks pending or running whose job names the account (not its sub-accounts) or the QoS
  // ("" counts as "normal", the QoS of a job that names none); per user, or all users.
  uint64_t OfAccount(const std::string& account) const;
  uint64_t OfAccount(const std::string& account, uint32_t uid) const;
  uint64_t OfQos(const std::string& qos) const;
  uint64_t OfQos(const std::string& qos, uint32_t uid) const;

  // Every account with tasks counted, and its total: a caller adds sub-accounts up to their
  // ancestors (the tree can change at any time, so it is not folded in here).
  template <typename Fn>
  void ForEachAccount(Fn fn) const {
    for (const auto& [name, tally] : accounts_) {
      if (tally.total > 0) fn(name, tally);
    }
  }

  struct Tally {
    uint64_t total = 0;
    std::unordered_map<uint32_t, uint64_t> by_uid;  // no zero entries
    uint64_t Of(uint32_t uid) const;
    bool operator==(const Tally&) const = default;
  };

  // The same counts, ignoring keys whose count went back to zero (tests: kept equals recounted).
  bool SameAs(const ActiveTasks& other) const;

 private:
  static void Add(Tally& t, uint32_t uid, uint64_t n);
  static void Take(Tally& t, uint32_t uid, uint64_t n);
  std::map<std::string, Tally> accounts_;
  std::map<std::string, Tally> qos_;
};

}  // namespace muster::controller
