// etcd's answers as the election judges them (src/ha/election_rules.h): the first byte picks
// the reply (0 campaign transaction, 1 read of the leader key, 2 watch message, 3 lease
// renewal), the rest is that message's bytes. Whatever arrives, a lead is only ever our own
// write or a key under our own lease, a key the read finds touched is never kept, and a renewal
// counts only for our lease.
#include "election_rules.h"
#include "fuzz_check.h"

namespace {
constexpr int64_t kLease = 77;
constexpr int64_t kEpoch = 9;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace muster::ha;
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      etcdserverpb::TxnResponse r;
      if (!r.ParseFromString(bytes)) return 0;
      const CampaignVerdict v = JudgeCampaign(r, kLease, "me");
      if (v.kind == CampaignVerdict::kWeLead) {
        FUZZ_CHECK(v.leader.lease == kLease && v.leader.epoch > 0);
        FUZZ_CHECK(r.succeeded() || r.responses(0).response_range().kvs(0).lease() == kLease);
      }
      if (v.kind == CampaignVerdict::kOtherLeads) {
        FUZZ_CHECK(v.leader.lease > 0 && v.leader.lease != kLease && v.leader.epoch > 0);
      }
      if (v.kind == CampaignVerdict::kForeignKey) FUZZ_CHECK(v.leader.lease == 0);
      if (v.kind == CampaignVerdict::kNobodyLeads) FUZZ_CHECK(!r.succeeded());
      break;
    }
    case 1: {
      etcdserverpb::RangeResponse r;
      if (!r.ParseFromString(bytes)) return 0;
      if (LeadLostInRead(r, kEpoch, kLease).empty()) {
        FUZZ_CHECK(r.kvs_size() == 1 && r.kvs(0).create_revision() == kEpoch &&
                   r.kvs(0).mod_revision() == kEpoch && r.kvs(0).lease() == kLease);
      }
      break;
    }
    case 2: {
      etcdserverpb::WatchResponse r;
      if (!r.ParseFromString(bytes)) return 0;
      const WatchVerdict v = JudgeWatch(r);
      if (r.events_size() > 0) {
        FUZZ_CHECK(v == WatchVerdict::kDeleted || v == WatchVerdict::kOverwritten);
      }
      if (v == WatchVerdict::kKeepWatching) {
        FUZZ_CHECK(!r.canceled() && r.compact_revision() == 0);
      }
      break;
    }
    default: {
      etcdserverpb::LeaseKeepAliveResponse r;
      if (!r.ParseFromString(bytes)) return 0;
      const int64_t ttl = JudgeKeepAlive(r, kLease);
      FUZZ_CHECK(ttl >= -1);
      if (ttl >= 0) FUZZ_CHECK(r.id() == kLease && (ttl == r.ttl() || (ttl == 0 && r.ttl() < 0)));
      break;
    }
  }
  return 0;
}
