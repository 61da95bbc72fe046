#include "muster/store/state_store.h"

namespace muster::store {

const char* FamilyName(Family f) {
  switch (f) {
    case Family::kMeta:
      return "meta";
    case Family::kJobs:
      return "jobs";
    case Family::kNodes:
      return "nodes";
    case Family::kJobHistory:
      return "job_history";
    case Family::kQuarantine:
      return "quarantine";
    case Family::kJobPayload:
      return "job_payload";
    case Family::kAudit:
      return "audit";
    case Family::kAccounts:
      return "accounts";
    case Family::kUsers:
      return "users";
    case Family::kUsage:
      return "usage";
    case Family::kQos:
      return "qos";
    case Family::kReservations:
      return "reservations";
    case Family::kPartitions:
      return "partitions";
    case Family::kReplica:
      return "replica";
  }
  return "?";
}

std::string Mutation::JobKey(uint64_t id) {
  std::string k(8, '\0');
  for (int i = 7; i >= 0; --i) {
    k[static_cast<size_t>(i)] = static_cast<char>(id & 0xff);
    id >>= 8;
  }
  return k;
}

std::string Mutation::AuditKey(int64_t time_ms, uint32_t epoch, uint32_t seq) {
  std::string k = JobKey(static_cast<uint64_t>(time_ms));
  for (uint32_t v : {epoch, seq}) {
    for (int shift = 24; shift >= 0; shift -= 8)
      k.push_back(static_cast<char>((v >> shift) & 0xff));
  }
  return k;
}

void Mutation::PutAudit(const std::string& key, const v1::AuditEntry& entry) {
  ops_.push_back({Family::kAudit, key, entry.SerializeAsString()});
}

void Mutation::DeleteAudit(const std::string& key) {
  ops_.push_back({Family::kAudit, key, std::nullopt});
}

void Mutation::PutAccount(const v1::AccountRecord& account) {
  ops_.push_back({Family::kAccounts, account.name(), account.SerializeAsString()});
}

void Mutation::DeleteAccount(const std::string& name) {
  ops_.push_back({Family::kAccounts, name, std::nullopt});
}

void Mutation::PutUser(const v1::UserRecord& user) {
  ops_.push_back({Family::kUsers, user.name(), user.SerializeAsString()});
}

void Mutation::DeleteUser(const std::string& name) {
  ops_.push_back({Family::kUsers, name, std::nullopt});
}

void Mutation::PutUsage(const v1::UsageRecord& usage) {
  ops_.push_back({Family::kUsage, usage.account() + "/" + usage.user(), usage.SerializeAsString()});
}

void Mutation::PutQos(const v1::QosRecord& qos) {
  ops_.push_back({Family::kQos, qos.name(), qos.SerializeAsString()});
}

void Mutation::DeleteQos(const std::string& name) {
  ops_.push_back({Family::kQos, name, std::nullopt});
}

void Mutation::PutReservation(const v1::ReservationRecord& reservation) {
  ops_.push_back({Family::kReservations, reservation.name(), reservation.SerializeAsString()});
}

void Mutation::PutPartition(const v1::PartitionRecord& partition) {
  ops_.push_back({Family::kPartitions, partition.name(), partition.SerializeAsString()});
}

void Mutation::DeletePartition(const std::string& name) {
  ops_.push_back({Family::kPartitions, name, std::nullopt});
}

void Mutation::DeleteReservation(const std::string& name) {
  ops_.push_back({Family::kReservations, name, std::nullopt});
}

void Mutation::DeleteUsage(const std::string& account, const std::string& user) {
  ops_.push_back({Family::kUsage, account + "/" + user, std::nullopt});
}

void Mutation::PutMeta(const v1::MetaRecord& meta) {
  ops_.push_back({Family::kMeta, "meta", meta.SerializeAsString()});
}

void Mutation::PutJob(const v1::JobRecord& job) {
  ops_.push_back({Family::kJobs, JobKey(job.id()), job.SerializeAsString()});
}

void Mutation::DeleteJob(uint64_t id) {
  ops_.push_back({Family::kJobs, JobKey(id), std::nullopt});
  ops_.push_back({Family::kJobPayload, JobKey(id), std::nullopt});
}

void Mutation::PutJobPayload(uint64_t id, const v1::JobPayload& payload) {
  ops_.push_back({Family::kJobPayload, JobKey(id), payload.SerializeAsString()});
}

void Mutation::DeleteJobPayload(uint64_t id) {
  ops_.push_back({Family::kJobPayload, JobKey(id), std::nullopt});
}

void Mutation::PutNode(const v1::NodeRecord& node) {
  ops_.push_back({Family::kNodes, node.name(), node.SerializeAsString()});
}

void Mutation::ArchiveJob(const v1::JobRecord& job) {
  if (job.has_array()) {
    ops_.push_back({Family::kJobs, JobKey(job.id()), std::nullopt});
  } else {
    DeleteJob(job.id());
  }
  ops_.push_back({Family::kJobHistory, JobKey(job.id()), job.SerializeAsString()});
}

void Mutation::DeleteHistory(uint64_t id) {
  ops_.push_back({Family::kJobHistory, JobKey(id), std::nullopt});
}

void Mutation::PutRaw(Family family, std::string key, std::string value) {
  ops_.push_back({family, std::move(key), std::move(value)});
}

void Mutation::EraseRaw(Family family, std::string key) {
  ops_.push_back({family, std::move(key), std::nullopt});
}

void Mutation::PutReplicaPosition(const v1::ReplicaPosition& position) {
  ops_.push_back({Family::kReplica, "position", position.SerializeAsString()});
}

void Mutation::Append(const Mutation& other) {
  ops_.insert(ops_.end(), other.ops_.begin(), other.ops_.end());
}

namespace {
uint64_t KeyToId(const std::string& k) {
  uint64_t id = 0;
  for (unsigned char c : k) id = (id << 8) | c;
  return id;
}
}  // namespace

LoadedState DecodeAll(const std::vector<RawRecord>& raw, std::vector<RawRecord>* quarantine) {
  LoadedState out;
  auto bad = [&](const RawRecord& r, const std::string& why) {
    out.problems.push_back(std::string(FamilyName(r.family)) + " record (key " +
                           (r.family == Family::kJobs || r.family == Family::kJobHistory
                                ? "job " + std::to_string(KeyToId(r.key))
                                : "'" + r.key + "'") +
                           "): " + why + "; moved to quarantine");
    quarantine->push_back(r);
  };
  for (const RawRecord& r : raw) {
    switch (r.family) {
      case Family::kMeta: {
        v1::MetaRecord m;
        if (r.key != "meta" || !m.ParseFromString(r.value)) {
          bad(r, "does not parse");
        } else {
          out.meta = m;
        }
        break;
      }
      case Family::kJobs: {
        v1::JobRecord j;
        if (r.key.size() != 8 || !j.ParseFromString(r.value) || j.id() != KeyToId(r.key) ||
            j.id() == 0) {
          bad(r, "does not parse or its id does not match its key");
        } else {
          out.jobs.push_back(std::move(j));
        }
        break;
      }
      case Family::kNodes: {
        v1::NodeRecord n;
        if (!n.ParseFromString(r.value) || n.name() != r.key) {
          bad(r, "does not parse or its name does not match its key");
        } else {
          out.nodes.push_back(std::move(n));
        }
        break;
      }
      case Family::kAccounts: {
        v1::AccountRecord a;
        if (!a.ParseFromString(r.value) || a.name() != r.key) {
          bad(r, "does not parse or its name does not match its key");
        } else {
          out.accounts.push_back(std::move(a));
        }
        break;
      }
      case Family::kUsers: {
        v1::UserRecord u;
        if (!u.ParseFromString(r.value) || u.name() != r.key) {
          bad(r, "does not parse or its name does not match its key");
        } else {
          out.users.push_back(std::move(u));
        }
        break;
      }
      case Family::kUsage: {
        v1::UsageRecord u;
        if (!u.ParseFromString(r.value) || u.account() + "/" + u.user() != r.key ||
            !(u.usage() >= 0)) {
          bad(r, "does not parse or does not match its key");
        } else {
          out.usage.push_back(std::move(u));
        }
        break;
      }
      case Family::kQos: {
        v1::QosRecord q;
        if (!q.ParseFromString(r.value) || q.name() != r.key) {
          bad(r, "does not parse or its name does not match its key");
        } else {
          out.qos.push_back(std::move(q));
        }
        break;
      }
      case Family::kReservations: {
        v1::ReservationRecord rr;
        if (!rr.ParseFromString(r.value) || rr.name() != r.key || rr.end_ms() <= rr.start_ms() ||
            rr.gpus_size() > rr.nodes_size()) {
          bad(r, "does not parse, does not match its key or has no time span");
        } else {
          out.reservations.push_back(std::move(rr));
        }
        break;
      }
      case Family::kPartitions: {
        v1::PartitionRecord p;
        if (!p.ParseFromString(r.value) || p.name() != r.key) {
          bad(r, "does not parse or its name does not match its key");
        } else {
          out.partitions.push_back(std::move(p));
        }
        break;
      }
      case Family::kJobHistory:
        if (r.key.size() == 8)
          out.max_history_job_id = std::max(out.max_history_job_id, KeyToId(r.key));
        break;
      case Family::kQuarantine:
      case Family::kJobPayload:  // read at launch, never at recovery
      case Family::kAudit:       // read by `muster audit`, never at recovery
      case Family::kReplica:     // a standby's bookkeeping
        break;
    }
  }
  return out;
}

}  // namespace muster::store
