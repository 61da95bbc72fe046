// The environment of batch scripts and step tasks: the submitter's environment plus Slurm's
// SLURM_* variables (and MUSTER_* twins), GPU binding included. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "muster/common/output_pattern.h"
#include "muster/common/status.h"
#include "muster/v1/agent.pb.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

// What the job's GPUs on this node are called in CUDA_VISIBLE_DEVICES (and
// NVIDIA_VISIBLE_DEVICES): whole GPUs and the GPUs under its shards by index ("0,1,2"), MIG
// slices by their UUIDs ("MIG-..."), unit u of a profile being the u-th instance of that profile
// in GPU order. FAILED_PRECONDITION when the node does not have the MIG instances the allocation
// names (MIG reconfigured behind the controller's back).
Result<std::string> VisibleDevices(const v1::LaunchJob& launch,
                                   const google::protobuf::RepeatedPtrField<v1::GpuDevice>& gpus);

// For the batch script on the job's first node. `visible` is VisibleDevices' answer.
// `login_env` (--get-user-env): the user's login environment, under the submitted one.
std::vector<std::string> BuildBatchEnv(const v1::LaunchJob& launch, const std::string& node_name,
                                       const std::string& config_path, const std::string& visible,
                                       const std::vector<std::string>* login_env = nullptr);

// The step's task id (SLURM_PROCID) of its `local_id`-th task on this node: task_ids[local_id]
// when the launch lists them (-m cyclic, plane), else first_task + local_id.
uint32_t TaskIdOf(const v1::StepLaunchRequest& step, uint32_t local_id);

// For one task of a step: the client's environment, the job's variables for this node, and the
// per-task ones (SLURM_PROCID, SLURM_LOCALID, SLURM_STEP_ID, ...).
std::vector<std::string> BuildTaskEnv(const v1::LaunchJob& launch, const std::string& node_name,
                                      const std::string& config_path, const std::string& visible,
                                      const v1::StepLaunchRequest& step, uint32_t local_id,
                                      const std::string& launch_host = "");

// Every GPU the job touches on this node: whole GPUs, those under its shards, and the parents of
// its MIG slices (the device files it must be able to open).
std::vector<uint32_t> GpusTouched(const v1::LaunchJob& launch,
                                  const google::protobuf::RepeatedPtrField<v1::GpuDevice>& gpus);

// The allocated GPU indices of this node (whole GPUs and those under shards): "0,1,2".
std::string GpuList(const v1::LaunchJob& launch);

// Sets NAME=value in a KEY=VALUE environment, in the place of an earlier NAME (which it replaces,
// with any repeats), else at its end.
void SetEnvVar(std::vector<std::string>& env, const std::string& name, const std::string& value);

// What a task's --task-prolog printed, applied to the task's environment as Slurm's TaskProlog
// does: "export NAME=value" sets NAME (the value is the rest of the line), "unset NAME" removes
// it, and each "print TEXT" line's TEXT is returned, in order, for the task's stdout. Other
// lines, and names that are not one, are ignored.
std::vector<std::string> ApplyTaskPrologOutput(const std::string& output,
                                               std::vector<std::string>* env);

// The job's output-pattern variables (%j %x %u %A %a) from its launch.
PatternVars PatternVarsOf(const v1::LaunchJob& launch);

}  // namespace muster::agent
