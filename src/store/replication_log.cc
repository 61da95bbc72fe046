#include "muster/store/replication_log.h"

#include <algorithm>
#include <chrono>

#include "muster/v1/replication.pb.h"

namespace muster::store {

ReplicationLog::ReplicationLog(Options options, Membership membership)
    : options_(options), membership_(std::move(membership)) {}

uint64_t ReplicationLog::Append(const Mutation& m) {
  v1::ReplicatedBatch b;
  for (const Mutation::Op& op : m.ops()) {
    v1::ReplicatedOp* o = b.add_ops();
    o->set_family(static_cast<uint32_t>(op.family));
    o->set_key(op.key);
    if (op.value) {
      o->set_value(*op.value);
    } else {
      o->set_erase(true);
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  b.set_seq(++last_seq_);
  kept_.emplace_back(last_seq_, std::make_shared<const std::string>(b.SerializeAsString()));
  kept_bytes_ += kept_.back().second->size();
  while (kept_bytes_ > options_.max_bytes && kept_.size() > 1) {
    kept_bytes_ -= kept_.front().second->size();
    kept_.pop_front();
  }
  changed_.notify_all();
  return last_seq_;
}

uint64_t ReplicationLog::last_seq() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_seq_;
}

bool ReplicationLog::Read(uint64_t after, size_t max_bytes, std::chrono::milliseconds wait,
                          std::vector<Batch>* out) {
  std::unique_lock<std::mutex> l(mu_);
  if (after > last_seq_) return false;
  changed_.wait_for(l, wait, [&] { return stopped_ || last_seq_ > after; });
  if (last_seq_ == after) return true;
  if (kept_.empty() || kept_.front().first > after + 1) return false;  // trimmed meanwhile
  size_t bytes = 0;
  for (auto it = kept_.begin() + static_cast<std::ptrdiff_t>(after + 1 - kept_.front().first);
       it != kept_.end() && (out->empty() || bytes < max_bytes); ++it) {
    out->push_back(it->second);
    bytes += it->second->size();
  }
  return true;
}

void ReplicationLog::Acked(const std::string& standby, uint64_t seq) {
  {
    std::lock_guard<std::mutex> l(mu_);
    Standby& s = standbys_[standby];
    s.acked = std::max(s.acked, seq);
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    if (!heard_.count(standby) && heard_.size() >= 32) {
      // Bounded: the one heard from longest ago makes room.
      heard_.erase(std::min_element(heard_.begin(), heard_.end(), [](const auto& a, const auto& b) {
        return a.second.second < b.second.second;
      }));
    }
    heard_[standby] = {s.acked, now_ms};
    // It has everything appended so far, and every later sync waits for it: from here on all
    // that the leader acknowledges is on its disk, so it may be published as in sync.
    if (!s.in_sync && s.acked >= last_seq_) s.in_sync = true;
    changed_.notify_all();
    if (!s.in_sync || s.published || stopped_) return;
    if (!membership_) {
      s.published = true;
      return;
    }
  }
  // One publication at a time, so that a drop's "out" never lands before a join's "in".
  std::lock_guard<std::mutex> m(membership_mu_);
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = standbys_.find(standby);
    if (it == standbys_.end() || !it->second.in_sync || it->second.published || stopped_) return;
  }
  Status st = membership_(standby, true);
  std::lock_guard<std::mutex> l(mu_);
  auto it = standbys_.find(standby);
  if (st.ok() && it != standbys_.end() && it->second.in_sync) it->second.published = true;
}

Status ReplicationLog::Drop(std::unique_lock<std::mutex>& l, const std::string& name) {
  if (membership_ && !stopped_) {
    l.unlock();
    std::lock_guard<std::mutex> m(membership_mu_);  // after a join's publication, if one is on
    l.lock();
    auto it = standbys_.find(name);
    if (it == standbys_.end()) return Status::Ok();  // dropped meanwhile
    // Only what was published needs taking back; and a stopped leader acknowledges nothing
    // more, so the standbys it had keep their standing (they have all it acknowledged).
    if (it->second.published && !stopped_) {
      l.unlock();
      Status st = membership_(name, false);
      l.lock();
      if (!st.ok()) return st.Prepend("cannot drop standby " + name + " from the in-sync set");
    }
  }
  standbys_.erase(name);
  changed_.notify_all();
  return Status::Ok();
}

void ReplicationLog::Detached(const std::string& standby) {
  std::unique_lock<std::mutex> l(mu_);
  if (standbys_.count(standby)) Drop(l, standby).IgnoreError();  // else the next sync drops it
}

Status ReplicationLog::WaitForStandbys(uint64_t seq) {
  std::unique_lock<std::mutex> l(mu_);
  const auto deadline = std::chrono::steady_clock::now() + options_.ack_timeout;
  auto laggard = [&]() -> const std::string* {
    for (const auto& [name, s] : standbys_) {
      if (s.in_sync && s.acked < seq) return &name;
    }
    return nullptr;
  };
  changed_.wait_until(l, deadline, [&] { return stopped_ || !laggard(); });
  if (stopped_) return Unavailable("replication stopped");
  while (const std::string* name = laggard()) {
    const std::string copy = *name;
    MUSTER_RETURN_IF_ERROR(Drop(l, copy));
  }
  return Status::Ok();
}

std::vector<std::string> ReplicationLog::in_sync() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> names;
  for (const auto& [name, s] : standbys_) {
    if (s.in_sync) names.push_back(name);
  }
  return names;
}

std::vector<ReplicationLog::StandbyView> ReplicationLog::standbys() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<StandbyView> out;
  for (const auto& [name, last] : heard_) {
    auto it = standbys_.find(name);
    out.push_back({name, it != standbys_.end() && it->second.in_sync, last.first, last.second});
  }
  return out;
}

void ReplicationLog::Stop() {
  std::lock_guard<std::mutex> l(mu_);
  stopped_ = true;
  changed_.notify_all();
}

}  // namespace muster::store
