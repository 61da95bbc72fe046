#include "active_tasks.h"

#include "array_tasks.h"
#include "muster/common/check.h"

namespace muster::controller {

namespace {
const std::string& QosKey(const v1::JobSpec& spec) {
  static const std::string kNormal = "normal";
  return spec.qos().empty() ? kNormal : spec.qos();
}

template <typename Map>
const ActiveTasks::Tally* Lookup(const Map& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

template <typename Map>
bool SameNonZero(const Map& a, const Map& b) {
  auto nonzero = [](const Map& m) {
    size_t n = 0;
    for (const auto& [k, t] : m) n += t.total > 0;
    return n;
  };
  if (nonzero(a) != nonzero(b)) return false;
  for (const auto& [k, t] : a) {
    if (t.total == 0) continue;
    const ActiveTasks::Tally* other = Lookup(b, k);
    if (!other || !(*other == t)) return false;
  }
  return true;
}
}  // namespace

uint64_t ActiveTasks::Tally::Of(uint32_t uid) const {
  auto it = by_uid.find(uid);
  return it == by_uid.end() ? 0 : it->second;
}

void ActiveTasks::Add(Tally& t, uint32_t uid, uint64_t n) {
  t.total += n;
  t.by_uid[uid] += n;
}

void ActiveTasks::Take(Tally& t, uint32_t uid, uint64_t n) {
  auto it = t.by_uid.find(uid);
  MUSTER_CHECK_MSG(t.total >= n && it != t.by_uid.end() && it->second >= n,
                   "a job leaves counts it was never in");
  t.total -= n;
  it->second -= n;
  if (it->second == 0) t.by_uid.erase(it);
}

void ActiveTasks::Recount(Counted& counted, const v1::JobRecord& rec) {
  const bool active = rec.state() == v1::PENDING || rec.state() == v1::RUNNING;
  const uint64_t tasks = active ? TasksOf(rec) : 0;
  const v1::JobSpec& spec = rec.spec();
  if (counted.tasks == tasks && tasks > 0 && counted.uid == spec.uid() &&
      *counted.account == spec.account() && *counted.qos == QosKey(spec)) {
    return;  // the common case: a change that moves no count
  }
  if (counted.tasks > 0) {
    Take(accounts_.at(*counted.account), counted.uid, counted.tasks);
    Take(qos_.at(*counted.qos), counted.uid, counted.tasks);
  }
  counted = Counted{};
  if (tasks == 0) return;
  auto account = accounts_.try_emplace(spec.account()).first;
  auto qos = qos_.try_emplace(QosKey(spec)).first;
  Add(account->second, spec.uid(), tasks);
  Add(qos->second, spec.uid(), tasks);
  counted = {&account->first, &qos->first, spec.uid(), tasks};
}

uint64_t ActiveTasks::OfAccount(const std::string& account) const {
  const Tally* t = Lookup(accounts_, account);
  return t ? t->total : 0;
}

uint64_t ActiveTasks::OfAccount(const std::string& account, uint32_t uid) const {
  const Tally* t = Lookup(accounts_, account);
  return t ? t->Of(uid) : 0;
}

uint64_t ActiveTasks::OfQos(const std::string& qos) const {
  const Tally* t = Lookup(qos_, qos);
  return t ? t->total : 0;
}

uint64_t ActiveTasks::OfQos(const std::string& qos, uint32_t uid) const {
  const Tally* t = Lookup(qos_, qos);
  return t ? t->Of(uid) : 0;
}

bool ActiveTasks::SameAs(const ActiveTasks& other) const {
  return SameNonZero(accounts_, other.accounts_) && SameNonZero(qos_, other.qos_);
}

}  // namespace muster::controller
