// Which CPUs, GPUs, memory and GRES units each job holds on each node, and what is free: the only
// place resources are held and released, and the only place an allocation changes between the
// records' form (node names, CPU ids, GRES by name and type) and the core's (node indices, GRES
// by pool). A holding is converted once, when it is taken; releasing it gives back exactly that.
//
// Invariants (CheckInvariants): a unit is free exactly when no job holds it (a suspended job's
// parked CPUs are not held); no unit is held twice; a GPU is never held whole and as shards at
// once; free memory is capacity minus holdings.
//
// Strand-confined.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/core/types.h"
#include "muster/v1/common.pb.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

class ResourceLedger {
 public:
  // Every configured node, in configuration order, with everything free.
  explicit ResourceLedger(const Config& config);

  size_t size() const { return nodes_.size(); }
  // Node i's capacity and free maps (its `schedulable` flag is the node manager's business).
  const core::NodeView& node(size_t i) const { return nodes_[i].view; }
  // The jobs holding resources on node i, with what each holds there.
  const std::map<uint64_t, core::NodePlacement>& held(size_t i) const { return nodes_[i].held; }
  bool Holds(size_t node, uint64_t job) const { return nodes_[node].held.count(job) > 0; }

  // A job the scheduler starts holds its placement. REQUIRES: Fits(placement).
  void Hold(uint64_t job, const core::Placement& placement);
  // A recovered record holds what it held before: every node of a running job's allocation, a
  // finished or requeued job's nodes still cleaning up. What a node does not have any more (the
  // config changed) or what is already held is dropped and logged: nothing is held twice.
  void HoldRecovered(const v1::JobRecord& rec,
                     const std::function<std::optional<size_t>(const std::string&)>& index_of);
  // The job gives back what it held on node i (parked CPUs included). False when it held
  // nothing there.
  bool Release(uint64_t job, size_t i);

  // Suspend preemption: a suspended job's CPUs on node i are parked (free for others; its GPUs,
  // memory and GRES stay held), and taken back when it resumes. Unpark REQUIRES CpusBack.
  void Park(uint64_t job, size_t i);
  // Every parked CPU of the job on node i is free again.
  bool CpusBack(uint64_t job, size_t i) const;
  void Unpark(uint64_t job, size_t i);
  // A suspended run ended: its parked CPUs are no longer its own to take back.
  void DropParked(uint64_t job, size_t i);
  // The suspended jobs' parked CPUs on node i.
  const std::map<uint64_t, std::vector<uint32_t>>& parked(size_t i) const {
    return nodes_[i].parked;
  }
  // The jobs with parked CPUs somewhere, in id order.
  const std::map<uint64_t, uint32_t>& parked_jobs() const { return parked_jobs_; }

  // Every unit of `placement` is still free (decisions made on a snapshot meet the live state).
  bool Fits(const core::Placement& placement) const;
  // The allocation to record for a placement: node names, CPU ids, GPU indices, GRES units by
  // name and type (shards with the GPU each sits on).
  v1::Allocation ToAllocation(const core::Placement& placement) const;
  // What a recorded allocation on node i amounts to there (units the node lacks are left out).
  core::NodePlacement PlacementOf(const v1::NodeAllocation& na, size_t i) const;

  // Each holding as the availability profile sees it; `end_of(job)` says when it ends.
  void AddRunningUse(core::ClusterView& view,
                     const std::function<TimeMs(uint64_t job)>& end_of) const;

  // The invariants above; INTERNAL naming the first violation.
  Status CheckInvariants() const;

 private:
  struct Node {
    core::NodeView view;
    std::map<uint64_t, core::NodePlacement> held;
    std::map<uint64_t, std::vector<uint32_t>> parked;  // suspended jobs' CPUs
  };
  void Unparked(uint64_t job);

  std::vector<Node> nodes_;
  std::map<uint64_t, uint32_t> parked_jobs_;  // job -> nodes it has parked CPUs on
};

}  // namespace muster::controller
