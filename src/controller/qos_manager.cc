#include "qos_manager.h"

#include <spdlog/spdlog.h>

#include <set>

#include "limit_tracker.h"
#include "live_records.h"
#include "muster/common/strings.h"
#include "muster/controller/access.h"

namespace muster::controller {
namespace {

v1::QosRecord FromConfig(const QosConfig& c) {
  v1::QosRecord q;
  q.set_name(c.name);
  q.set_description(c.description);
  q.set_priority(c.priority);
  for (const std::string& p : c.preempt) q.add_preempt(p);
  q.set_preempt_mode(c.preempt_mode == "cancel"    ? v1::PREEMPT_CANCEL
                     : c.preempt_mode == "suspend" ? v1::PREEMPT_SUSPEND
                                                   : v1::PREEMPT_REQUEUE);
  q.set_usage_factor(c.usage_factor);
  q.set_grace_time_ms(c.grace_time_ms);
  q.set_deny_on_limit(c.deny_on_limit);
  *q.mutable_limits() = ToLimitsRecord(c.limits);
  q.set_from_config(true);
  return q;
}

v1::QosRecord Normal() {
  v1::QosRecord q;
  q.set_name("normal");
  q.set_description("the default quality of service");
  q.set_preempt_mode(v1::PREEMPT_REQUEUE);
  q.set_usage_factor(1.0);
  return q;
}

}  // namespace

QosManager::QosManager(EngineContext& ctx) : ctx_(ctx) {
  qos_["normal"] = Normal();
  Reindex();
}

void QosManager::Restore(const std::vector<v1::QosRecord>& stored, store::Mutation& m) {
  std::set<std::string> configured;
  for (const QosConfig& q : ctx_.config().qos) configured.insert(q.name);
  for (const v1::QosRecord& q : stored) {
    if (q.from_config() && !configured.count(q.name())) {
      spdlog::info("qos {} is no longer in the config; removed", q.name());
      m.DeleteQos(q.name());
      continue;
    }
    if (!q.from_config() && configured.count(q.name())) continue;  // the config's wins
    qos_[q.name()] = q;
  }
  for (const QosConfig& c : ctx_.config().qos) {
    v1::QosRecord q = FromConfig(c);
    auto it = qos_.find(c.name);
    if (it == qos_.end() || it->second.SerializeAsString() != q.SerializeAsString()) m.PutQos(q);
    qos_[c.name] = std::move(q);
  }
  // A live QoS may name one the config dropped: that name goes from its list.
  for (auto& [name, q] : qos_) {
    auto* list = q.mutable_preempt();
    const int before = list->size();
    list->erase(std::remove_if(list->begin(), list->end(),
                               [&](const std::string& p) { return !qos_.count(p); }),
                list->end());
    if (list->size() != before && !q.from_config()) m.PutQos(q);
  }
  if (Status s = CheckPreemptGraph(qos_); !s.ok()) {
    // Live lists combined with a new config closed a circle: live preempt lists yield.
    spdlog::error("qos: {}; the preempt lists of live QoS are cleared", s.message());
    for (auto& [name, q] : qos_) {
      if (!q.from_config() && q.preempt_size() > 0) {
        q.clear_preempt();
        m.PutQos(q);
      }
    }
  }
  Reindex();
}

void QosManager::Reindex() {
  max_priority_ = 0;
  any_preemption_ = false;
  for (const auto& [name, q] : qos_) {
    max_priority_ = std::max(max_priority_, q.priority());
    any_preemption_ = any_preemption_ || q.preempt_size() > 0;
  }
}

const v1::QosRecord* QosManager::Find(const std::string& name) const {
  auto it = qos_.find(name.empty() ? std::string("normal") : name);
  return it == qos_.end() ? nullptr : &it->second;
}

double QosManager::PriorityFactor(const std::string& name) const {
  const v1::QosRecord* q = Find(name);
  if (!q || max_priority_ == 0) return 0;
  return static_cast<double>(q->priority()) / max_priority_;
}

bool QosManager::Preempts(const std::string& preemptor, const std::string& victim) const {
  const v1::QosRecord* q = Find(preemptor);
  if (!q) return false;
  const std::string& v = victim.empty() ? std::string("normal") : victim;
  return std::find(q->preempt().begin(), q->preempt().end(), v) != q->preempt().end();
}

Status QosManager::CheckPreemptGraph(const std::map<std::string, v1::QosRecord>& all) const {
  for (const auto& [name, q] : all) {
    std::set<std::string> seen;
    std::vector<std::string> todo(q.preempt().begin(), q.preempt().end());
    while (!todo.empty()) {
      const std::string at = todo.back();
      todo.pop_back();
      auto it = all.find(at);
      if (it == all.end())
        return NotFound("qos " + name + " preempts " + at + ", which does not exist");
      if (at == name) {
        return InvalidArgument("qos " + name +
                               " would preempt itself through its preempt list: "
                               "preemption must not go in a circle");
      }
      if (!seen.insert(at).second) continue;
      todo.insert(todo.end(), it->second.preempt().begin(), it->second.preempt().end());
    }
  }
  return Status::Ok();
}

Status QosManager::Update(const Caller& caller, const v1::UpdateQosRequest& req,
                          const std::function<std::string(const std::string&)>& in_use) {
  MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kChangeQos));
  const std::string& name = req.name();
  if (!IsValidAccountName(name)) {
    return InvalidArgument("bad qos name '" + name.substr(0, 64) +
                           "': letters, digits, '.', '_' and '-'");
  }
  if (req.has_description() && req.description().size() > 1024) {
    return InvalidArgument("a QoS's description is at most 1024 bytes");
  }
  if (req.has_priority() && req.priority() > 1'000'000) {
    return InvalidArgument("a QoS's priority is between 0 and 1000000");
  }
  if (req.has_usage_factor() && !(req.usage_factor() >= 0 && req.usage_factor() <= 1000)) {
    return InvalidArgument("usage_factor is between 0 and 1000");
  }
  if (req.has_grace_time_ms() && req.grace_time_ms() > 365ULL * 86'400'000) {
    return InvalidArgument("grace_time is at most a year");
  }
  if (req.has_preempt_mode() && req.preempt_mode() != v1::PREEMPT_REQUEUE &&
      req.preempt_mode() != v1::PREEMPT_CANCEL && req.preempt_mode() != v1::PREEMPT_SUSPEND) {
    return InvalidArgument("preempt_mode is requeue, cancel or suspend");
  }
  auto it = qos_.find(name);
  MUSTER_RETURN_IF_ERROR(CheckLiveChange(req.op(), "qos", name, it != qos_.end(),
                                         it != qos_.end() && it->second.from_config(),
                                         ctx_.config().source));
  store::Mutation m;
  if (req.op() == v1::ACCOUNT_OP_REMOVE) {
    if (name == "normal") return FailedPrecondition("qos normal always exists");
    for (const auto& [other, q] : qos_) {
      if (std::find(q.preempt().begin(), q.preempt().end(), name) != q.preempt().end()) {
        return FailedPrecondition("qos " + other + " preempts " + name + "; change it first");
      }
    }
    if (std::string user = in_use(name); !user.empty()) {
      return FailedPrecondition("qos " + name + " is still used by " + user);
    }
    m.DeleteQos(name);
    MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
    qos_.erase(it);
    Reindex();
    return Status::Ok();
  }
  v1::QosRecord q;
  if (it != qos_.end()) {
    q = it->second;
  } else {
    q.set_name(name);
    q.set_preempt_mode(v1::PREEMPT_REQUEUE);
    q.set_usage_factor(1.0);
  }
  if (req.has_description()) q.set_description(req.description());
  if (req.has_priority()) q.set_priority(req.priority());
  if (req.has_preempt_mode()) q.set_preempt_mode(req.preempt_mode());
  if (req.has_usage_factor()) q.set_usage_factor(req.usage_factor());
  if (req.has_grace_time_ms()) q.set_grace_time_ms(req.grace_time_ms());
  if (req.has_deny_on_limit()) q.set_deny_on_limit(req.deny_on_limit());
  if (req.has_preempt()) {
    q.clear_preempt();
    if (req.preempt().size() > 64 * 65) return InvalidArgument("a QoS preempts at most 64 others");
    for (const std::string& p : Split(req.preempt(), ',', true)) {
      if (p.size() > 64) return InvalidArgument("bad qos name in preempt");
      if (std::find(q.preempt().begin(), q.preempt().end(), p) == q.preempt().end()) {
        if (q.preempt_size() == 64) return InvalidArgument("a QoS preempts at most 64 others");
        q.add_preempt(p);
      }
    }
  }
  MUSTER_RETURN_IF_ERROR(PatchLimits(req.limits(), q.mutable_limits()));
  std::map<std::string, v1::QosRecord> after = qos_;
  after[name] = q;
  MUSTER_RETURN_IF_ERROR(CheckPreemptGraph(after));
  m.PutQos(q);
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  qos_[name] = std::move(q);
  Reindex();
  return Status::Ok();
}

}  // namespace muster::controller
