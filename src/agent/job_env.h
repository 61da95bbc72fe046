// The environment of batch scripts and step tasks: the submitter's environment plus Slurm's
// SLURM_* variables (and MUSTER_* twins), GPU binding included. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "muster/v1/agent.pb.h"
#include "muster/v1/node.pb.h"

namespace muster::agent {

// For the batch script on the job's first node.
std::vector<std::string> BuildBatchEnv(const v1::LaunchJob& launch, const std::string& node_name,
                                       const std::string& config_path);

// For one task of a step: the client's environment, the job's variables for this node, and the
// per-task ones (SLURM_PROCID, SLURM_LOCALID, SLURM_STEP_ID, ...).
std::vector<std::string> BuildTaskEnv(const v1::LaunchJob& launch, const std::string& node_name,
                                      const std::string& config_path,
                                      const v1::StepLaunchRequest& step, uint32_t local_id);

// The allocated GPU indices of this node as CUDA_VISIBLE_DEVICES wants them: "0,1,2".
std::string GpuList(const v1::LaunchJob& launch);
// Why this node's part of the launch cannot be bound here (empty when it can).
std::string UnsupportedGres(const v1::LaunchJob& launch);

}  // namespace muster::agent
