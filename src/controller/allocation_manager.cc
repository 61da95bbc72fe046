#include "allocation_manager.h"

#include "muster/controller/access.h"

namespace muster::controller {

using core::JobReason;

AllocationManager::AllocationManager(EngineContext& ctx, JobManager& jobs)
    : ctx_(ctx), jobs_(jobs) {}

Result<JobEntry*> AllocationManager::CallersAllocation(const Caller& caller, uint64_t job_id) {
  JobEntry* job = jobs_.Find(job_id);
  const std::string jid = std::to_string(job_id);
  if (!job) return NotFound("job " + jid + " does not exist");
  MUSTER_RETURN_IF_ERROR(CheckJobAccess(caller, job->rec(), "use", ctx_.config()));
  if (!job->rec().spec().interactive()) {
    return FailedPrecondition("job " + jid +
                              " is a batch job, not an srun/salloc allocation (it ends with its "
                              "script, or cancel it)");
  }
  return job;
}

Status AllocationManager::Release(const Caller& caller, const v1::ReleaseAllocationRequest& req,
                                  TimeMs now) {
  MUSTER_ASSIGN_OR_RETURN(JobEntry * job, CallersAllocation(caller, req.job_id()));
  const bool ok = req.exit_code() == 0 && req.signal() == 0;
  jobs_.EndAllocation(*job, ok ? v1::COMPLETED : v1::FAILED,
                      ok ? JobReason::kNone : JobReason::kNonZeroExitCode, "", now, req.exit_code(),
                      req.signal());
  return Status::Ok();
}

Result<const JobEntry*> AllocationManager::Attach(const Caller& caller,
                                                  const v1::AttachAllocationRequest& req) {
  MUSTER_ASSIGN_OR_RETURN(JobEntry * job, CallersAllocation(caller, req.job_id()));
  if (!IsActive(job->rec()) || job->rec().end_time_ms() > 0) {
    return FailedPrecondition("job " + std::to_string(req.job_id()) + " has ended (" +
                              v1::JobState_Name(job->rec().state()) + ")");
  }
  job->client_attached = true;
  return job;
}

void AllocationManager::ClientGone(uint64_t job_id, TimeMs now) {
  JobEntry* job = jobs_.Find(job_id);
  if (!job || !job->client_attached) return;
  job->client_attached = false;
  job->orphan_since_ms = now;
  if (job->rec().spec().no_shell()) return;  // salloc --no-shell: its client was to go
  jobs_.EndAllocation(*job, v1::CANCELLED, JobReason::kNone, "its srun/salloc went away", now, 0,
                      0);
}

void AllocationManager::Check(TimeMs now) {
  const auto& s = ctx_.scheduling();
  std::vector<uint64_t> ids(jobs_.interactive().begin(), jobs_.interactive().end());
  for (uint64_t id : ids) {
    JobEntry* job = jobs_.Find(id);
    if (!job || job->rec().end_time_ms() > 0 ||
        (job->rec().state() != v1::PENDING && job->rec().state() != v1::RUNNING)) {
      jobs_.ForgetAllocation(id);
      continue;
    }
    const v1::JobRecord& r = job->rec();
    if (r.state() == v1::RUNNING && now >= LimitEnd(r)) {
      // The agents stop the tasks at the limit themselves; the allocation ends here.
      jobs_.EndAllocation(*job, v1::TIMEOUT, JobReason::kTimeLimit, "", now, 0, 0);
      continue;
    }
    if (!job->client_attached && !r.spec().no_shell() &&
        now - job->orphan_since_ms >= static_cast<TimeMs>(s.allocation_grace_ms)) {
      jobs_.EndAllocation(*job, v1::CANCELLED, JobReason::kNone,
                          "its srun/salloc did not connect within " +
                              std::to_string(s.allocation_grace_ms / 1000) + "s",
                          now, 0, 0);
    }
  }
}

}  // namespace muster::controller
