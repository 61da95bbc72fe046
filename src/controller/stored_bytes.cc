#include "stored_bytes.h"

#include <algorithm>

namespace muster::controller {
namespace {

template <typename Map, typename Key>
uint64_t Get(const Map& m, const Key& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

// Adds or takes away `bytes`, dropping a key that reaches zero (a map of every user ever seen
// would only grow).
template <typename Map, typename Key>
void Move(Map& m, const Key& k, uint64_t bytes, int sign) {
  if (sign > 0) {
    m[k] += bytes;
    return;
  }
  auto it = m.find(k);
  if (it == m.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) m.erase(it);
}

}  // namespace

uint64_t PayloadBytesOf(const v1::JobSpec& spec) {
  uint64_t bytes = spec.script().size();
  for (const std::string& e : spec.environment()) bytes += e.size() + 1;  // its NUL at launch
  // The arguments stay in the record (up to 256 KiB): where else a flood would put its bytes.
  for (const std::string& a : spec.script_args()) bytes += a.size() + 1;
  return bytes;
}

uint64_t PayloadIdOf(const v1::JobRecord& rec) {
  return rec.has_array() ? rec.array().array_job_id() : rec.id();
}

void StoredBytes::Add(const v1::JobRecord& rec) {
  if (rec.payload_bytes() == 0) return;
  auto [it, inserted] = payloads_.try_emplace(PayloadIdOf(rec));
  if (!inserted) return;
  it->second.bytes = rec.payload_bytes();
  it->second.owner = {rec.spec().uid(), rec.spec().user(), rec.spec().account(), rec.spec().qos()};
  Count(it->second, +1);
}

void StoredBytes::Remove(uint64_t payload_id) {
  auto it = payloads_.find(payload_id);
  if (it == payloads_.end()) return;
  Count(it->second, -1);
  payloads_.erase(it);
}

void StoredBytes::Reown(const v1::JobRecord& rec) {
  auto it = payloads_.find(PayloadIdOf(rec));
  if (it == payloads_.end()) return;
  Count(it->second, -1);
  it->second.owner = {rec.spec().uid(), rec.spec().user(), rec.spec().account(), rec.spec().qos()};
  Count(it->second, +1);
}

void StoredBytes::Count(const Payload& p, int sign) {
  const Owner& o = p.owner;
  total_ = sign > 0 ? total_ + p.bytes : total_ - std::min(total_, p.bytes);
  if (sign > 0) {
    UserUse& u = by_user_[o.uid];
    u.user = o.user;
    u.bytes += p.bytes;
    ++u.payloads;
  } else if (auto it = by_user_.find(o.uid); it != by_user_.end()) {
    it->second.bytes -= std::min(it->second.bytes, p.bytes);
    if (it->second.payloads > 0) --it->second.payloads;
    if (it->second.payloads == 0) by_user_.erase(it);
  }
  Move(by_account_, o.account, p.bytes, sign);
  Move(by_account_user_, std::pair{o.account, o.uid}, p.bytes, sign);
  Move(by_qos_, o.qos, p.bytes, sign);
  Move(by_qos_user_, std::pair{o.qos, o.uid}, p.bytes, sign);
}

uint64_t StoredBytes::OfUser(uint32_t uid) const {
  auto it = by_user_.find(uid);
  return it == by_user_.end() ? 0 : it->second.bytes;
}

uint64_t StoredBytes::OfAccount(const std::string& account) const {
  return Get(by_account_, account);
}

uint64_t StoredBytes::OfAccountUser(const std::string& account, uint32_t uid) const {
  return Get(by_account_user_, std::pair{account, uid});
}

uint64_t StoredBytes::OfQos(const std::string& qos) const { return Get(by_qos_, qos); }

uint64_t StoredBytes::OfQosUser(const std::string& qos, uint32_t uid) const {
  return Get(by_qos_user_, std::pair{qos, uid});
}

std::vector<StoredBytes::UserUse> StoredBytes::Biggest(size_t n) const {
  std::vector<UserUse> all;
  all.reserve(by_user_.size());
  for (const auto& [uid, u] : by_user_) all.push_back(u);
  const size_t k = std::min(n, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(),
                    [](const UserUse& a, const UserUse& b) {
                      return a.bytes != b.bytes ? a.bytes > b.bytes : a.user < b.user;
                    });
  all.resize(k);
  return all;
}

StoredBytes::UserUse StoredBytes::OfUserRow(uint32_t uid) const {
  auto it = by_user_.find(uid);
  return it == by_user_.end() ? UserUse{} : it->second;
}

}  // namespace muster::controller
