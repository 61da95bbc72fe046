// Job steps: srun inside an allocation. A step takes part of its job's allocation (its tasks, the
// CPUs it holds so that parallel steps do not share them, GPUs when it asks for them; the layout
// itself is the core's, core/step_layout.h), its tasks run on the agents, and the agents report
// when they ended on each node. Steps live in their job's record (step_state.h).
//
// Strand-confined.
#pragma once

#include "engine_context.h"
#include "job_manager.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/v1/controller.pb.h"
#include "node_manager.h"
#include "resource_ledger.h"

namespace muster::controller {

class StepManager {
 public:
  StepManager(EngineContext& ctx, JobManager& jobs, NodeManager& nodes,
              const ResourceLedger& ledger);

  // UNAVAILABLE while the job pends, its nodes are still starting, or other steps hold what it
  // needs ("Requested nodes are busy": the client retries); FAILED_PRECONDITION when the job can
  // never hold it or is not running; INVALID_ARGUMENT for a bad layout or node list;
  // UNIMPLEMENTED for GPU options in a job holding MIG slices or shards; PERMISSION_DENIED unless
  // it is the caller's (or the caller is an admin); NOT_FOUND for an unknown job.
  Result<v1::CreateStepResponse> CreateStep(const Caller& caller, const v1::CreateStepRequest& req,
                                            TimeMs now);
  void OnStepEnded(NodeEntry& node, const v1::StepEnded& e, TimeMs now);
  // The node's agent restarted: step tasks talk to their client through the agent, so the ones
  // it ran ended with it.
  // The node's agent restarted: its steps ended with it, but for those an adopted job says its
  // supervisor still runs. The changed records are staged in `m`; the caller applies what this
  // returns once `m` is committed.
  std::vector<std::pair<JobEntry*, v1::JobRecord>> StepsLostOnNode(
      NodeEntry& node, const std::vector<v1::AdoptedJob>& adopted, TimeMs now, store::Mutation& m);

 private:
  EngineContext& ctx_;
  JobManager& jobs_;
  NodeManager& nodes_;
  const ResourceLedger& ledger_;
};

}  // namespace muster::controller
