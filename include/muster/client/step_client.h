// Interactive work (srun, salloc): getting an allocation without a batch script, and running a
// job step in one. A step is created by the controller, then the client talks to every node's
// agent directly: task output flows agent -> client, never via the controller.
#pragma once

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "muster/client/controller_client.h"
#include "muster/client/multi_prog.h"
#include "muster/common/status.h"
#include "muster/v1/agent.pb.h"
#include "muster/v1/controller.pb.h"

namespace muster::client {

struct StepOptions {
  v1::CreateStepRequest shape;  // job id, -N -n -c, GPUs, --exact/--overlap, name
  std::vector<std::string> argv;
  std::vector<std::string> environment;
  std::string work_dir;
  bool label = false;             // prefix output lines with "TASK: " (srun -l)
  bool kill_on_bad_exit = false;  // a task ending non-zero kills the others (srun -K)
  // A lost node's tasks are lost, the others go on (srun -k); without it they are killed.
  bool no_kill = false;
  std::string program = "srun";  // names the client in its messages
  bool pmi = true;               // serve PMI-1 to the tasks (MPI without mpiexec); --mpi=none
  bool pmi2 = false;             // --mpi=pmi2: serve PMI-2 as well (with pmi), set PMI_JOBID
  // Standard input (srun -i): by default task 0 reads ours; STDIN_ALL sends it to every task;
  // STDIN_NONE gives /dev/null, or the file stdin_pattern names on each node.
  v1::StepLaunchRequest::StdinMode stdin_mode = v1::StepLaunchRequest::STDIN_TASK;
  uint32_t stdin_task = 0;
  std::string stdin_pattern;
  int stdin_fd = 0;
  // srun -o/-e: the tasks write these files on their nodes (patterns %t %n %N %j %s %u %x).
  std::string stdout_pattern;
  std::string stderr_pattern;
  // srun --pty: task 0 runs on a pseudo-terminal; ours (when stdin is one) goes raw meanwhile
  // and its size follows.
  bool pty = false;
  // --gpus-per-task and --gpu-bind: each task's own share of the step's GPUs on its node.
  uint32_t gpus_per_task = 0;
  std::string gpu_bind;
  // srun --open-mode=append: the -o/-e files are added to, not truncated when the step starts.
  bool open_mode_append = false;
  // srun --prolog/--epilog: programs run on this host, without a shell, just before the tasks
  // are launched and just after the step has ended, with the step's command and arguments as
  // their arguments and the step's SLURM_* variables in their environment (empty: none). A
  // prolog that fails ends the step before anything of it runs; the epilog's status changes
  // nothing.
  std::string prolog, epilog;
  // srun --cpu-bind, as given, and -m's second level: each task bound to its share of the
  // step's CPUs on its node.
  std::string cpu_bind, cpu_distribution;
  // srun --multi-prog: each rank's command from this configuration, with these arguments after
  // it (what followed the file on the command line). Checked against the step's task count once
  // the step is created: a configuration that does not fit withdraws the step.
  std::optional<MultiProgConfig> multi_prog;
  std::vector<std::string> multi_prog_args;
  // srun --task-prolog/--task-epilog: absolute paths of programs each node runs as the job's
  // user just before and just after each task (empty: none).
  std::string task_prolog, task_epilog;
  // srun --bcast (muster/client/bcast.h): the program file here (empty: none), copied to each
  // node before its tasks start and run from there, at bcast_dest (absolute; ending in '/': a
  // directory, where each node's copy is slurm_bcast_JOB.STEP_NODE).
  std::string bcast_program, bcast_dest;
  // srun --quit-on-interrupt: one Ctrl-C ends the step at once.
  bool quit_on_interrupt = false;
  // srun -W/--wait: once the first task has ended, the others get this many seconds more, then
  // the step is killed (0: no limit).
  uint32_t wait_s = 0;
};

// Runs the step to completion, writing task output to out/err line by line. Waits (saying so
// once on err) while other steps hold what it needs. Forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT,
// SIGUSR1 and SIGUSR2 to the tasks; a second SIGINT within a second (or the first, with
// quit_on_interrupt) kills them. Returns the step's exit code: the highest task exit code, or
// 128+signal for a task killed by a signal. FAILED_PRECONDITION, naming it, when the prolog
// fails (the step is then withdrawn: nothing of it runs).
Result<int> RunStep(ControllerClient& controller, const StepOptions& options, FILE* out, FILE* err);

struct AllocateOptions {
  std::string program = "srun";  // "srun: job 5 queued and waiting for resources"
  int immediate_s = 0;           // > 0: give up when not allocated within this many seconds
  bool quiet = false;
  std::optional<int64_t> priority;  // --priority (administrators): the job's from the start
};

// Submits the interactive allocation, binds it to this connection (closing the connection, as
// when the process dies, ends it) and waits until every node has set it up. SIGINT or SIGTERM
// while waiting withdraws it. Returns the running job.
Result<v1::JobInfo> Allocate(ControllerClient& controller, const v1::JobSpec& spec,
                             const AllocateOptions& options, FILE* err);

// Runs `exe` on this host without a shell (srun --prolog/--epilog): `args` follow it on its
// command line, `env` is its whole environment. Waits for it and returns its exit code (128+N
// when signal N ended it); an error when it cannot be run at all.
Result<int> RunHostProgram(const std::string& exe, const std::vector<std::string>& args,
                           const std::vector<std::string>& env);

// Blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 for direct delivery and routes them
// to a pipe that RunStep and Allocate poll (a signal-safe way to forward them). Call once,
// before either.
Status CatchForwardedSignals();
// Restores the default handling (before exec'ing a child, say).
void ReleaseForwardedSignals();
// Waits up to timeout_ms for caught signals and returns them (empty on timeout).
std::vector<int> WaitForSignals(int timeout_ms);

}  // namespace muster::client
