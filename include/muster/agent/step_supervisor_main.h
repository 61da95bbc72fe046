// muster-stepd, the per-step supervisor musterd starts: `muster-stepd SETUP_FILE` with the
// client's connection on fd 0. It reads the setup (a StepSupervisorSetup the agent wrote; the
// file is removed once read), runs the step (src/agent/step_supervisor.h), records its tasks'
// pids and its end in the job's spool directory, and exits 0 (1 when the setup is unusable).
#pragma once

namespace muster::agent {

int StepSupervisorMain(int argc, char** argv);

}  // namespace muster::agent
