#include "step_grant.h"

#include <algorithm>
#include <set>

namespace muster::agent {

Status CheckStepWithinGrant(const v1::StepLaunchRequest& req, const v1::LaunchJob& job,
                            const std::string& node) {
  const v1::NodeAllocation* here = nullptr;
  for (const v1::NodeAllocation& n : job.allocation().nodes()) {
    if (n.node() == node) here = &n;
  }
  if (!here)
    return PermissionDenied("job " + std::to_string(job.job_id()) + " holds nothing on " + node);
  if (req.ntasks() == 0) return InvalidArgument("a step with no tasks on " + node);
  if (uint64_t{req.first_task()} + req.ntasks() > req.total_tasks() ||
      req.node_id() >= std::max<uint32_t>(req.total_nodes(), 1)) {
    return InvalidArgument("the step's task or node numbers do not add up");
  }
  // Each task holds at least one CPU (the controller lays steps out that way).
  const uint64_t cpus = uint64_t{req.ntasks()} * std::max<uint32_t>(req.cpus_per_task(), 1);
  if (cpus > static_cast<uint64_t>(here->cpu_ids_size())) {
    return PermissionDenied("the step asks for " + std::to_string(req.ntasks()) + " task(s) x " +
                            std::to_string(std::max<uint32_t>(req.cpus_per_task(), 1)) +
                            " CPU(s) on " + node + ", more than the job's " +
                            std::to_string(here->cpu_ids_size()) + " CPU(s) there");
  }
  const std::set<uint32_t> job_cpus(here->cpu_ids().begin(), here->cpu_ids().end());
  for (uint32_t c : req.cpu_ids()) {
    if (!job_cpus.count(c)) {
      return PermissionDenied("CPU " + std::to_string(c) + " on " + node + " is not the job's");
    }
  }
  const std::set<uint32_t> job_gpus(here->gpu_indices().begin(), here->gpu_indices().end());
  for (uint32_t g : req.gpu_indices()) {
    if (!job_gpus.count(g)) {
      return PermissionDenied("GPU " + std::to_string(g) + " on " + node + " is not the job's");
    }
  }
  return Status::Ok();
}

}  // namespace muster::agent
