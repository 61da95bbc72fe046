#include "step_grant.h"

#include <algorithm>
#include <set>

#include "muster/credentials/step_credential.h"

namespace muster::agent {
namespace {

// Slurm's MAX_TASKS_PER_NODE (core::kMaxTasksPerNode; the agent does not link the core).
constexpr uint32_t kMaxTasksPerNode = 512;

}  // namespace

Result<v1::StepGrant> CheckStepCredential(const v1::StepLaunchRequest& req,
                                          const v1::LaunchJob& job, const std::string& node,
                                          std::string_view step_key, int64_t now_ms,
                                          std::string_view instance) {
  const std::string what =
      "step " + std::to_string(req.step_id()) + " of job " + std::to_string(req.job_id());
  auto opened = credentials::OpenStepGrant(step_key, req.credential());
  if (!opened.ok()) return opened.status().Prepend(what);
  const v1::StepGrant& g = *opened;
  auto refuse = [&](const std::string& why) {
    return PermissionDenied(what + ": the credential " + why);
  };
  if (g.node() != node) return refuse("is for node " + g.node() + ", not " + node);
  if (g.job_id() != req.job_id() || g.job_id() != job.job_id() || g.step_id() != req.step_id()) {
    return refuse("is for step " + std::to_string(g.step_id()) + " of job " +
                  std::to_string(g.job_id()));
  }
  if (g.run() != job.requeue_count() || g.run() != req.run()) {
    return refuse("is for an earlier run of the job (it was requeued)");
  }
  if (g.uid() != job.spec().uid()) return refuse("names another user");
  if (g.agent_instance() != instance) {
    return refuse("was made for an earlier start of this node's agent (it may have been used)");
  }
  if (now_ms > g.expires_ms()) {
    return refuse("expired " + std::to_string((now_ms - g.expires_ms()) / 1000) +
                  " s ago (do the clocks of the controller and " + node + " agree?)");
  }
  const bool same = g.node_id() == req.node_id() && g.first_task() == req.first_task() &&
                    g.ntasks() == req.ntasks() && g.total_tasks() == req.total_tasks() &&
                    g.total_nodes() == req.total_nodes() &&
                    g.cpus_per_task() == req.cpus_per_task() &&
                    g.gpus_given() == req.gpus_given() &&
                    std::equal(g.task_ids().begin(), g.task_ids().end(), req.task_ids().begin(),
                               req.task_ids().end()) &&
                    std::equal(g.cpu_ids().begin(), g.cpu_ids().end(), req.cpu_ids().begin(),
                               req.cpu_ids().end()) &&
                    std::equal(g.gpu_indices().begin(), g.gpu_indices().end(),
                               req.gpu_indices().begin(), req.gpu_indices().end());
  if (!same) return refuse("grants other tasks, CPUs or GPUs than the request asks for");
  return opened;
}

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
  // Listed ids (-m cyclic, plane): one per task here, ascending (so none twice), each a task of
  // the step, the first of them first_task.
  if (req.task_ids_size() != 0) {
    bool ok = static_cast<uint32_t>(req.task_ids_size()) == req.ntasks() &&
              req.task_ids(0) == req.first_task();
    for (int i = 0; ok && i < req.task_ids_size(); ++i) {
      ok = req.task_ids(i) < req.total_tasks() && (i == 0 || req.task_ids(i - 1) < req.task_ids(i));
    }
    if (!ok) return InvalidArgument("the step's task ids on " + node + " do not add up");
  }
  // Each task holds at least one CPU (the controller lays steps out that way), unless the job
  // was submitted with -O/--overcommit: then one task's CPUs, and at most Slurm's
  // MAX_TASKS_PER_NODE tasks.
  const bool overcommit = job.spec().overcommit();
  if (overcommit && req.ntasks() > kMaxTasksPerNode) {
    return PermissionDenied("the step asks for " + std::to_string(req.ntasks()) + " tasks on " +
                            node + "; at most " + std::to_string(kMaxTasksPerNode) +
                            " with --overcommit");
  }
  const uint64_t cpus =
      uint64_t{overcommit ? 1 : req.ntasks()} * std::max<uint32_t>(req.cpus_per_task(), 1);
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
