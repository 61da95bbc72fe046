// The leader's side of a hot standby: every change the leader's store commits, numbered in order
// (seq 1, 2, ... within the leader's epoch) and kept a while for standbys to read, and the set of
// standbys in sync. A standby is in sync once it has acknowledged every change; from then on the
// leader's syncs (ReplicatingStore) wait for its acknowledgement too, so what the leader
// acknowledges to anyone is on every in-sync standby's disk. A standby that stops acknowledging
// within ack_timeout is dropped from the set (Membership first: published where a candidate's
// right to take over is decided, etcd) and the leader goes on alone.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/store/state_store.h"

namespace muster::store {

class ReplicationLog {
 public:
  struct Options {
    uint64_t leader_epoch = 0;
    size_t max_bytes = 256u << 20;  // changes kept for standbys; older ones need a snapshot
    std::chrono::milliseconds ack_timeout{2000};
  };
  // Publishes a standby's joining (true) or leaving (false) the in-sync set; an error keeps the
  // leader from going on without it. Empty: the set lives in memory only.
  using Membership = std::function<Status(const std::string& standby, bool in_sync)>;

  ReplicationLog(Options options, Membership membership);

  // The change just committed (ReplicatingStore, under its commit lock): returns its seq.
  uint64_t Append(const Mutation& m);
  uint64_t last_seq() const;
  uint64_t leader_epoch() const { return options_.leader_epoch; }

  // Serialized batches (v1::ReplicatedBatch) after `after`, up to about `max_bytes`, waiting up
  // to `wait` for the first. false when `after` is older than what is kept (or newer than the
  // last change): the standby needs a snapshot.
  using Batch = std::shared_ptr<const std::string>;
  bool Read(uint64_t after, size_t max_bytes, std::chrono::milliseconds wait,
            std::vector<Batch>* out);

  // A standby has every change up to `seq` on disk. One that has them all joins the in-sync set.
  void Acked(const std::string& standby, uint64_t seq);
  // Its stream ended: it leaves the in-sync set now rather than at the next sync's timeout.
  void Detached(const std::string& standby);
  // Waits until every in-sync standby has acknowledged `seq`; drops those that do not within
  // ack_timeout. An error when one could not be dropped (the leader must not acknowledge).
  Status WaitForStandbys(uint64_t seq);
  std::vector<std::string> in_sync() const;
  // Every standby heard from lately (a few dozen at most), in sync or not: its last
  // acknowledgement and when (epoch ms), for sdiag.
  struct StandbyView {
    std::string name;
    bool in_sync = false;
    uint64_t acked = 0;
    int64_t acked_at_ms = 0;
  };
  std::vector<StandbyView> standbys() const;
  // Wakes every waiter: Read returns, WaitForStandbys fails.
  void Stop();

 private:
  struct Standby {
    uint64_t acked = 0;
    bool in_sync = false;    // the leader's syncs wait for it
    bool published = false;  // Membership said so
  };
  Status Drop(std::unique_lock<std::mutex>& l, const std::string& name);

  const Options options_;
  const Membership membership_;
  std::mutex membership_mu_;  // held across a Membership call; taken before mu_
  mutable std::mutex mu_;
  std::condition_variable changed_;  // a change appended, an ack, a stop
  std::deque<std::pair<uint64_t, Batch>> kept_;
  size_t kept_bytes_ = 0;
  uint64_t last_seq_ = 0;
  std::map<std::string, Standby> standbys_;
  // The last acknowledgement of each standby heard from, kept past a drop (mu_).
  std::map<std::string, std::pair<uint64_t, int64_t>> heard_;
  bool stopped_ = false;
};

}  // namespace muster::store
