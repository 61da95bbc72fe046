// musterctld --check-state: a state directory opened read-only and every record decoded as
// recovery would, plus what recovery does not read (the job history, the payloads).
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <memory>

#include "muster/store/state_store.h"

namespace muster::store {
namespace {

std::string JobOfKey(const std::string& key) {
  uint64_t id = 0;
  for (unsigned char c : key) id = (id << 8) | c;
  return "job " + std::to_string(id);
}

}  // namespace

Result<StateCheck> CheckStateDir(const std::string& dir) {
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names);
  if (!s.ok())
    return FailedPrecondition("cannot read a state store in " + dir + ": " + s.ToString());
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const std::string& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw_db = nullptr;
  // Read-only: no lock, no write, so a running controller is not disturbed.
  s = rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir, cfs, &handles, &raw_db);
  if (!s.ok()) return DataLoss("cannot open the state store in " + dir + ": " + s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw_db);
  StateCheck check;
  std::vector<RawRecord> raw;
  Status result = Status::Ok();
  for (size_t i = 0; i < names.size() && result.ok(); ++i) {
    if (names[i] == rocksdb::kDefaultColumnFamilyName) continue;
    int family = -1;
    for (int f = 0; f < kNumFamilies; ++f) {
      if (names[i] == FamilyName(static_cast<Family>(f))) family = f;
    }
    if (family < 0) {
      check.problems.push_back("unknown record family '" + names[i] + "' (a newer musterctld's?)");
      continue;
    }
    const Family fam = static_cast<Family>(family);
    uint64_t n = 0;
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, handles[i]));
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++n) {
      const std::string key = it->key().ToString();
      if (fam == Family::kJobHistory) {
        v1::JobRecord j;
        if (!j.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())) ||
            Mutation::JobKey(j.id()) != key) {
          check.problems.push_back("job_history record (key " + JobOfKey(key) +
                                   "): does not parse or does not match its key");
        }
        raw.push_back({fam, key, ""});
      } else if (fam == Family::kJobPayload) {
        v1::JobPayload p;
        if (!p.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
          check.problems.push_back("job_payload record (key " + JobOfKey(key) +
                                   "): does not parse");
        }
      } else if (fam != Family::kQuarantine && fam != Family::kAudit) {
        raw.push_back({fam, key, it->value().ToString()});
      }
    }
    if (!it->status().ok()) {
      result =
          DataLoss(std::string("cannot read ") + FamilyName(fam) + ": " + it->status().ToString());
    }
    if (fam == Family::kQuarantine) check.quarantined = n;
    check.records.emplace_back(FamilyName(fam), n);
  }
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  MUSTER_RETURN_IF_ERROR(result);
  std::vector<RawRecord> quarantine;
  LoadedState state = DecodeAll(raw, &quarantine);
  for (std::string& p : state.problems) {
    // Nothing is moved by a check: say what recovery would do.
    const std::string moved = "; moved to quarantine";
    if (p.size() > moved.size() && p.ends_with(moved)) {
      p.resize(p.size() - moved.size());
      p += "; recovery would quarantine it";
    }
    check.problems.push_back(std::move(p));
  }
  if (!state.meta) check.problems.push_back("no meta record (the epoch and next job id)");
  return check;
}

}  // namespace muster::store
