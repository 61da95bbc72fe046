// muster run (srun) and muster alloc (salloc): interactive allocations and job steps.
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "cli.h"
#include "muster/client/bcast.h"
#include "muster/client/input_env.h"
#include "muster/client/step_client.h"
#include "muster/client/submit_options.h"
#include "muster/common/config.h"
#include "muster/common/cpu_bind.h"
#include "muster/common/duration.h"
#include "muster/common/gpu_bind.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"

extern char** environ;

namespace muster::cli {
namespace {

std::string RunUsage(const std::string& prog) {
  return "Usage: " + prog + R"( [OPTIONS] COMMAND [ARGS...]
Inside a job (SLURM_JOB_ID set), or with --jobid=ID: run COMMAND as a job step on that job's
nodes (only the job's owner and admins may).
Outside a job: get an allocation with the options below, run the step in it, release it.

  -N, --nodes=N              nodes for the step (or the allocation)
  -n, --ntasks=N             tasks (default: the job's, or one per node with -N)
      --ntasks-per-node=N
  -c, --cpus-per-task=N
  -G, --gpus=N, --gpus-per-node=N, --gpus-per-task=N, --gres=gpu:N
                             GPUs of the step's own (inside a job; without them it sees all
                             of the job's GPUs on its nodes)
      --exact                hold only the CPUs asked for, so steps can run side by side
      --overlap              hold nothing; share CPUs with other steps
      --mpi=pmi1|pmi2|none   serve PMI to the tasks, so MPI programs run without mpiexec:
                             PMI-1 (the default, what MPICH speaks), PMI-2 as well, or none
                             (SLURM_MPI_TYPE sets it too); --mpi=list lists them
  -w, --nodelist=HOSTS       -x, --exclude=HOSTS
  -J, --job-name=NAME        step (or job) name (default: the command's)
  -l, --label                prefix output lines with the task id
  -K, --kill-on-bad-exit     a task failing kills the step's other tasks
  -k, --no-kill              a node lost ends only its own tasks, not the step (and, outside
                             a job, not the allocation: it goes on with the nodes left)
  -I, --immediate[=SECS]     give up when not allocated within SECS (default 1)
  -W, --wait=SECS            once the first task has ended, kill the others after SECS
                             (0: no limit, the default)
      --open-mode=append|truncate  add to the -o/-e files, or empty them first (the default)
      --prolog=EXE, --epilog=EXE   run EXE here (no shell) just before the step starts, or just
                             after it ends, with the command as its arguments and the step's
                             SLURM_* variables; a prolog failing stops the step (none: no EXE)
      --quit-on-interrupt    one Ctrl-C ends the step
      --bcast[=DEST]         copy the program (found in PATH, at most 1 GiB) to each node
                             and run that copy: DEST, or DEST/ (default: the step's
                             directory) plus slurm_bcast_JOB.STEP_NODE
  Outside a job only (options for the allocation, as sbatch's: -p -t --mem -C --exclusive ...):
      --priority=N|TOP       the allocation's priority (administrators)
      --test-only            say when and where the allocation would start; run nothing
Ctrl-C is forwarded to the tasks; twice within a second ends the step.
The exit code is the highest task exit code (128+N for a task killed by signal N).
)";
}

std::string AllocUsage(const std::string& prog) {
  return "Usage: " + prog + R"( [OPTIONS] [COMMAND [ARGS...]]
Get an allocation, run COMMAND (default: $SHELL) with its SLURM_* environment, and release the
allocation when COMMAND ends. Steps inside it run with srun / muster run.

Options are sbatch's (-N -n -c -G --gpus-per-node -p -t --mem -C -w -x -J ...), plus
  -I, --immediate[=SECS]     give up when not allocated within SECS (default 1)
      --priority=N|TOP       the allocation's priority (administrators)
)";
}

std::string BaseName(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::vector<std::string> Environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

std::string Cwd() {
  char cwd[4096];
  return ::getcwd(cwd, sizeof cwd) ? cwd : "/";
}

std::string HostName() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// Options that shape a new allocation but mean nothing for a step inside an existing one.
Status RefuseAllocationOnly(const client::SubmitOptions& o, const std::string& job) {
  auto no = [&](const char* opt) {
    return Unimplemented("option " + std::string(opt) +
                         " applies to a new allocation; inside job " + job +
                         " it is not supported for a step");
  };
  if (o.partition) return no("--partition");
  if (o.time_limit_ms) return no("--time");
  if (o.mem_mb || o.mem_per_gpu_mb || o.mem_per_cpu_mb) return no("--mem");
  if (o.min_cpus) return no("--mincpus");
  if (o.cpus_per_gpu) return no("--cpus-per-gpu");
  if (o.ntasks_per_gpu) return no("--ntasks-per-gpu");
  if (o.constraint) return no("--constraint");
  if (o.max_switches) return no("--switches");
  if (o.topology) return no("--topology");
  if (o.hold) return no("--hold");
  if (o.min_nodes) return no("--nodes=MIN-MAX");
  if (!o.gres.empty()) return no("--gres (other than gpu)");
  if (o.gpu_type) return no("a GPU type");
  if (o.export_vars && *o.export_vars != "ALL") return no("--export");
  if (o.immediate_s) return no("--immediate");
  if (o.priority) return no("--priority");
  if (o.test_only) return no("--test-only");
  if (o.tmp_mb) return no("--tmp");
  if (!o.licenses.empty()) return no("--licenses");
  if (o.spread_job) return no("--spread-job");
  if (o.core_spec) return no("-S/--core-spec");
  if (o.thread_spec) return no("--thread-spec");
  if (o.run_as_uid || o.run_as_gid) return no("--uid/--gid");
  if (o.extra_node_info) return no("-B/--extra-node-info");
  if (o.gpus_per_socket) return no("--gpus-per-socket");
  if (o.sockets_per_node) return no("--sockets-per-node");
  if (o.cores_per_socket) return no("--cores-per-socket");
  if (o.threads_per_core) return no("--threads-per-core");
  if (o.ntasks_per_core) return no("--ntasks-per-core");
  if (o.ntasks_per_socket) return no("--ntasks-per-socket");
  // multithread is what a step does: its tasks share every thread of the job's CPUs.
  if (o.hint && *o.hint != "multithread") return no(("--hint=" + *o.hint).c_str());
  return Status::Ok();
}

// srun -r N: the step's nodes are the job's from its N-th (0 is the first): -N of them, or all
// the rest; as Slurm, N past the job's nodes is an error, a count past them is cut with a warning.
Status RelativeNodes(client::ControllerClient& controller, uint64_t job_id,
                     client::SubmitOptions* o) {
  if (o->nodelist || o->exclude) {
    return InvalidArgument("--relative is not allowed with -w/--nodelist or -x/--exclude");
  }
  MUSTER_ASSIGN_OR_RETURN(v1::GetJobResponse job, controller.GetJob(job_id));
  const auto& nodes = job.job().nodes();
  const uint32_t from = *o->relative;
  if (from >= static_cast<uint32_t>(nodes.size())) {
    return InvalidArgument("--relative=" + std::to_string(from) + ": job " +
                           std::to_string(job_id) + " has " + std::to_string(nodes.size()) +
                           " nodes (0 is the first)");
  }
  uint32_t count = static_cast<uint32_t>(nodes.size()) - from;
  if (o->nodes && *o->nodes > count) {
    std::fprintf(stderr, "%s: warning: --relative=%u leaves %u nodes; the step gets those\n",
                 ProgramName("run").c_str(), from, count);
  } else if (o->nodes) {
    count = *o->nodes;
  }
  o->nodelist.emplace(nodes.begin() + from, nodes.begin() + from + count);
  o->nodes = count;
  return Status::Ok();
}

// srun's I/O options: -i none|all|TASK|FILE, -o/-e PATTERN (none: /dev/null), --pty.
Status StepIo(const client::SubmitOptions& o, client::StepOptions* step) {
  step->pty = o.pty;
  if (o.input) {
    const std::string& in = *o.input;
    if (in == "none") {
      step->stdin_mode = v1::StepLaunchRequest::STDIN_NONE;
    } else if (in == "all") {
      step->stdin_mode = v1::StepLaunchRequest::STDIN_ALL;
    } else if (auto task = ParseUint(in); task && *task < (1u << 20)) {
      // Checked here, before the step exists, when the task count is given.
      if (o.ntasks && *task >= *o.ntasks) {
        return InvalidArgument("--input=" + in + ": the step has tasks 0-" +
                               std::to_string(*o.ntasks - 1));
      }
      step->stdin_task = static_cast<uint32_t>(*task);
    } else {
      step->stdin_mode = v1::StepLaunchRequest::STDIN_NONE;
      step->stdin_pattern = in;  // a file each task opens on its node
    }
    if (o.pty && step->stdin_mode != v1::StepLaunchRequest::STDIN_TASK) {
      return InvalidArgument("--pty reads the terminal: it cannot be combined with --input=" + in);
    }
  }
  for (auto [opt, value, pattern] : {std::tuple{"--output", &o.output, &step->stdout_pattern},
                                     std::tuple{"--error", &o.error, &step->stderr_pattern}}) {
    if (!*value || **value == "all") continue;
    if (ParseUint(**value)) {
      return Unimplemented(std::string(opt) + "=TASK (one task's output only) is not supported");
    }
    *pattern = **value == "none" ? "/dev/null" : **value;
  }
  if (o.pty && !step->stdout_pattern.empty()) {
    return InvalidArgument("--pty writes to the terminal: it cannot be combined with --output");
  }
  return Status::Ok();
}

const char* JobIdFromEnv() {
  for (const char* k : {"MUSTER_JOB_ID", "SLURM_JOB_ID", "SLURM_JOBID"}) {
    const char* v = std::getenv(k);
    if (v && *v) return v;
  }
  return nullptr;
}

Result<v1::JobSpec> AllocationSpec(const client::SubmitOptions& o, const std::string& command) {
  client::SubmitContext ctx;
  ctx.interactive = true;
  ctx.environment = Environment();
  ctx.cwd = Cwd();
  ctx.hostname = HostName();
  ApplyClusterDefaults(&ctx);
  client::SubmitOptions named = o;
  if (!named.job_name) named.job_name = BaseName(command);
  return client::BuildJobSpec(named, ctx);
}

// srun --test-only outside a job: the allocation is checked as a submission would be and its
// start forecast, as sbatch --test-only does; nothing is submitted or run.
int TestOnly(client::ControllerClient& controller, const v1::JobSpec& spec,
             const client::SubmitOptions& o, const std::string& prog) {
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  req.mutable_spec()->set_interactive(true);
  req.set_test_only(true);
  if (o.priority) req.set_priority(*o.priority);
  auto resp = controller.SubmitJob(req);
  if (!resp.ok()) return Fail("run", resp.status());
  const v1::TestOnlyResult& t = resp->test_only();
  const std::string job = "Job " + std::to_string(resp->job_id());
  if (t.start_ms() > 0) {
    std::string where;
    if (t.nodes_size() > 0) {
      where = " on nodes " + CompressHostlist({t.nodes().begin(), t.nodes().end()});
    }
    if (!t.partition().empty()) where += " in partition " + t.partition();
    std::fprintf(stderr, "%s: %s to start at %s using %u processors%s\n", prog.c_str(), job.c_str(),
                 FormatTimestamp(t.start_ms()).c_str(), t.cpus(), where.c_str());
  } else {
    std::fprintf(stderr, "%s: %s would wait (%s) with no start time forecast: %s\n", prog.c_str(),
                 job.c_str(), t.reason().c_str(), t.reason_detail().c_str());
  }
  return kExitOk;
}

}  // namespace

int CmdRun(int argc, char** argv) {
  const std::string prog = ProgramName("run");
  std::vector<std::string> args(argv + 1, argv + argc);
  client::SubmitOptions o;
  Status s = client::ParseSubmitArgs(args, "command line", &o, client::OptionSet::kRun);
  if (!s.ok())
    return s.code() == StatusCode::kUnimplemented ? Fail("run", s) : Usage("run", s.message());
  if (o.help) {
    std::fputs((o.hint_help ? client::HintHelp() : RunUsage(prog)).c_str(), stdout);
    return kExitOk;
  }
  const char* mpi_env = std::getenv("SLURM_MPI_TYPE");
  if (o.mpi.value_or(mpi_env ? mpi_env : "") == "list") {
    // As Slurm's srun: the MPI types it serves, and nothing run.
    std::fputs(client::MpiTypeList().c_str(), stdout);
    return kExitOk;
  }
  if (o.positional.empty()) return Usage("run", "no command given");
  if (s = client::CheckRunAs(o, ::geteuid()); !s.ok()) return Usage("run", s.message());
  // -m, else SLURM_DISTRIBUTION as srun reads it (sbatch -m and salloc -m set it for the job's
  // steps); plane's size, when not given, from SLURM_DIST_PLANESIZE.
  if (s = client::ResolveDistribution(Environment(), true, &o); !s.ok()) {
    return s.code() == StatusCode::kUnimplemented ? Fail("run", s) : Usage("run", s.message());
  }

  client::StepOptions step;
  if (s = StepIo(o, &step); !s.ok()) return Fail("run", s);
  step.program = FrontEnd().empty() ? "muster run" : FrontEnd();
  step.argv = o.positional;
  step.environment = Environment();
  if (!o.distribution.empty()) {
    // The tasks see the layout they were given (the nodes say block when srun names none).
    std::erase_if(step.environment, [](const std::string& e) {
      return e.rfind("SLURM_DISTRIBUTION=", 0) == 0 || e.rfind("SLURM_DIST_PLANESIZE=", 0) == 0;
    });
    step.environment.push_back("SLURM_DISTRIBUTION=" + o.distribution);
    if (o.task_distribution == "plane") {
      step.environment.push_back("SLURM_DIST_PLANESIZE=" + std::to_string(o.plane_size));
    }
  }
  {
    // --propagate (else the cluster's default): this shell's limits for the step's tasks, in
    // SLURM_RLIMIT_* (the step's supervisor applies and removes them), as Slurm's srun.
    client::SubmitContext defaults;
    if (!o.propagate) ApplyClusterDefaults(&defaults);
    auto names = client::PropagatedLimitNames(o, defaults);
    if (!names.ok()) return Usage("run", names.status().message());
    for (const v1::ResourceLimit& l : client::OwnResourceLimits(*names)) {
      std::erase_if(step.environment, [&](const std::string& kv) {
        return kv.rfind(client::RlimitEnvName(l.name()) + "=", 0) == 0;
      });
      step.environment.push_back(client::RlimitEnvName(l.name()) + "=" + client::RlimitEnvValue(l));
    }
  }
  step.work_dir = o.chdir.value_or(Cwd());
  step.label = o.label;
  step.kill_on_bad_exit = o.kill_on_bad_exit;
  step.no_kill = o.no_kill;
  step.open_mode_append = o.open_mode_append.value_or(false);
  step.prolog = o.prolog;
  step.epilog = o.epilog;
  step.quit_on_interrupt = o.quit_on_interrupt;
  step.wait_s = o.step_wait_s;
  // Inside a job, its --gpus-per-task and --gpu-bind reach srun through the environment, as
  // Slurm's input variables; the options win. The job's --gpus-per-task only shares out the GPUs
  // the step sees (the job's): the step asks for no GPUs of its own for it, which a job holding
  // MIG slices or shards could not.
  step.gpus_per_task = o.gpus_per_task.value_or(0);
  if (JobIdFromEnv() || o.jobid) {
    if (const char* g = std::getenv("SLURM_GPUS_PER_TASK"); g && !o.gpus_per_task) {
      if (auto n = ParseUint(g); n && *n > 0 && *n <= 1024) {
        step.gpus_per_task = static_cast<uint32_t>(*n);
      }
    }
    if (const char* b = std::getenv("SLURM_GPU_BIND"); b && *b && o.gpu_bind.empty()) {
      if (auto bind = ParseGpuBind(b); !bind.ok()) return Fail("run", bind.status());
      o.gpu_bind = b;
    }
  }
  // --accel-bind=g asks for what --gpu-bind=closest does; a --gpu-bind of its own wins.
  if (o.gpu_bind.empty() && o.accel_bind_gpus) o.gpu_bind = "closest";
  step.gpu_bind = o.gpu_bind;
  // --cpu-bind, else SLURM_CPU_BIND as srun reads it (-m's second level deals the CPUs).
  if (const char* b = std::getenv("SLURM_CPU_BIND"); b && *b && o.cpu_bind.empty()) {
    if (auto bind = ParseCpuBind(b); !bind.ok()) {
      return Fail("run", bind.status().Prepend("SLURM_CPU_BIND"));
    }
    o.cpu_bind = b;
  }
  step.cpu_bind = o.cpu_bind;
  step.cpu_distribution = o.cpu_distribution;
  // --task-prolog/--task-epilog, else SLURM_TASK_PROLOG/SLURM_TASK_EPILOG; the nodes run them in
  // the step's directory, so a relative path is taken from there.
  for (auto [value, var, out] :
       {std::tuple{&o.task_prolog, "SLURM_TASK_PROLOG", &step.task_prolog},
        std::tuple{&o.task_epilog, "SLURM_TASK_EPILOG", &step.task_epilog}}) {
    std::string path = *value;
    if (const char* e = std::getenv(var); path.empty() && e) path = e;
    if (!path.empty() && path[0] != '/') {
      const std::string dir =
          StartsWith(step.work_dir, "/") ? step.work_dir : Cwd() + "/" + step.work_dir;
      path = dir + "/" + path;
    }
    *out = path;
  }
  // --bcast: the program found as execvp finds it, and checked, before anything is allocated.
  if (o.bcast) {
    if (o.multi_prog) {
      return Fail("run", InvalidArgument("--bcast copies one program: it cannot be combined "
                                         "with --multi-prog (each rank's command of its own)"));
    }
    const char* path = std::getenv("PATH");
    auto program = client::FindProgram(o.positional[0], path ? path : "/bin:/usr/bin");
    if (!program.ok()) return Fail("run", program.status());
    auto source = client::OpenBcastSource(*program);
    if (!source.ok()) return Fail("run", source.status());
    ::close(source->fd);  // opened again to be sent, once the step exists
    auto dest = client::BcastDestination(
        *o.bcast, StartsWith(step.work_dir, "/") ? step.work_dir : Cwd() + "/" + step.work_dir);
    if (!dest.ok()) return Fail("run", dest.status());
    step.bcast_program = *program;
    step.bcast_dest = *dest;
  }
  // --mpi, else SLURM_MPI_TYPE as srun reads it, else PMI-1 (muster's MpiDefault). A --mpi
  // reaches the tasks as SLURM_MPI_TYPE, as Slurm's srun exports it.
  const std::string mpi = o.mpi.value_or(mpi_env && *mpi_env ? mpi_env : "pmi1");
  if (!client::IsMpiType(mpi)) {
    return Fail("run", Unimplemented("SLURM_MPI_TYPE=" + mpi +
                                     " is not supported; use pmi1 (the default), pmi2 or none"));
  }
  step.pmi = mpi != "none";
  step.pmi2 = mpi == "pmi2";
  if (o.mpi) {
    std::erase_if(step.environment,
                  [](const std::string& e) { return e.rfind("SLURM_MPI_TYPE=", 0) == 0; });
    step.environment.push_back("SLURM_MPI_TYPE=" + *o.mpi);
  }

  auto controller = ConnectController(o.clusters);
  if (!controller.ok()) return Fail("run", controller.status());
  // --multi-prog: the command is a configuration of each rank's own; what follows it is added to
  // every rank's. Checked now against -n when given, and against the step once it exists.
  if (o.multi_prog) {
    auto config = client::ReadMultiProg(o.positional[0]);
    if (!config.ok()) return Fail("run", config.status());
    step.multi_prog_args.assign(o.positional.begin() + 1, o.positional.end());
    if (o.ntasks) {
      auto commands = client::MultiProgCommands(*config, *o.ntasks, step.multi_prog_args);
      if (!commands.ok()) return Fail("run", commands.status());
    }
    step.multi_prog = std::move(*config);
  }
  if (Status st = client::CatchForwardedSignals(); !st.ok()) return Fail("run", st);

  // --jobid: a step in a job already running (srun --jobid), as from inside it.
  const std::string jobid_arg = o.jobid ? std::to_string(*o.jobid) : "";
  const char* in_job = o.jobid ? jobid_arg.c_str() : JobIdFromEnv();
  if (in_job) {
    auto id = ParseUint(in_job);
    if (!id)
      return Fail("run", InvalidArgument(std::string("bad job id in environment: ") + in_job));
    if (s = RefuseAllocationOnly(o, in_job); !s.ok()) return Fail("run", s);
    if (o.relative) {
      if (s = RelativeNodes(*controller, *id, &o); !s.ok()) return Fail("run", s);
    }
    step.shape = client::BuildStepRequest(o, *id, /*in_job=*/true);
    auto rc = client::RunStep(*controller, step, stdout, stderr);
    if (!rc.ok()) return Fail("run", rc.status());
    return *rc;
  }
  if (o.relative) {
    return Fail("run", InvalidArgument("--relative places a step among a job's nodes: it needs a "
                                       "job (run it inside one, or with --jobid)"));
  }

  // Outside a job: an allocation of our own, held while the step runs.
  auto spec = AllocationSpec(o, o.positional[0]);
  if (!spec.ok()) return Fail("run", spec.status());
  if (o.test_only) return TestOnly(*controller, *spec, o, step.program);
  client::AllocateOptions ao;
  ao.program = step.program;
  ao.immediate_s = static_cast<int>(o.immediate_s.value_or(0));
  ao.priority = o.priority;
  auto job = client::Allocate(*controller, *spec, ao, stderr);
  if (!job.ok()) return Fail("run", job.status());
  step.shape = client::BuildStepRequest(o, job->id(), /*in_job=*/false);
  auto rc = client::RunStep(*controller, step, stdout, stderr);
  int code = rc.ok() ? *rc : 1;
  Status released =
      controller->ReleaseAllocation(job->id(), code > 128 ? 0 : code, code > 128 ? code - 128 : 0);
  if (!rc.ok()) return Fail("run", rc.status());
  if (!released.ok()) Fail("run", released.Prepend("releasing the allocation"));
  return code;
}

int CmdAlloc(int argc, char** argv) {
  const std::string prog = ProgramName("alloc");
  std::vector<std::string> args(argv + 1, argv + argc);
  client::SubmitOptions o;
  // As salloc: the SALLOC_* variables (salloc's only) first, the command line on top of them.
  Status s = client::ApplyInputEnv(FrontEnd(), Environment(), &o);
  if (s.ok()) s = client::ParseSubmitArgs(args, "command line", &o, client::OptionSet::kAlloc);
  if (!s.ok()) {
    return s.code() == StatusCode::kUnimplemented ? Fail("alloc", s) : Usage("alloc", s.message());
  }
  if (o.help) {
    std::fputs((o.hint_help ? client::HintHelp() : AllocUsage(prog)).c_str(), stdout);
    return kExitOk;
  }
  if (s = client::CheckRunAs(o, ::geteuid()); !s.ok()) return Usage("alloc", s.message());
  if (s = client::ResolveDistribution(Environment(), false, &o); !s.ok()) {
    return Usage("alloc", s.message());
  }
  std::vector<std::string> command = o.positional;
  if (command.empty()) {
    const char* shell = std::getenv("SHELL");
    command.push_back(shell && *shell ? shell : "/bin/sh");
  }
  const std::string label = FrontEnd().empty() ? "muster alloc" : FrontEnd();
  auto config = LoadConfig(ResolveConfigPath(""));
  if (!config.ok()) return Fail("alloc", config.status());
  if (s = CheckClusters(o.clusters, config->cluster_name); !s.ok()) return Fail("alloc", s);
  auto controller = client::ControllerClient::ConnectTo(*config);
  if (!controller.ok()) return Fail("alloc", controller.status());
  auto spec = AllocationSpec(o, command[0]);
  if (!spec.ok()) return Fail("alloc", spec.status());
  spec->set_no_shell(o.no_shell);
  if (Status st = client::CatchForwardedSignals(); !st.ok()) return Fail("alloc", st);
  client::AllocateOptions ao;
  ao.program = "salloc";
  ao.immediate_s = static_cast<int>(o.immediate_s.value_or(0));
  ao.priority = o.priority;
  auto job = client::Allocate(*controller, *spec, ao, stderr);
  if (!job.ok()) return Fail("alloc", job.status());
  const std::string id = std::to_string(job->id());
  std::fprintf(stderr, "%s%s: Granted job allocation %s\n", o.bell ? "\a" : "", label.c_str(),
               id.c_str());
  // --no-shell: the allocation is left to srun --jobid, scancel and its time limit.
  if (o.no_shell) return kExitOk;

  // The allocation's environment, as salloc sets it for the command.
  std::vector<std::string> names;
  std::vector<uint32_t> tasks, cpus;
  for (const auto& na : job->allocation().nodes()) {
    names.push_back(na.node());
    tasks.push_back(na.ntasks());
    cpus.push_back(static_cast<uint32_t>(na.cpu_ids_size()));
  }
  std::vector<std::pair<std::string, std::string>> vars = {
      {"JOB_ID", id},
      {"JOBID", id},
      {"JOB_NAME", job->name()},
      {"JOB_NODELIST", CompressHostlist(names)},
      {"NODELIST", CompressHostlist(names)},
      {"JOB_NUM_NODES", std::to_string(names.size())},
      {"NNODES", std::to_string(names.size())},
      {"TASKS_PER_NODE", CompressCounts(tasks)},
      {"JOB_CPUS_PER_NODE", CompressCounts(cpus)},
      {"JOB_PARTITION", job->partition()},
      {"CLUSTER_NAME", config->cluster_name},
      {"SUBMIT_DIR", Cwd()},
      {"SUBMIT_HOST", HostName()},
  };
  if (o.ntasks) {
    vars.push_back({"NTASKS", std::to_string(job->num_tasks())});
    vars.push_back({"NPROCS", std::to_string(job->num_tasks())});
  }
  if (o.cpus_per_task) vars.push_back({"CPUS_PER_TASK", std::to_string(*o.cpus_per_task)});
  if (job->mem_per_node_mb())
    vars.push_back({"MEM_PER_NODE", std::to_string(job->mem_per_node_mb())});
  // What the allocation's steps inherit (srun reads them).
  if (o.gpus_per_task) vars.push_back({"GPUS_PER_TASK", std::to_string(*o.gpus_per_task)});
  if (!o.gpu_bind.empty()) vars.push_back({"GPU_BIND", o.gpu_bind});
  if (o.ntasks_per_core) vars.push_back({"NTASKS_PER_CORE", std::to_string(*o.ntasks_per_core)});
  if (o.ntasks_per_socket) {
    vars.push_back({"NTASKS_PER_SOCKET", std::to_string(*o.ntasks_per_socket)});
  }
  if (o.threads_per_core.value_or(0) > 0) {
    vars.push_back({"THREADS_PER_CORE", std::to_string(*o.threads_per_core)});
  }
  if (!o.distribution.empty()) {  // -m: the steps' layout (the allocation's is fixed)
    vars.push_back({"DISTRIBUTION", o.distribution});
    if (o.task_distribution == "plane") {
      vars.push_back({"DIST_PLANESIZE", std::to_string(o.plane_size)});
    }
  }

  pid_t child = ::fork();
  if (child < 0) {
    controller->ReleaseAllocation(job->id(), 1, 0).IgnoreError();
    return Fail("alloc", ErrnoStatus("fork", errno));
  }
  if (child == 0) {
    client::ReleaseForwardedSignals();
    for (const auto& [k, v] : vars) {
      ::setenv(("SLURM_" + k).c_str(), v.c_str(), 1);
      ::setenv(("MUSTER_" + k).c_str(), v.c_str(), 1);
    }
    if (!config->source.empty()) ::setenv("MUSTER_CONF", config->source.c_str(), 0);
    if (o.run_as_uid) {
      // --uid/--gid (root only): the command runs as the allocation's user, as Slurm's salloc
      // drops its permissions once the allocation is granted.
      const gid_t gid = o.run_as_gid.value_or(0);
      if (::initgroups(o.run_as_user.c_str(), gid) != 0 || ::setgid(gid) != 0 ||
          ::setuid(*o.run_as_uid) != 0) {
        std::fprintf(stderr, "%s: error: cannot become %s (uid %u): %s\n", label.c_str(),
                     o.run_as_user.c_str(), *o.run_as_uid, std::strerror(errno));
        ::_exit(1);
      }
    }
    std::vector<char*> cargv;
    for (auto& a : command) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "%s: error: cannot run %s: %s\n", label.c_str(), cargv[0],
                 std::strerror(errno));
    ::_exit(127);
  }
  // The command runs in the foreground; Ctrl-C from the terminal reaches it directly. Termination
  // signals sent to salloc are passed on. The allocation ending under it ends the command.
  int status = 0;
  bool revoked = false;
  int ticks = 0;
  while (true) {
    pid_t w = ::waitpid(child, &status, WNOHANG);
    if (w == child) break;
    if (w < 0 && errno != EINTR) break;
    for (int sig : client::WaitForSignals(20)) {
      if (sig != SIGINT) ::kill(child, sig);  // a terminal's Ctrl-C reaches the child itself
    }
    if (++ticks % 50 == 0 && !revoked) {
      auto now = controller->GetJob(job->id());
      if (now.ok() && now->job().state() != v1::RUNNING && now->job().state() != v1::SUSPENDED) {
        std::fprintf(stderr, "%s: Job allocation %s has been revoked.\n", label.c_str(),
                     id.c_str());
        revoked = true;
        if (o.kill_command) {
          // -K: the one signal asked for (Slurm's default: SIGHUP on a terminal, else SIGTERM).
          const int sig =
              *o.kill_command ? *o.kill_command : (::isatty(STDIN_FILENO) ? SIGHUP : SIGTERM);
          ::kill(child, sig);
        } else {
          ::kill(child, SIGHUP);
          ::kill(child, SIGTERM);
        }
      }
    }
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::fprintf(stderr, "%s: Relinquishing job allocation %s\n", label.c_str(), id.c_str());
  if (!revoked) {
    Status r = controller->ReleaseAllocation(job->id(), WIFEXITED(status) ? code : 0,
                                             WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (!r.ok()) Fail("alloc", r.Prepend("releasing the allocation"));
  }
  return code;
}

}  // namespace muster::cli
