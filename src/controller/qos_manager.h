// Qualities of service: from the config's [[qos]] and from admins' commands (persisted in the
// store), as accounts are (account_manager.h): the config's are applied at every start and
// changed only there. "normal" always exists (priority 0, no limits) unless the config defines
// it. Which QoS preempts which is one-way: a change that would close a circle is refused.
//
// Strand-confined.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine_context.h"
#include "muster/controller/engine.h"
#include "muster/store/state_store.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {

class QosManager {
 public:
  explicit QosManager(EngineContext& ctx);

  // At recovery: the stored records with the config applied over them; what changes in the
  // store goes into `m`.
  void Restore(const std::vector<v1::QosRecord>& stored, store::Mutation& m);

  const v1::QosRecord* Find(const std::string& name) const;
  bool Exists(const std::string& name) const { return Find(name) != nullptr; }
  const std::map<std::string, v1::QosRecord>& all() const { return qos_; }
  // The QoS priority factor (0..1): the QoS's priority over the highest QoS priority.
  double PriorityFactor(const std::string& name) const;
  // Whether jobs of `preemptor` may preempt running jobs of `victim`.
  bool Preempts(const std::string& preemptor, const std::string& victim) const;
  // Whether any QoS preempts another (a site that names none has no preemption).
  bool AnyPreemption() const { return any_preemption_; }

  // Admins only. `in_use` says whether unfinished jobs or accounts use a QoS (it then stays).
  Status Update(const Caller& caller, const v1::UpdateQosRequest& req,
                const std::function<std::string(const std::string&)>& in_use);

 private:
  // Derived figures, after every change.
  void Reindex();
  // The preempt lists name known QoS and never close a circle.
  Status CheckPreemptGraph(const std::map<std::string, v1::QosRecord>& all) const;

  EngineContext& ctx_;
  std::map<std::string, v1::QosRecord> qos_;
  uint32_t max_priority_ = 0;
  bool any_preemption_ = false;
};

}  // namespace muster::controller
