// What each user's, account's and QoS's jobs keep in the state store as scripts and
// environments: one payload per submission (an array's tasks share one), from submission until
// its last job is archived. The stored-bytes limits (limit_tracker.h) and `muster diag` read it;
// JobManager, the one writer of job records, keeps it true to them.
//
// Strand-confined.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "muster/v1/records.pb.h"

namespace muster::controller {

// The bytes a submission stores besides its record's fixed fields: its script, environment and
// script arguments.
uint64_t PayloadBytesOf(const v1::JobSpec& spec);
// The id a job's payload is stored under: its array's, or its own.
uint64_t PayloadIdOf(const v1::JobRecord& rec);

class StoredBytes {
 public:
  // Who a payload counts for: its job's user, account and QoS (an array's: those of the task
  // that changed last, or after a restart of its first task left).
  struct Owner {
    uint32_t uid = 0;
    std::string user, account, qos;
  };

  // The payload of `rec` (at submission or recovery) counts from now; once per payload, so
  // each task of an array may say it. Records without a size (older ones) count nothing.
  void Add(const v1::JobRecord& rec);
  // Its payload left the store.
  void Remove(uint64_t payload_id);
  // `rec`'s account or QoS changed (scontrol update): its payload counts for them from now,
  // as a restart would count it.
  void Reown(const v1::JobRecord& rec);

  uint64_t total() const { return total_; }
  uint64_t OfUser(uint32_t uid) const;
  // Of one account alone (not its sub-accounts), of all its users or of one.
  uint64_t OfAccount(const std::string& account) const;
  uint64_t OfAccountUser(const std::string& account, uint32_t uid) const;
  uint64_t OfQos(const std::string& qos) const;
  uint64_t OfQosUser(const std::string& qos, uint32_t uid) const;
  // Accounts with stored payloads, and how much (for limits of a whole sub-tree).
  const std::map<std::string, uint64_t>& accounts() const { return by_account_; }

  struct UserUse {
    std::string user;
    uint64_t bytes = 0;
    uint64_t payloads = 0;
  };
  // The `n` users storing most, biggest first.
  std::vector<UserUse> Biggest(size_t n) const;
  UserUse OfUserRow(uint32_t uid) const;

 private:
  struct Payload {
    uint64_t bytes = 0;
    Owner owner;
  };
  void Count(const Payload& p, int sign);

  std::unordered_map<uint64_t, Payload> payloads_;  // by payload id
  uint64_t total_ = 0;
  std::unordered_map<uint32_t, UserUse> by_user_;
  std::map<std::string, uint64_t> by_account_;
  std::map<std::pair<std::string, uint32_t>, uint64_t> by_account_user_;
  std::map<std::string, uint64_t> by_qos_;
  std::map<std::pair<std::string, uint32_t>, uint64_t> by_qos_user_;
};

}  // namespace muster::controller
