// Private to muster_client: what srun's --prolog and --epilog run with. RunHostProgram, which
// runs them, is declared in muster/client/step_client.h (the tests call it).
#pragma once

#include <string>
#include <vector>

#include "muster/v1/controller.pb.h"

namespace muster::client {

// The step's SLURM_* variables on top of srun's environment (`srun_env`), for its prolog and
// epilog: `nodelist` and `tasks_per_node` as every node of the step is told them, and `context`
// (prolog_srun or epilog_srun) as SLURM_SCRIPT_CONTEXT.
std::vector<std::string> HostProgramEnv(const std::vector<std::string>& srun_env,
                                        const v1::CreateStepResponse& step,
                                        const std::string& nodelist,
                                        const std::string& tasks_per_node, const char* context);

}  // namespace muster::client
