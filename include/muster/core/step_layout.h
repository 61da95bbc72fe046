// Where a job step's tasks go inside its job's allocation (srun within a job), as srun lays them
// out: the counts it was given, defaults from the job, the CPUs and GPUs other running steps
// leave free. Pure: the controller gathers what each node has left and records the result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::core {

// One node of the job, as a new step may use it.
struct StepRoom {
  uint32_t job_tasks = 0;           // the job's tasks there (the default layout)
  std::vector<uint32_t> free_cpus;  // not held by running steps (all of the job's with --overlap)
  std::vector<uint32_t> free_gpus;  // likewise, for steps with GPUs of their own
  uint32_t all_cpus = 0;            // the job's CPUs there
  uint32_t all_gpus = 0;
};

// -m/--distribution's first level: how a step's task ids go over its nodes. Only the ids move:
// each node runs as many tasks as the layout gives it whatever the distribution.
struct TaskDistribution {
  enum class Kind { kBlock, kCyclic, kPlane };
  Kind kind = Kind::kBlock;
  uint32_t plane = 0;  // kPlane: ids go out in runs of this many (at least 1)
};

// CreateStepRequest.task_distribution: "" or "block", "cyclic", "plane=N". INVALID_ARGUMENT for
// anything else (a plane of 0, or one past the bound on counts).
Result<TaskDistribution> ParseTaskDistribution(const std::string& text);

// Each node's task ids, ascending, for `tasks[k]` tasks on node k (in node order):
//   block   node 0 gets 0..tasks[0]-1, node 1 the next, ...;
//   cyclic  one id to each node in turn, skipping nodes that already have their share;
//   plane   up to `plane` consecutive ids to each node in turn, likewise.
std::vector<std::vector<uint32_t>> AssignTaskIds(const std::vector<uint32_t>& tasks,
                                                 const TaskDistribution& d);

// What srun asked for; a count of 0 means "as the job has it".
struct StepShape {
  uint32_t nodes = 0;
  uint32_t ntasks = 0;
  uint32_t ntasks_per_node = 0;
  uint32_t cpus_per_task = 0;
  uint32_t gpus_per_task = 0;
  uint32_t gpus_per_node = 0;
  uint32_t gpus = 0;     // -G: in total, divided evenly over the nodes
  bool exact = false;    // only the CPUs its tasks need (else every CPU left free there)
  bool overlap = false;  // shares CPUs with other steps: holds none
  // -O/--overcommit (the job's): tasks may outnumber the CPUs, each node needs only one task's
  // CPUs, and the tasks are spread over the nodes (at most kMaxTasksPerNode on one).
  bool overcommit = false;
  TaskDistribution distribution;  // -m: which task ids each node gets
  bool WantsGpus() const { return gpus_per_task > 0 || gpus_per_node > 0 || gpus > 0; }
};

// Slurm's MAX_TASKS_PER_NODE: the most tasks an overcommitted step may start on one node.
inline constexpr uint32_t kMaxTasksPerNode = 512;

// The step on one node: which room, how many tasks, and what it holds there.
struct StepPlacement {
  size_t room = 0;  // index into the rooms given
  uint32_t tasks = 0;
  std::vector<uint32_t> task_ids;  // the step's task ids here, ascending (`tasks` of them)
  std::vector<uint32_t> cpus;      // empty with --overlap
  std::vector<uint32_t> gpus;      // only when the step asked for GPUs
};

struct StepLayout {
  uint32_t cpus_per_task = 1;
  std::vector<StepPlacement> nodes;  // in room order; task ids dealt by the shape's distribution
};

// Lays the step out on `rooms` (the job's candidate nodes, in allocation order). `job` names the
// job in messages ("job 7"); `selected` says the rooms were narrowed by -w/-x. Errors:
//   INVALID_ARGUMENT     contradictory or out-of-range counts; -G that does not divide over the
//                        nodes;
//   FAILED_PRECONDITION  more than the job holds (it can never run);
//   UNAVAILABLE          "Requested nodes are busy": other steps hold what it needs now.
Result<StepLayout> LayOutStep(const std::vector<StepRoom>& rooms, const StepShape& shape,
                              uint32_t job_cpus_per_task, const std::string& job, bool selected);

}  // namespace muster::core
