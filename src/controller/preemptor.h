// Preemption: after each pass, the highest-priority jobs that could not start and whose QoS
// names others in its preempt list get room by stopping whole running jobs of those QoS, jobs of a
// partition with a higher priority_tier by stopping jobs of lower-tier partitions whose
// preempt_mode allows it, and jobs whose account's guaranteed GPU quota has room for them take
// back GPUs lent out, by stopping whole jobs marked borrowed (quota_book.h). The core picks the
// victims, gang- and topology-aware. Victims get their --signal (or SIGTERM), their QoS's (or,
// preempted by tier, their partition's) grace_time, then SIGKILL, and are requeued (or end
// PREEMPTED under preempt_mode cancel). A preemptor whose victims are still leaving preempts
// nothing more; a job that started less than preempt_min_runtime ago is not a candidate; the
// preempt lists never form a circle (qos_manager.h), so two jobs cannot push each other off in
// turn.
//
// Strand-confined.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster_views.h"
#include "engine_context.h"
#include "job_manager.h"
#include "muster/core/preemption.h"
#include "qos_manager.h"
#include "quota_book.h"
#include "resource_ledger.h"

namespace muster::controller {

class Preemptor {
 public:
  Preemptor(EngineContext& ctx, JobManager& jobs, const QosManager& qos,
            const ResourceLedger& ledger, const ClusterViews& views, const QuotaBook& quotas);

  // Looks at the pass's waiting jobs (called after it was applied).
  void AfterPass(const core::SchedulePass& pass, TimeMs now);
  // Before a pass: suspended jobs whose CPUs are free again and whose preemptor no longer waits
  // for them continue, oldest suspension first, ahead of any pending job.
  void ResumeSuspended(TimeMs now);

  // Jobs waiting for the victims they preempted to leave (for explanations and tests).
  const std::map<uint64_t, std::vector<uint64_t>>& waiting() const { return waiting_; }
  // Jobs preempted (requeued, cancelled or suspended) since the controller started.
  uint64_t preempted() const { return preempted_; }
  void ContinueCount(uint64_t preempted) { preempted_ = preempted; }
  // A replacement engine's (ControllerRunner::Reconfigure): the preemptors whose victims are
  // still leaving stay first in line, and preempt no second set meanwhile.
  void ContinueWaiting(const Preemptor& previous);

 private:
  // Why a victim gives way: it decides the victim's preempt_mode and grace time.
  enum class Cause { kQos, kTier, kQuota };
  // How a victim gives way, and its signal-to-SIGKILL time.
  struct GiveWay {
    v1::PreemptMode mode = v1::PREEMPT_REQUEUE;
    uint64_t grace_ms = 0;
  };
  struct PartitionPolicy {
    uint32_t tier = 1;
    bool preemptable = false;  // preempt_mode is not off
    GiveWay give_way;
  };

  bool MayPreempt(const JobEntry& preemptor) const;
  // Whether one of the job's partitions has a higher tier than some preemptable partition.
  bool TierPreempts(const JobEntry& preemptor) const;
  GiveWay GiveWayOf(const v1::JobRecord& victim, Cause cause) const;
  // Whether a preemptor's earlier victims still hold resources.
  bool VictimsLeaving(uint64_t preemptor) const;
  void Preempt(JobEntry& victim, const JobEntry& preemptor, Cause cause, const std::string& why,
               TimeMs now, store::Mutation& m);
  // A running job as a candidate, or nullopt when the ledger does not hold all of it. A job
  // that would be suspended frees only its CPUs.
  std::optional<core::PreemptCandidate> Candidate(const JobEntry& job, bool suspend) const;
  using QuotaUsage = std::map<std::pair<std::string, std::string>, uint64_t>;
  // On GPUs under quotas, whether a plan with victims by QoS or tier lets the preemptor run
  // within its account's guarantee. Preempting to run on borrowed GPUs only moves the loss
  // around: the owner takes them back, the victim returns, and so on.
  bool EndsWithinGuarantee(const JobEntry& preemptor, const std::string& type,
                           const core::PreemptionPlan& plan,
                           const std::map<uint64_t, Cause>& causes, const QuotaUsage& usage) const;

  EngineContext& ctx_;
  JobManager& jobs_;
  const QosManager& qos_;
  const ResourceLedger& ledger_;
  const ClusterViews& views_;
  const QuotaBook& quotas_;
  std::map<std::string, PartitionPolicy> partitions_;
  uint32_t lowest_preemptable_tier_ = UINT32_MAX;      // UINT32_MAX: no partition is preemptable
  std::map<uint64_t, std::vector<uint64_t>> waiting_;  // preemptor -> its victims
  uint64_t preempted_ = 0;
};

}  // namespace muster::controller
