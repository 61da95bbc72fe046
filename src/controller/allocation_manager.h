// Interactive allocations: the jobs srun and salloc hold outside a batch script. The client
// attaches to its allocation through its connection; the allocation ends when the client releases
// it, when that connection closes, when its time limit passes, or when no client attaches within
// allocation_grace_ms (a controller restart gives clients that long to come back).
//
// Strand-confined.
#pragma once

#include <cstdint>

#include "engine_context.h"
#include "job_manager.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/controller/engine.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {

class AllocationManager {
 public:
  AllocationManager(EngineContext& ctx, JobManager& jobs);

  // The client is done with its allocation. Errors as Attach.
  Status Release(const Caller& caller, const v1::ReleaseAllocationRequest& req, TimeMs now);
  // Binds the allocation to the caller's connection. NOT_FOUND, PERMISSION_DENIED, or
  // FAILED_PRECONDITION (a batch job, or one that has ended).
  Result<const JobEntry*> Attach(const Caller& caller, const v1::AttachAllocationRequest& req);
  // The connection that attached it closed.
  void ClientGone(uint64_t job_id, TimeMs now);
  // Time limits, and allocations no client holds past allocation_grace_ms.
  void Check(TimeMs now);

 private:
  // The caller's own (or, for an admin, any) interactive job.
  Result<JobEntry*> CallersAllocation(const Caller& caller, uint64_t job_id);

  EngineContext& ctx_;
  JobManager& jobs_;
};

}  // namespace muster::controller
