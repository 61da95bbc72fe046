// Running a job step (`muster run` inside an allocation): ask the controller for the step, then
// talk to every node's agent directly; task output flows agent -> client, never via the controller.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "muster/client/controller_client.h"
#include "muster/common/status.h"

namespace muster::client {

struct StepOptions {
  uint64_t job_id = 0;
  std::vector<std::string> argv;
  std::vector<std::string> environment;
  std::string work_dir;
  bool label = false;  // prefix output lines with "TASK: " (srun -l)
};

// Runs the step to completion, writing task output to out/err line by line. Returns the step's
// exit code: the highest task exit code, or 128+signal for a task killed by a signal.
Result<int> RunStep(ControllerClient& controller, const StepOptions& options, FILE* out, FILE* err);

}  // namespace muster::client
