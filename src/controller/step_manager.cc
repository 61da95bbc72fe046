#include "step_manager.h"

#include <spdlog/spdlog.h>

#include <map>
#include <set>

#include "muster/controller/access.h"
#include "muster/core/step_layout.h"
#include "muster/credentials/step_credential.h"
#include "step_state.h"

namespace muster::controller {
namespace {

// A job record keeps this many steps; older finished ones are dropped first (a job running
// thousands of sruns would otherwise rewrite an ever larger record with every step).
constexpr int kMaxStepsKept = 1000;

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

StepManager::StepManager(EngineContext& ctx, JobManager& jobs, NodeManager& nodes,
                         const ResourceLedger& ledger)
    : ctx_(ctx), jobs_(jobs), nodes_(nodes), ledger_(ledger) {}

Result<v1::CreateStepResponse> StepManager::CreateStep(const Caller& caller,
                                                       const v1::CreateStepRequest& req,
                                                       TimeMs now) {
  JobEntry* job = jobs_.Find(req.job_id());
  const std::string jid = std::to_string(req.job_id());
  if (!job) return NotFound("job " + jid + " does not exist");
  MUSTER_RETURN_IF_ERROR(CheckJobAccess(caller, job->rec(), "run steps in", ctx_.config()));
  if (job->rec().state() == v1::PENDING) {
    return Unavailable("job " + jid + " is still pending (waiting for its allocation)");
  }
  if (job->rec().state() != v1::RUNNING || job->rec().cancel_requested()) {
    return FailedPrecondition("job " + jid + " is not running (" +
                              v1::JobState_Name(job->rec().state()) + ")");
  }
  if (job->rec().suspend_time_ms() > 0) {
    return Unavailable("job " + jid + " is suspended (" + job->rec().reason_detail() +
                       "); its steps start when it resumes");
  }
  const auto& alloc = job->rec().allocation().nodes();
  if (job->started_nodes.size() < static_cast<size_t>(alloc.size())) {
    return Unavailable("job " + jid + "'s nodes are still starting");
  }
  MUSTER_ASSIGN_OR_RETURN(core::TaskDistribution distribution,
                          core::ParseTaskDistribution(req.task_distribution()));
  // --overlap with --exact is allowed, as in Slurm: --overlap wins (the step holds no CPUs).
  core::StepShape shape{.nodes = req.nodes(),
                        .ntasks = req.ntasks(),
                        .ntasks_per_node = req.ntasks_per_node(),
                        .cpus_per_task = req.cpus_per_task(),
                        .gpus_per_task = req.gpus_per_task(),
                        .gpus_per_node = req.gpus_per_node(),
                        .gpus = req.gpus(),
                        .exact = req.exact(),
                        .overlap = req.overlap(),
                        .overcommit = job->rec().spec().overcommit(),
                        .distribution = distribution};
  const bool want_gpus = shape.WantsGpus();
  if (want_gpus) {
    for (const auto& na : alloc) {
      for (const auto& g : na.gres()) {
        if (g.name() == "gpu" || g.name() == "shard") {
          return Unimplemented(
              "GPU options for a step of a job that holds MIG slices or shards are not supported "
              "yet; leave them out and the step uses all of the job's GPUs");
        }
      }
    }
  }

  // What running steps hold.
  std::map<std::string, std::set<uint32_t>> busy_cpus, busy_gpus;
  for (const v1::StepRecord& s : job->rec().steps()) {
    if (s.state() != v1::RUNNING) continue;
    for (const auto& na : s.nodes()) {
      busy_cpus[na.node()].insert(na.cpu_ids().begin(), na.cpu_ids().end());
      if (s.gpus_given()) {
        busy_gpus[na.node()].insert(na.gpu_indices().begin(), na.gpu_indices().end());
      }
    }
  }
  // Candidate nodes, in allocation order, and what each has left for this step.
  std::set<std::string> in_job;
  for (const auto& na : alloc) in_job.insert(na.node());
  for (const auto& n : req.nodelist()) {
    if (!in_job.count(n)) {
      return InvalidArgument("node " + n + " is not part of job " + jid + "'s allocation");
    }
  }
  std::set<std::string> only(req.nodelist().begin(), req.nodelist().end());
  std::set<std::string> skip(req.exclude().begin(), req.exclude().end());
  std::vector<core::StepRoom> rooms;
  std::vector<int> positions;  // each room's index in the allocation
  for (int i = 0; i < alloc.size(); ++i) {
    const auto& na = alloc[i];
    if ((!only.empty() && !only.count(na.node())) || skip.count(na.node())) continue;
    core::StepRoom r;
    r.job_tasks = na.ntasks();
    r.all_cpus = static_cast<uint32_t>(na.cpu_ids_size());
    r.all_gpus = static_cast<uint32_t>(na.gpu_indices_size());
    for (uint32_t c : na.cpu_ids()) {
      if (req.overlap() || !busy_cpus[na.node()].count(c)) r.free_cpus.push_back(c);
    }
    for (uint32_t g : na.gpu_indices()) {
      if (req.overlap() || !busy_gpus[na.node()].count(g)) r.free_gpus.push_back(g);
    }
    rooms.push_back(std::move(r));
    positions.push_back(i);
  }
  MUSTER_ASSIGN_OR_RETURN(core::StepLayout layout,
                          core::LayOutStep(rooms, shape, job->rec().spec().cpus_per_task(),
                                           "job " + jid, !only.empty() || !skip.empty()));

  v1::StepRecord step;
  const uint32_t step_id = job->rec().next_step_id();
  step.set_id(step_id);
  step.set_name(req.name().empty() ? "step" : BaseName(req.name()));
  BeginStep(step, now);
  step.set_cpus_per_task(layout.cpus_per_task);
  step.set_overlap(req.overlap());
  step.set_gpus_given(want_gpus);
  v1::CreateStepResponse resp;
  resp.set_job_id(job->rec().id());
  resp.set_step_id(step_id);
  resp.set_gpus_given(want_gpus);
  resp.set_cpus_per_task(layout.cpus_per_task);
  resp.set_name(step.name());
  resp.set_run(job->rec().requeue_count());
  uint32_t total = 0;
  uint32_t node_id = 0;
  for (const core::StepPlacement& p : layout.nodes) {
    const std::string& name = alloc[positions[p.room]].node();
    v1::NodeAllocation* use = step.add_nodes();
    use->set_node(name);
    use->set_ntasks(p.tasks);
    use->mutable_cpu_ids()->Add(p.cpus.begin(), p.cpus.end());
    use->mutable_gpu_indices()->Add(p.gpus.begin(), p.gpus.end());
    step.add_running_nodes(name);
    step.set_ntasks(step.ntasks() + p.tasks);

    v1::StepNode* sn = resp.add_nodes();
    sn->set_node(name);
    if (const NodeEntry* node = nodes_.Find(name)) sn->set_step_address(node->step_address);
    sn->set_node_id(node_id++);
    sn->set_ntasks(p.tasks);
    // The ids are listed only when they are not a run (-m cyclic, plane): a block step's
    // nodes, and its grants, stay as they were.
    const bool run = p.task_ids.empty() || p.task_ids.back() - p.task_ids.front() + 1 == p.tasks;
    sn->set_first_task(p.task_ids.empty() ? total : p.task_ids.front());
    if (!run) sn->mutable_task_ids()->Add(p.task_ids.begin(), p.task_ids.end());
    *sn->mutable_gpu_indices() = use->gpu_indices();
    *sn->mutable_cpu_ids() = use->cpu_ids();
    total += p.tasks;
  }
  resp.set_total_tasks(total);
  // Each node gets its own grant, sealed under its own key: good for this step on that node only.
  v1::StepGrant grant;
  grant.set_job_id(job->rec().id());
  grant.set_step_id(step_id);
  grant.set_run(job->rec().requeue_count());
  grant.set_uid(job->rec().spec().uid());
  grant.set_total_tasks(total);
  grant.set_total_nodes(static_cast<uint32_t>(resp.nodes_size()));
  grant.set_cpus_per_task(layout.cpus_per_task);
  grant.set_gpus_given(want_gpus);
  grant.set_expires_ms(now + ctx_.scheduling().step_credential_lifetime_ms);
  for (v1::StepNode& sn : *resp.mutable_nodes()) {
    grant.set_node(sn.node());
    grant.set_node_id(sn.node_id());
    const NodeEntry* entry = nodes_.Find(sn.node());
    grant.set_agent_instance(entry ? entry->instance_id : "");
    grant.set_first_task(sn.first_task());
    grant.set_ntasks(sn.ntasks());
    *grant.mutable_task_ids() = sn.task_ids();
    *grant.mutable_cpu_ids() = sn.cpu_ids();
    *grant.mutable_gpu_indices() = sn.gpu_indices();
    sn.set_credential(credentials::SealStepGrant(ctx_.StepKeyOf(sn.node()), grant));
  }

  v1::JobRecord next = job->rec();
  next.set_next_step_id(step_id + 1);
  *next.add_steps() = step;
  if (next.steps_size() > kMaxStepsKept) {
    for (int i = 0; i < next.steps_size(); ++i) {
      if (next.steps(i).state() != v1::RUNNING) {
        next.mutable_steps()->erase(next.mutable_steps()->begin() + i);
        break;
      }
    }
  }
  store::Mutation m;
  jobs_.StageChange(*job, next, m);
  MUSTER_RETURN_IF_ERROR(ctx_.Commit(m));
  jobs_.ApplyChange(*job, std::move(next));
  spdlog::info("step job={} step={} tasks={} nodes={} name={}", job->rec().id(), step_id, total,
               layout.nodes.size(), step.name());
  return resp;
}

void StepManager::OnStepEnded(NodeEntry& node, const v1::StepEnded& e, TimeMs now) {
  JobEntry* job = jobs_.Find(e.job_id());
  if (!job || e.run() != job->rec().requeue_count()) return;
  v1::JobRecord next = job->rec();
  if (!StepEndedOnNode(next, node.name(), e, now)) return;
  store::Mutation m;
  jobs_.StageChange(*job, next, m);
  // Buffered: accounting only; a crash before the next synced write leaves the step RUNNING
  // until its job ends, which then ends it.
  ctx_.CommitOrDie(m, store::Durability::kBuffered);
  jobs_.ApplyChange(*job, std::move(next));
}

std::vector<std::pair<JobEntry*, v1::JobRecord>> StepManager::StepsLostOnNode(
    NodeEntry& node, const std::vector<v1::AdoptedJob>& adopted, TimeMs now, store::Mutation& m) {
  std::vector<std::pair<JobEntry*, v1::JobRecord>> changed;
  for (const auto& [id, placement] : ledger_.held(node.index)) {
    JobEntry* job = jobs_.Find(id);
    if (!job) continue;
    std::set<uint32_t> running;
    for (const v1::AdoptedJob& a : adopted) {
      if (a.job_id() == id && a.run() == job->rec().requeue_count()) {
        running.insert(a.running_steps().begin(), a.running_steps().end());
      }
    }
    v1::JobRecord next = job->rec();
    if (StepsEndedOnNode(next, node.name(), /*lost=*/true, now, running)) {
      jobs_.StageChange(*job, next, m);
      changed.emplace_back(job, std::move(next));
    }
  }
  return changed;
}

}  // namespace muster::controller
