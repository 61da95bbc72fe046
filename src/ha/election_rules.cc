#include "election_rules.h"

namespace muster::ha {

CampaignVerdict JudgeCampaign(const etcdserverpb::TxnResponse& resp, int64_t our_lease,
                              const std::string& candidate) {
  CampaignVerdict v;
  if (resp.succeeded()) {
    // Our write went in at this revision: the key's create revision, our epoch.
    if (resp.header().revision() <= 0 || our_lease <= 0) return v;
    v.kind = CampaignVerdict::kWeLead;
    v.leader = Leadership{candidate, resp.header().revision(), our_lease};
    return v;
  }
  // Not written: the failure branch read the key.
  if (resp.responses_size() != 1 || !resp.responses(0).has_response_range()) return v;
  const etcdserverpb::RangeResponse& range = resp.responses(0).response_range();
  if (range.kvs_size() == 0) {
    v.kind = CampaignVerdict::kNobodyLeads;
    return v;
  }
  if (range.kvs_size() != 1) return v;  // a read of one key
  const etcdserverpb::KeyValue& kv = range.kvs(0);
  if (kv.create_revision() <= 0 || kv.lease() < 0) return v;  // no epoch to fence with
  v.leader = Leadership{kv.value(), kv.create_revision(), kv.lease()};
  v.mod_revision = kv.mod_revision();
  if (kv.lease() == 0) {
    // No candidate writes a key without a lease: it would never expire, and no controller
    // would ever lead again.
    v.kind = CampaignVerdict::kForeignKey;
  } else if (kv.lease() == our_lease) {
    v.kind = CampaignVerdict::kWeLead;  // from an attempt whose answer was lost
  } else {
    v.kind = CampaignVerdict::kOtherLeads;
  }
  return v;
}

std::string LeadLostInRead(const etcdserverpb::RangeResponse& now, int64_t epoch, int64_t lease) {
  if (now.kvs_size() == 0) return "the leader key vanished";
  if (now.kvs_size() != 1) return "etcd answered a read of the leader key with several keys";
  const etcdserverpb::KeyValue& kv = now.kvs(0);
  if (kv.create_revision() != epoch || kv.mod_revision() != epoch || kv.lease() != lease) {
    return "the leader key was changed under it";
  }
  return "";
}

WatchVerdict JudgeWatch(const etcdserverpb::WatchResponse& event) {
  // Any event on the key after the read that found it ours is a change by someone else.
  if (event.events_size() > 0) {
    return event.events(0).type() == etcdserverpb::Event::DELETE ? WatchVerdict::kDeleted
                                                                 : WatchVerdict::kOverwritten;
  }
  if (event.canceled() || event.compact_revision() != 0) return WatchVerdict::kRestart;
  return WatchVerdict::kKeepWatching;
}

int64_t JudgeKeepAlive(const etcdserverpb::LeaseKeepAliveResponse& resp, int64_t lease) {
  if (resp.id() != lease) return -1;
  return resp.ttl() > 0 ? resp.ttl() : 0;  // none left: gone (the safe reading of a negative)
}

}  // namespace muster::ha
