// sbatch-compatible submission options: the command line and #SBATCH directives in the script
// (the command line wins), turned into a v1::JobSpec.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "muster/common/status.h"
#include "muster/v1/common.pb.h"
#include "muster/v1/controller.pb.h"

namespace muster::client {

struct SubmitOptions {
  std::optional<std::string> job_name, partition, account, qos, dependency, output, error, chdir,
      export_vars, wrap, reservation;
  // --signal=[B:]SIG[@secs]
  std::optional<int> signal;
  uint32_t signal_time_s = 60;
  bool signal_batch_only = false;
  std::optional<int32_t> nice;           // --nice[=N]: subtracted from the priority
  std::optional<int64_t> begin_time_ms;  // --begin: not started before (unix ms)
  std::optional<bool> kill_on_invalid_dep;
  // --mail-type as v1::MailType bits (NONE: 0) and --mail-user (the controller checks it).
  std::optional<uint32_t> mail_types;
  std::optional<std::string> mail_user;
  std::optional<int64_t> deadline_ms;  // --deadline: removed unless it can end before (unix ms)
  std::optional<uint32_t> nodes, min_nodes, ntasks, ntasks_per_node, cpus_per_task;
  std::optional<uint32_t> gpus, gpus_per_node;
  std::optional<std::string> gpu_type;
  // --gpus-per-node=h100:8|a100:8: GPU types accepted, in order of preference (gpu_type unset).
  std::vector<std::string> gpu_types;
  std::optional<uint32_t> gpus_per_task;
  // --gpus-per-socket: GPUs from each of the --sockets-per-node sockets of every node (the
  // controller checks it against the other GPU counts, as Slurm does).
  std::optional<uint32_t> gpus_per_socket;
  std::string gpu_bind;  // srun --gpu-bind (checked by ParseGpuBind)
  // srun --accel-bind=g: as --gpu-bind=closest unless --gpu-bind says otherwise.
  bool accel_bind_gpus = false;
  std::optional<uint64_t> mem_mb, mem_per_gpu_mb, mem_per_cpu_mb;
  std::optional<uint64_t> tmp_mb;            // --tmp: temporary disk per node
  std::map<std::string, uint32_t> licenses;  // -L/--licenses: name -> count
  bool spread_job = false;                   // --spread-job: over as many nodes as it may
  std::optional<uint32_t> min_cpus;          // --mincpus: CPUs per node at least
  std::optional<uint32_t> cpus_per_gpu;      // --cpus-per-gpu (BuildJobSpec turns it into counts)
  std::optional<uint32_t> ntasks_per_gpu;
  // -S/--core-spec, --thread-spec: cores (threads) of each node set aside for the system; the job
  // holds its nodes whole (also with --core-spec=0, which sets none aside).
  std::optional<uint32_t> core_spec, thread_spec;
  // CPU shape. -B S[:C[:T]], --sockets-per-node, --cores-per-socket, --threads-per-core: nodes
  // with at least that many (0: any, -B's '*'); --ntasks-per-core/--ntasks-per-socket: at most N
  // tasks per core (socket) of a node; --hint (compute_bound, memory_bound, multithread,
  // nomultithread), which excludes -B, --threads-per-core and --ntasks-per-core.
  std::optional<uint32_t> sockets_per_node, cores_per_socket, threads_per_core;
  std::optional<uint32_t> ntasks_per_core, ntasks_per_socket;
  bool extra_node_info = false;  // -B was given
  std::optional<std::string> hint;
  bool hint_help = false;                // --hint=help: print HintHelp() and exit (help is set too)
  std::optional<bool> open_mode_append;  // --open-mode=append|truncate (sbatch's, srun's)
  std::optional<int64_t> priority;       // --priority (administrators; srun's outside a job)
  // sbatch --uid/--gid (root only): the user and group the job runs as.
  std::optional<uint32_t> run_as_uid, run_as_gid;
  std::string run_as_user;
  std::optional<std::string> constraint, topology;
  std::optional<std::vector<std::string>> nodelist, exclude;  // expanded host lists
  std::optional<uint32_t> max_switches;
  std::optional<int64_t> switches_wait_ms;
  struct Gres {
    std::string name, type;
    uint32_t count = 1;
  };
  std::vector<Gres> gres;  // --gres items other than whole GPUs
  std::optional<int64_t> time_limit_ms;
  bool hold = false;
  bool parsable = false;
  bool test_only = false;  // sbatch --test-only, srun --test-only (outside a job)
  bool no_requeue = false;
  bool exclusive = false;
  bool help = false;           // -h/--help and --usage
  bool wait = false;           // sbatch -W: return when the job has ended, with its exit code
  bool use_min_nodes = false;  // -N min-max: start with the minimum
  std::string clusters;        // -M/--clusters: must name this cluster (checked once it is known)
  // --export-file: NAME=value definitions (NUL-separated in the file), exported on top of the
  // --export ones.
  std::vector<std::string> export_file_vars;
  // srun/salloc only (OptionSet::kRun / kAlloc).
  bool label = false;             // -l: prefix output lines with the task id
  bool exact = false;             // hold only the CPUs the step asks for
  bool overlap = false;           // share CPUs with other steps
  bool kill_on_bad_exit = false;  // -K: a task failing kills the step
  std::optional<uint64_t> jobid;  // --jobid: a step in this (running) job, as if inside it
  bool pty = false;
  std::optional<uint32_t> immediate_s;  // -I[SECS]: give up when not allocated in time
  std::optional<std::string> input;     // -i
  std::optional<std::string> array;     // sbatch --array
  std::optional<std::string> mpi;       // --mpi: pmi1 (default), pmi, pmi2, none, or list
  // salloc -K/--kill-command[=SIGNAL]: the signal for the command when the allocation is
  // revoked (0: SIGHUP on a terminal, SIGTERM otherwise, as Slurm's default).
  std::optional<int> kill_command;
  // salloc --no-shell: exit once granted; the allocation lasts until scancel or its time limit.
  bool no_shell = false;
  bool bell = false;                 // salloc --bell: ring the terminal bell when granted
  std::optional<uint32_t> relative;  // srun -r: the step's nodes start at the job's node N
  // srun --prolog/--epilog: programs srun runs on its own host before and after the step
  // (empty: none).
  std::string prolog, epilog;
  bool quit_on_interrupt = false;  // srun --quit-on-interrupt: one Ctrl-C ends the step
  // srun --cpu-bind (checked by ParseCpuBind) and -m's second level (how a node's CPUs are dealt
  // to the tasks it binds).
  std::string cpu_bind, cpu_distribution;
  // -m/--distribution (ParseDistribution): `distribution` is the whole as Slurm writes it in
  // SLURM_DISTRIBUTION ("cyclic:block", "plane", "" when not given); `task_distribution` its first
  // level, how a step's task ids go over its nodes ("block", "cyclic", "plane"); `plane_size`
  // plane's N (0 until given, or read from SLURM_DIST_PLANESIZE by ResolveDistribution).
  std::string distribution, task_distribution;
  uint32_t plane_size = 0;
  // srun --multi-prog: the first positional is a configuration file of each rank's command.
  bool multi_prog = false;
  // srun --task-prolog/--task-epilog: run on the nodes around each task, as its user.
  std::string task_prolog, task_epilog;
  // srun --bcast[=DEST]: the program is copied to the step's nodes and run from there; DEST as
  // given ("" when bare: the step's working directory).
  std::optional<std::string> bcast;
  // srun -W/--wait=SECONDS: once the first task has ended, the others get this long (0: no
  // limit). sbatch's -W is `wait`.
  uint32_t step_wait_s = 0;
  // --propagate[=NAMES]: the resource limits (Slurm's names: AS, CORE, CPU, DATA, FSIZE,
  // MEMLOCK, NOFILE, NPROC, RSS, STACK; ALL, NONE) the tasks get from the submitting shell,
  // upper-case and comma-separated ("" when given bare: ALL). Unset: the cluster's default
  // (SubmitContext).
  std::optional<std::string> propagate;
  // --get-user-env[=TIMEOUT][S|L] (sbatch, salloc): the job starts from the user's login
  // environment on its node, the submitted one on top.
  bool get_user_env = false;
  uint32_t get_user_env_timeout_s = 0;  // 0: the default (8 s)
  std::string get_user_env_mode;        // "S", "L" or "" (L)
  bool overcommit = false;              // -O/--overcommit
  // -k/--no-kill: a failed node leaves the job (the step, for srun) running on the others.
  bool no_kill = false;
  // Everything after the options: the script path and its arguments (command line only).
  std::vector<std::string> positional;
};

// Applies options from `args` (no program name) on top of `opts`. Stops at the first
// non-option (the script). `origin` names where they came from in error messages
// ("command line", "script line 3"). INVALID_ARGUMENT for an unknown option or a bad value;
// UNIMPLEMENTED for a Slurm option this version does not support (named in the message).
// Which command's options are accepted: sbatch's, srun's (adds step and I/O options) or
// salloc's.
enum class OptionSet { kBatch, kRun, kAlloc };
Status ParseSubmitArgs(const std::vector<std::string>& args, const std::string& origin,
                       SubmitOptions* opts, OptionSet set = OptionSet::kBatch);

// -m/--distribution=FIRST[:SECOND[:THIRD]][,Pack|NoPack] into `o`: FIRST block, cyclic, plane
// or plane=N ('*': block), the others block, cyclic, fcyclic or '*'; plane takes no other level,
// as Slurm's. INVALID_ARGUMENT for a malformed value, UNIMPLEMENTED for arbitrary (tasks placed
// by SLURM_HOSTFILE).
Status ParseDistribution(const std::string& value, SubmitOptions* o);

// Once the options are read: with `read_variable` (srun), SLURM_DISTRIBUTION from `environment`
// when -m was not given (sbatch and salloc -m set it for their steps); a plane without a size
// takes SLURM_DIST_PLANESIZE's. INVALID_ARGUMENT (naming the variable) for a bad value or a plane
// with no size anywhere.
Status ResolveDistribution(const std::vector<std::string>& environment, bool read_variable,
                           SubmitOptions* o);

// The step's CreateStepRequest.task_distribution: "" (block), "cyclic" or "plane=N".
std::string StepTaskDistribution(const SubmitOptions& o);

// The MPI types srun serves (--mpi, SLURM_MPI_TYPE): none, pmi1 (and its other name pmi),
// pmi2. The default is pmi1, which MPICH's own PMI client speaks.
bool IsMpiType(const std::string& type);
// What `srun --mpi=list` prints (on stdout), in Slurm's form.
std::string MpiTypeList();

// --uid/--gid, once every option is read: root's only (`euid` is the caller's), and --gid only
// with --uid. INVALID_ARGUMENT saying so.
Status CheckRunAs(const SubmitOptions& opts, uint32_t euid);

// The #SBATCH lines at the top of a script (before the first command), each split into words.
struct Directive {
  int line = 0;
  std::vector<std::string> args;
};
Result<std::vector<Directive>> ParseDirectives(const std::string& script);

// Splits a line into words the way a shell would for simple cases: whitespace, single and double
// quotes, backslash escapes. INVALID_ARGUMENT for an unterminated quote.
Result<std::vector<std::string>> SplitWords(const std::string& line);

// Everything a submission needs from the caller's context.
struct SubmitContext {
  std::string script;       // the script text (from the file, stdin or --wrap)
  std::string script_name;  // for the default job name
  std::vector<std::string> environment;
  std::string cwd;
  std::string hostname;
  bool interactive = false;  // srun/salloc: an allocation without a script
  // Without --propagate, the limits the cluster propagates (its propagate_resource_limits less
  // propagate_resource_limits_except, as Slurm's PropagateResourceLimits[Except]).
  std::string propagate_default = "ALL";
  std::string propagate_except;
};

// The resource limits --propagate names ("ALL", "NONE", "NOFILE,STACK"; any case, "RLIMIT_"
// prefixes allowed), as Slurm's names in Slurm's order. INVALID_ARGUMENT for another name.
Result<std::vector<std::string>> ParsePropagateList(const std::string& list);

// The environment variable srun hands a step's tasks one propagated limit in, "SOFT,HARD" in
// decimal with "unlimited" for RLIM_INFINITY (the step's supervisor applies and removes it):
// SLURM_RLIMIT_NOFILE, as Slurm's.
std::string RlimitEnvName(const std::string& limit);

// "SOFT,HARD" in decimal, "unlimited" for RLIM_INFINITY (UINT64_MAX).
std::string RlimitEnvValue(const v1::ResourceLimit& limit);

// The limits a job's or step's tasks get: --propagate's, else `ctx`'s default less its
// exceptions.
Result<std::vector<std::string>> PropagatedLimitNames(const SubmitOptions& opts,
                                                      const SubmitContext& ctx);

// The limits this process has now for `names` (ParsePropagateList's).
std::vector<v1::ResourceLimit> OwnResourceLimits(const std::vector<std::string>& names);

// Builds the job spec. INVALID_ARGUMENT for a script without #! and for contradictory options.
Result<v1::JobSpec> BuildJobSpec(const SubmitOptions& opts, const SubmitContext& ctx);

// srun's step request from the same options: inside a job (`in_job`) its counts, node list and
// --exact (a step's --exclusive is --exact, as since Slurm 21.08); in an allocation of its own,
// which already has the shape the options asked for, the allocation's. The name is -J, else the
// command's base name.
v1::CreateStepRequest BuildStepRequest(const SubmitOptions& opts, uint64_t job_id, bool in_job);

// sbatch's usage text for the options this version supports.
std::string SubmitUsage(const std::string& program);
// What --hint=help prints: the hints and what each does here.
std::string HintHelp();

}  // namespace muster::client
