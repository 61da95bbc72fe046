// srun --gpu-bind: how a step's GPUs on a node are shared out among its tasks there. Parsed by the
// CLI (a bad value is refused before anything runs) and applied by the node's step supervisor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "muster/common/status.h"

namespace muster {

struct GpuBind {
  enum class Kind {
    kDefault,  // per task when the step has --gpus-per-task, else none
    kNone,     // every task sees all of the step's GPUs
    kPerTask,  // per_task:N: task i gets the N GPUs after the first i*N
    kSingle,   // single:N: one GPU each, N tasks to a GPU
    kMap,      // map_gpu:I,J,...: task i gets GPU list[i % size]
    kMask,     // mask_gpu:M,N,...: task i gets the GPUs of mask list[i % size]
    kClosest,  // closest: the GPUs near the CPUs the task runs on (ClosestGpus)
  };
  Kind kind = Kind::kDefault;
  uint32_t n = 0;
  std::vector<uint64_t> list;  // map_gpu indices or mask_gpu masks, repetitions (*R) expanded
  bool verbose = false;
};

// "none", "verbose", "closest", "per_task:N", "single:N", "map_gpu:LIST", "mask_gpu:LIST",
// optionally after "verbose," (Slurm's form). LIST items are decimal or 0x hex, each optionally
// *R (repeated R times). INVALID_ARGUMENT for a malformed value.
Result<GpuBind> ParseGpuBind(std::string_view value);

// The GPUs the step's task `local` on this node (0 its first here) sees, out of the step's GPUs
// here in order. Indices in map_gpu and mask_gpu count the step's GPUs on the node (0 is its
// first), so a task never sees a GPU the step does not hold; one beyond them is
// FAILED_PRECONDITION. Shares that run past the step's GPUs (per_task, single) start again from its
// first. kClosest needs the CPUs: use ClosestGpus (here it gives all of them).
Result<std::vector<std::string>> TaskGpus(const GpuBind& bind, uint32_t gpus_per_task,
                                          const std::vector<std::string>& step_gpus,
                                          uint32_t local);

// --gpu-bind=closest (and --accel-bind=g): of the step's GPUs here, those whose CPU affinity
// (`gpu_cpus[i]` for step_gpus[i]; empty: unknown) shares a CPU with `task_cpus`, the CPUs the
// task may run on. A GPU of unknown affinity is near every CPU, and a task near none of them sees
// them all (as Slurm, it is never left without a GPU of the step's).
std::vector<std::string> ClosestGpus(const std::vector<std::string>& step_gpus,
                                     const std::vector<std::vector<uint32_t>>& gpu_cpus,
                                     const std::vector<uint32_t>& task_cpus);

}  // namespace muster
