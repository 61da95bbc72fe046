// What a candidate concludes from etcd's answers, as pure functions over the replies: the
// campaign's guarded write, the leader's reads and watch of its key, and its lease renewals.
// EtcdElection acts on these verdicts; keeping them apart lets the tests and the fuzzer feed them
// any reply an etcd (or whoever answers in its place) might send, without an etcd.
#pragma once

#include <cstdint>
#include <string>

#include "etcd/election.pb.h"
#include "muster/ha/etcd_election.h"

namespace muster::ha {

// The answer to the campaign's "create the leader key unless it exists" transaction.
struct CampaignVerdict {
  enum Kind {
    kWeLead,       // our write went in, or the key is ours from an attempt whose answer was lost
    kNobodyLeads,  // the key is absent, yet the write did not go in (a hot standby's rule)
    kOtherLeads,   // someone else holds the key: `leader`
    kForeignKey,   // a key under no lease: no candidate wrote it (another etcd client did)
    kUnclear,      // an answer that says none of these: ask again
  };
  Kind kind = kUnclear;
  Leadership leader;         // kWeLead, kOtherLeads, kForeignKey: who holds the key, from when
  int64_t mod_revision = 0;  // kForeignKey: which write of it to remove
};
// `candidate`: our name, the leader we are when we lead.
CampaignVerdict JudgeCampaign(const etcdserverpb::TxnResponse& resp, int64_t our_lease,
                              const std::string& candidate);

// Whether the leader key, as a read shows it, is still the one we created (`epoch`, under
// `lease`, never modified since). Empty: it is; else why the lead is lost.
std::string LeadLostInRead(const etcdserverpb::RangeResponse& now, int64_t epoch, int64_t lease);

// One message of the watch on our leader key.
enum class WatchVerdict {
  kKeepWatching,  // progress or the watch's creation
  kRestart,       // the watch ended (cancelled, compacted): read the key again and re-watch
  kDeleted,       // the key was deleted: the lead is lost
  kOverwritten,   // the key was written again: the lead is lost
};
WatchVerdict JudgeWatch(const etcdserverpb::WatchResponse& event);

// One answer to a renewal of `lease`: the TTL etcd granted (> 0: renewed), 0 (etcd no longer
// has the lease: a TTL of 0 or less), or -1 when the answer is not about our lease (no answer,
// as far as we know).
int64_t JudgeKeepAlive(const etcdserverpb::LeaseKeepAliveResponse& resp, int64_t lease);

}  // namespace muster::ha
