// The help texts of sbatch (SubmitUsage), --hint=help and --mpi=list.
#include <string>

#include "muster/client/submit_options.h"

namespace muster::client {

std::string HintHelp() {
  return R"(--hint=TYPE: how the job's tasks use the CPUs of its nodes
  compute_bound  every core of each socket, one thread per core
  memory_bound   one core of each socket, one thread per core
  multithread    every hardware thread of each core (what every job gets here)
  nomultithread  one thread per core
  help           this list
compute_bound, memory_bound and nomultithread ask for nodes with a core for each of the tasks
the job puts on them (as --ntasks-per-core=1); tasks are not bound to cores one by one.
)";
}

bool IsMpiType(const std::string& type) {
  return type == "none" || type == "pmi1" || type == "pmi" || type == "pmi2";
}

std::string MpiTypeList() {
  // Slurm 22.05 lists "none" first, then its plugins; pmi1 is muster's own (Slurm serves PMI-1
  // through its pmi2 plugin, and so does muster's).
  return "MPI plugin types are...\n\tnone\n\tpmi1\n\tpmi2\n";
}

std::string SubmitUsage(const std::string& program) {
  return "Usage: " + program + R"( [OPTIONS] [SCRIPT [ARGS...]]
Submit a batch script (or --wrap a command). #SBATCH lines at the top of the script are read
first; options on the command line override them.

  -J, --job-name=NAME        job name (default: the script's file name)
  -p, --partition=P[,P2]     partition(s) to run in (default: the cluster's default)
  -A, --account=ACCOUNT      the account the job charges (default: yours)
  -q, --qos=QOS              its quality of service (default: the account's)
      --reservation=NAME     run inside that advance reservation
      --signal=[B:]SIG[@SECS]  SIG instead of SIGTERM when preempted (to the batch
                             script only with B:)
  -d, --dependency=SPEC      after:ID[+MIN], afterany, afterok, afternotok:ID[:ID], singleton;
                             ',' all of them, '?' any of them
  -N, --nodes=N[-MAX]        number of nodes (a gang: all start together or none); with a
                             range, as many as are free
  -n, --ntasks=N             number of tasks
      --ntasks-per-node=N    tasks on every node
  -c, --cpus-per-task=N      CPUs per task
      --mem=SIZE             memory per node (MiB, or with K/M/G/T)
  -G, --gpus=[TYPE:]N        GPUs for the whole job
      --gpus-per-node=[TYPE:]N
      --gres=gpu[:TYPE]:N    GPUs per node, Slurm's GRES form; also shard:N, MIG slices
                             (gpu:1g.10gb:N) and other GRES (nvme:N), comma-separated
      --gpus-per-task=[TYPE:]N
      --gpus-per-socket=[TYPE:]N  GPUs on each of --sockets-per-node sockets of every node
      --mem-per-gpu=SIZE     memory per allocated GPU (instead of --mem)
      --exclusive            whole nodes
  -S, --core-spec=N          whole nodes, N cores of each set aside for the system (the
      --thread-spec=N        tasks never run there); or N threads
  -O, --overcommit           CPUs for one task per node; tasks may outnumber them
      --propagate[=LIMITS]   the shell's resource limits for the tasks (ALL, NONE, NOFILE,
                             STACK, ...; default: the cluster's)
      --get-user-env[=SECS][S|L]  start from your login environment on the node
      --spread-job           its tasks over as many nodes as it has tasks (without -N)
  -L, --licenses=NAME[:N],...  the cluster's licenses it holds while it runs (scontrol show
                             licenses lists them)
  -C, --constraint=EXPR      node features: a&b (all), a|b (any), a&b|c
  -B, --extra-node-info=S[:C[:T]]
                             nodes with at least S sockets, C cores per socket, T threads
                             per core (* for any); also --sockets-per-node=S,
                             --cores-per-socket=C, --threads-per-core=T
      --ntasks-per-core=N    at most N of a node's tasks per core (per socket with
      --ntasks-per-socket=N  --ntasks-per-socket)
      --hint=HINT            nomultithread, compute_bound, memory_bound (a core for each
                             task), multithread; help lists them
  -w, --nodelist=HOSTS       nodes that must be in the job, e.g. gpu[01-02]
  -x, --exclude=HOSTS        nodes the job must not use
      --switches=N[@TIME]    at most N leaf switches, waiting up to TIME for that
      --topology=SCOPE       nvlink, leaf, block or any: the whole job inside one such
                             domain, waiting as long as it takes (Muster's own)
  -t, --time=TIME            time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
  -o, --output=PATTERN       stdout file (default slurm-%j.out); %j %x %u %N %A %a %%
  -e, --error=PATTERN        stderr file (default: with stdout)
  -D, --chdir=DIR            working directory (default: the current one)
      --export=ALL|NONE|VARS environment to pass (default ALL)
      --wrap=COMMAND         run COMMAND under /bin/sh instead of a script
  -H, --hold                 submit held
      --no-requeue           fail instead of requeueing after a node failure
  -k, --no-kill              go on with the nodes left when one fails (not the script's)
      --parsable             print only the job id
      --test-only            say when and where the job would start; submit nothing
  -a, --array=INDEXES        a job array: one job per index (0-15, 1-9:2, 1,3,5; %N runs at
                             most N at once); SLURM_ARRAY_* and %A/%a in file names
)";
}

}  // namespace muster::client
