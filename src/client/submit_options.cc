#include "muster/client/submit_options.h"

#include <getopt.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "muster/common/clock.h"
#include "muster/common/dependency.h"
#include "muster/common/duration.h"
#include "muster/common/gpu_bind.h"
#include "muster/common/signals.h"
#include "muster/common/strings.h"
#include "option_values.h"

namespace muster::client {
namespace {

enum LongOnly {
  kGpusPerNode = 1000,
  kGres,
  kMem,
  kNtasksPerNode,
  kExport,
  kWrap,
  kParsable,
  kNoRequeue,
  kRequeue,
  kExclusive,
  kSwitches,
  kTopology,
  kMemPerGpu,
  kGpusPerTask,
  kExact,
  kOverlap,
  kPty,
  kMpi,
  kTestOnly,
  kJobId,
  kDependency,
  kSignal,
  kNice,
  kKillOnInvalidDep,
  kDeadline,
  kReservation,
  kCpuBind,
  // Accepted with no effect: nothing Muster does for a job changes with them
  // (docs/slurm-compat.md).
  kMailType,
  kMailUser,
  kComment,
  kWckey,
  kAcctgFreq,
  kProfile,
  kTimeMin,
  kDelayBoot,
  kCpuFreq,
  kGpuFreq,
  kPower,
  kMcsLabel,
  kNetwork,
  kWaitAllNodes,
  kPrefer,
  kClusterConstraint,
  kContiguous,
  kReboot,
  kBatchFeatures,
  kGresFlags,
  kMsgTimeout,
  kSlurmdDebug,
  kResvPorts,
  kBcastExclude,
  kSendLibs,
  kCompress,
  kNoBell,
  // Implemented.
  kIgnorePbs,
  kUsage,
  kUseMinNodes,
  kExportFile,
  kDistribution,
  kGpuBind,
  kMemBind,
  kBell,
  kMemPerCpu,
  kMinCpus,
  kCpusPerGpu,
  kNtasksPerGpu,
  kOpenMode,
  kPriority,
  kUid,
  kGid,
  kProlog,
  kEpilog,
  kQuitOnInterrupt,
  // Refused (KnownUnsupported), but named here so that getopt does not take it for an
  // abbreviation of a longer option it knows (--bcast for --bcast-exclude).
  kBcast,
};

const struct option kLongOptions[] = {
    {"job-name", required_argument, nullptr, 'J'},
    {"partition", required_argument, nullptr, 'p'},
    {"account", required_argument, nullptr, 'A'},
    {"dependency", required_argument, nullptr, 'd'},
    {"qos", required_argument, nullptr, 'q'},
    {"signal", required_argument, nullptr, kSignal},
    {"nice", optional_argument, nullptr, kNice},
    {"kill-on-invalid-dep", required_argument, nullptr, kKillOnInvalidDep},
    {"begin", required_argument, nullptr, 'b'},
    {"deadline", required_argument, nullptr, kDeadline},
    {"reservation", required_argument, nullptr, kReservation},
    {"nodes", required_argument, nullptr, 'N'},
    {"ntasks", required_argument, nullptr, 'n'},
    {"ntasks-per-node", required_argument, nullptr, kNtasksPerNode},
    {"cpus-per-task", required_argument, nullptr, 'c'},
    {"mem", required_argument, nullptr, kMem},
    {"gpus", required_argument, nullptr, 'G'},
    {"gpus-per-node", required_argument, nullptr, kGpusPerNode},
    {"gres", required_argument, nullptr, kGres},
    {"time", required_argument, nullptr, 't'},
    {"output", required_argument, nullptr, 'o'},
    {"error", required_argument, nullptr, 'e'},
    {"chdir", required_argument, nullptr, 'D'},
    {"export", required_argument, nullptr, kExport},
    {"wrap", required_argument, nullptr, kWrap},
    {"hold", no_argument, nullptr, 'H'},
    {"parsable", no_argument, nullptr, kParsable},
    {"test-only", no_argument, nullptr, kTestOnly},
    {"array", required_argument, nullptr, 'a'},
    {"no-requeue", no_argument, nullptr, kNoRequeue},
    {"requeue", no_argument, nullptr, kRequeue},
    {"exclusive", optional_argument, nullptr, kExclusive},
    {"constraint", required_argument, nullptr, 'C'},
    {"nodelist", required_argument, nullptr, 'w'},
    {"exclude", required_argument, nullptr, 'x'},
    {"switches", required_argument, nullptr, kSwitches},
    {"topology", required_argument, nullptr, kTopology},
    {"mem-per-gpu", required_argument, nullptr, kMemPerGpu},
    {"gpus-per-task", required_argument, nullptr, kGpusPerTask},
    {"help", no_argument, nullptr, 'h'},
    // srun and salloc.
    {"label", no_argument, nullptr, 'l'},
    {"exact", no_argument, nullptr, kExact},
    {"overlap", no_argument, nullptr, kOverlap},
    {"kill-on-bad-exit", optional_argument, nullptr, 'K'},
    {"pty", no_argument, nullptr, kPty},
    {"immediate", optional_argument, nullptr, 'I'},
    {"input", required_argument, nullptr, 'i'},
    {"unbuffered", no_argument, nullptr, 'u'},
    {"mpi", required_argument, nullptr, kMpi},
    {"cpu-bind", required_argument, nullptr, kCpuBind},
    {"mail-type", required_argument, nullptr, kMailType},
    {"mail-user", required_argument, nullptr, kMailUser},
    {"comment", required_argument, nullptr, kComment},
    {"wckey", required_argument, nullptr, kWckey},
    {"acctg-freq", required_argument, nullptr, kAcctgFreq},
    {"profile", required_argument, nullptr, kProfile},
    {"time-min", required_argument, nullptr, kTimeMin},
    {"delay-boot", required_argument, nullptr, kDelayBoot},
    {"quiet", no_argument, nullptr, 'Q'},
    {"verbose", no_argument, nullptr, 'v'},
    {"jobid", required_argument, nullptr, kJobId},
    {"cpu-freq", required_argument, nullptr, kCpuFreq},
    {"gpu-freq", required_argument, nullptr, kGpuFreq},
    {"power", required_argument, nullptr, kPower},
    {"mcs-label", required_argument, nullptr, kMcsLabel},
    {"network", required_argument, nullptr, kNetwork},
    {"wait-all-nodes", required_argument, nullptr, kWaitAllNodes},
    {"prefer", required_argument, nullptr, kPrefer},
    {"cluster-constraint", required_argument, nullptr, kClusterConstraint},
    {"contiguous", no_argument, nullptr, kContiguous},
    {"reboot", no_argument, nullptr, kReboot},
    {"batch", required_argument, nullptr, kBatchFeatures},
    {"gres-flags", required_argument, nullptr, kGresFlags},
    {"msg-timeout", required_argument, nullptr, kMsgTimeout},
    {"slurmd-debug", required_argument, nullptr, kSlurmdDebug},
    {"resv-ports", optional_argument, nullptr, kResvPorts},
    {"bcast-exclude", required_argument, nullptr, kBcastExclude},
    {"bcast", optional_argument, nullptr, kBcast},
    {"send-libs", optional_argument, nullptr, kSendLibs},
    {"compress", optional_argument, nullptr, kCompress},
    {"threads", required_argument, nullptr, 'T'},
    {"disable-status", no_argument, nullptr, 'X'},
    {"preserve-env", no_argument, nullptr, 'E'},
    {"oversubscribe", no_argument, nullptr, 's'},
    {"bell", no_argument, nullptr, kBell},
    {"no-bell", no_argument, nullptr, kNoBell},
    {"ignore-pbs", no_argument, nullptr, kIgnorePbs},
    {"usage", no_argument, nullptr, kUsage},
    {"use-min-nodes", no_argument, nullptr, kUseMinNodes},
    {"export-file", required_argument, nullptr, kExportFile},
    {"nodefile", required_argument, nullptr, 'F'},
    {"clusters", required_argument, nullptr, 'M'},
    {"wait", no_argument, nullptr, 'W'},
    {"distribution", required_argument, nullptr, 'm'},
    {"gpu-bind", required_argument, nullptr, kGpuBind},
    {"mem-bind", required_argument, nullptr, kMemBind},
    {"mem-per-cpu", required_argument, nullptr, kMemPerCpu},
    {"mincpus", required_argument, nullptr, kMinCpus},
    {"cpus-per-gpu", required_argument, nullptr, kCpusPerGpu},
    {"ntasks-per-gpu", required_argument, nullptr, kNtasksPerGpu},
    {"open-mode", required_argument, nullptr, kOpenMode},
    {"priority", required_argument, nullptr, kPriority},
    {"uid", required_argument, nullptr, kUid},
    {"gid", required_argument, nullptr, kGid},
    {"prolog", required_argument, nullptr, kProlog},
    {"epilog", required_argument, nullptr, kEpilog},
    {"quit-on-interrupt", no_argument, nullptr, kQuitOnInterrupt},
    {nullptr, 0, nullptr, 0},
};
constexpr const char* kShortOptions =
    "+:J:p:A:q:d:N:n:c:G:t:o:e:D:C:w:x:HhlK::I::i:ua:b:QvT:XEsF:M:Wm:";

// srun's -W/--wait=SECONDS takes a value; sbatch's -W/--wait (wait for the job's end) takes none.
const char* ShortOptionsFor(OptionSet set) {
  static const std::string run = [] {
    std::string s = kShortOptions;
    s.replace(s.find('W'), 1, "W:");
    return s;
  }();
  return set == OptionSet::kRun ? run.c_str() : kShortOptions;
}
const struct option* LongOptionsFor(OptionSet set) {
  static const std::vector<struct option> run = [] {
    std::vector<struct option> v(std::begin(kLongOptions), std::end(kLongOptions));
    for (struct option& o : v) {
      if (o.name && std::strcmp(o.name, "wait") == 0) o.has_arg = required_argument;
    }
    return v;
  }();
  return set == OptionSet::kRun ? run.data() : kLongOptions;
}

// Options only some commands take; elsewhere they are unknown, as in Slurm.
bool Accepted(int c, OptionSet set) {
  switch (c) {
    case kBcast:
      return false;
    case 'l':
    case kExact:
    case kOverlap:
    case 'K':
    case kPty:
    case 'u':
    case kMpi:
    case kJobId:
    case kCpuBind:
    case kMsgTimeout:
    case kSlurmdDebug:
    case kResvPorts:
    case kBcastExclude:
    case kSendLibs:
    case kCompress:
    case 'T':
    case 'X':
    case 'E':
    case kProlog:
    case kEpilog:
    case kQuitOnInterrupt:
      return set == OptionSet::kRun;
    case kBell:
    case kNoBell:
      return set == OptionSet::kAlloc;
    case 'i':
      return set != OptionSet::kAlloc;
    case kBatchFeatures:
    case kIgnorePbs:
    case kExportFile:
    case kUid:
    case kGid:
      return set == OptionSet::kBatch;
    case kOpenMode:  // sbatch's for the script's files, srun's for the step's
    case 'W':        // sbatch's waits for the job's end; srun's -W=SECONDS is another option
      return set != OptionSet::kAlloc;
    case 'I':
      return set != OptionSet::kBatch;
    case kTestOnly:  // sbatch's and srun's (outside a job)
      return set != OptionSet::kAlloc;
    case 'a':
      return set == OptionSet::kBatch;
    case kWrap:
    case kParsable:
    case 'o':
    case 'e':
      return set != OptionSet::kAlloc;
    default:
      return true;
  }
}

// Slurm options this version does not implement, refused by name with the reason: ignoring
// them would change what the job gets (docs/slurm-compat.md, "Every option").
const std::map<std::string, std::string>& KnownUnsupported() {
  static const std::string kNotYet = "is not supported yet: ";
  static const std::string kNever = "is not supported: ";
  static const std::string kLayout =
      kNotYet + "nodes are chosen and tasks laid out by CPU count, not by socket, core or thread";
  static const std::map<std::string, std::string> k = {
      {"bb", kNever + "Muster has no burst buffers"},
      {"bbf", kNever + "Muster has no burst buffers"},
      {"container", kNever + "Muster runs no OCI containers itself; start one in the job"},
      {"het-group", kNever + "Muster has no heterogeneous jobs"},
      {"x11", kNever + "Muster does not forward X11"},
      {"no-allocate", kNever + "every step runs in an allocation"},
      {"core-spec", kNotYet + "no cores are set aside for the system per job"},
      {"thread-spec", kNotYet + "no threads are set aside for the system per job"},
      {"uid", kNotYet + "for srun and salloc; root submits as another user with sbatch --uid"},
      {"gid", kNotYet + "for srun and salloc; root submits as another user with sbatch --uid"},
      {"no-kill", kNotYet + "a job loses every node when one fails (it is requeued or ends)"},
      {"spread-job", kNotYet + "a job gets the nodes its count asks for"},
      {"gpus-per-socket", kNotYet + "GPUs are not placed by socket"},
      {"accel-bind", kNotYet + "tasks are not bound to accelerators one by one"},
      {"bcast", kNotYet + "run the program from a file system the nodes share"},
      {"multi-prog", kNotYet + "every task runs the same program (branch on SLURM_PROCID)"},
      {"task-prolog", kNotYet + "nothing runs before each task but the task"},
      {"task-epilog", kNotYet + "nothing runs after each task"},
      {"relative", kNotYet + "a step takes its nodes from the start of the allocation"},
      {"no-shell", kNotYet + "an allocation lasts while salloc runs"},
      {"kill-command", kNotYet + "the command is left to end when the allocation does"},
      {"tmp", kNotYet + "nodes do not report their temporary disk space"},
      {"sockets-per-node", kLayout},
      {"cores-per-socket", kLayout},
      {"threads-per-core", kLayout},
      {"extra-node-info", kLayout},
      {"ntasks-per-core", kLayout},
      {"ntasks-per-socket", kLayout},
      {"hint", kLayout},
      {"licenses", kNotYet + "the cluster has no licenses to count"},
      {"propagate", kNotYet + "tasks get their node's resource limits, not the submitting shell's"},
      {"get-user-env", kNotYet + "the job gets the environment it was submitted with (--export)"},
      {"overcommit", kNotYet + "each task gets at least one CPU"},
  };
  return k;
}

// Short letters of refused options, by command where Slurm's letters differ.
std::string LongNameOf(char letter, OptionSet set) {
  switch (letter) {
    case 'k':
      return "no-kill";
    case 'Z':
      return "no-allocate";
    case 'S':
      return "core-spec";
    case 'B':
      return "extra-node-info";
    case 'L':
      return "licenses";
    case 'O':
      return "overcommit";
    case 'r':
      return "relative";
    case 'K':
      return set == OptionSet::kAlloc ? "kill-command" : "";
    default:
      return "";
  }
}

}  // namespace

Status ParseSubmitArgs(const std::vector<std::string>& args, const std::string& origin,
                       SubmitOptions* o, OptionSet set) {
  std::vector<std::string> storage;
  storage.push_back("sbatch");
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(storage.size());
  optind = 0;  // full re-initialisation of getopt for every parse
  opterr = 0;
  auto err = [&](const std::string& m) { return InvalidArgument(origin + ": " + m); };
  while (true) {
    int idx = -1;
    int c = getopt_long(argc, argv.data(), ShortOptionsFor(set), LongOptionsFor(set), &idx);
    if (c == -1) break;
    std::string val = optarg ? optarg : "";
    Status s;
    if (!Accepted(c, set)) c = '?';
    switch (c) {
      case 'J':
        o->job_name = val;
        break;
      case 'p':
        o->partition = val;
        break;
      case 'A':
        o->account = val;
        break;
      case 'q':
        o->qos = val;
        break;
      case kReservation:
        o->reservation = val;
        break;
      case kNice: {
        // --nice alone is 100, as in Slurm; a negative nice needs an administrator.
        if (!optarg) {
          o->nice = 100;
          break;
        }
        const std::string v = val;
        const bool neg = !v.empty() && v[0] == '-';
        auto n = ParseUint(neg ? v.substr(1) : v);
        if (!n || *n > 2'147'483'645) {
          return InvalidArgument(origin + ": --nice=" + v +
                                 ": expected a number between -2147483645 and 2147483645");
        }
        o->nice = static_cast<int32_t>(neg ? -static_cast<int64_t>(*n) : static_cast<int64_t>(*n));
        break;
      }
      case kKillOnInvalidDep: {
        const std::string v = ToLower(val);
        if (v != "yes" && v != "no") {
          return InvalidArgument(origin + ": --kill-on-invalid-dep=" + std::string(val) +
                                 ": expected yes or no");
        }
        o->kill_on_invalid_dep = v == "yes";
        break;
      }
      case 'b': {
        auto when = ParseWhen(val, SystemClock::Get()->NowMs());
        if (!when.ok()) return InvalidArgument(origin + ": --begin: " + when.status().message());
        o->begin_time_ms = *when;
        break;
      }
      case kDeadline: {
        auto when = ParseWhen(val, SystemClock::Get()->NowMs());
        if (!when.ok()) return InvalidArgument(origin + ": --deadline: " + when.status().message());
        o->deadline_ms = *when;
        break;
      }
      case kSignal: {
        // [{R|B}:]SIG[@secs], as Slurm's.
        std::string v = val;
        o->signal_batch_only = false;
        if (v.size() > 2 && v[1] == ':' && (v[0] == 'B' || v[0] == 'R')) {
          o->signal_batch_only = v[0] == 'B';
          v = v.substr(2);
        }
        std::string when;
        if (size_t at = v.find('@'); at != std::string::npos) {
          when = v.substr(at + 1);
          v = v.substr(0, at);
        }
        const int sig = SignalNumber(v);
        if (sig == 0) return err("--signal: unknown signal '" + v + "'");
        o->signal = sig;
        o->signal_time_s = 60;
        if (!when.empty()) {
          auto secs = ParseUint(when);
          if (!secs || *secs > 65'535) return err("--signal: bad time '" + when + "' (seconds)");
          o->signal_time_s = static_cast<uint32_t>(*secs);
        }
        break;
      }
      case 'd': {
        auto dep = ParseDependency(val);
        if (!dep.ok()) {
          return dep.status().code() == StatusCode::kUnimplemented ? dep.status()
                                                                   : err(dep.status().message());
        }
        o->dependency = FormatDependency(*dep);
        break;
      }
      case 'N': {
        // --nodes=N or min-max: the job gets as many nodes as are free in the range.
        size_t dash = val.find('-');
        auto n = Count("--nodes", val.substr(0, dash));
        if (!n.ok()) return err(n.status().message());
        o->nodes = *n;
        o->min_nodes.reset();
        if (dash != std::string::npos) {
          auto hi = Count("--nodes", val.substr(dash + 1));
          if (!hi.ok() || *hi < *n) {
            return err("invalid value for --nodes: '" + val + "' (expected N or min-max)");
          }
          o->nodes = *hi;
          if (*hi > *n) o->min_nodes = *n;
        }
        break;
      }
      case 'n': {
        auto n = Count("--ntasks", val);
        if (!n.ok()) return err(n.status().message());
        o->ntasks = *n;
        break;
      }
      case kNtasksPerNode: {
        auto n = Count("--ntasks-per-node", val);
        if (!n.ok()) return err(n.status().message());
        o->ntasks_per_node = *n;
        break;
      }
      case 'c': {
        auto n = Count("--cpus-per-task", val);
        if (!n.ok()) return err(n.status().message());
        o->cpus_per_task = *n;
        break;
      }
      case kMem: {
        auto m = ParseMemoryMb(val);
        if (!m.ok()) return err("--mem: " + m.status().message());
        o->mem_mb = *m;
        o->mem_per_gpu_mb.reset();
        o->mem_per_cpu_mb.reset();
        break;
      }
      case 'G': {
        uint32_t n = 0;
        s = TypedCount("--gpus", val, o, &n);
        if (!s.ok()) return err(s.message());
        o->gpus = n;
        o->gpus_per_node.reset();
        o->gpus_per_task.reset();
        break;
      }
      case kGpusPerNode: {
        uint32_t n = 0;
        s = TypedCount("--gpus-per-node", val, o, &n);
        if (!s.ok()) return err(s.message());
        o->gpus_per_node = n;
        o->gpus.reset();
        o->gpus_per_task.reset();
        break;
      }
      case kGres:
        s = ParseGres(val, o);
        if (!s.ok()) return s.Prepend(origin);
        o->gpus.reset();
        o->gpus_per_task.reset();
        break;
      case 't': {
        auto t = ParseTimeLimit(val);
        if (!t.ok()) return err("--time: " + t.status().message());
        o->time_limit_ms = *t;
        break;
      }
      case 'o':
        o->output = val;
        break;
      case 'e':
        o->error = val;
        break;
      case 'D':
        o->chdir = val;
        break;
      case kExport:
        o->export_vars = val;
        break;
      case kWrap:
        o->wrap = val;
        break;
      case 'H':
        o->hold = true;
        break;
      case kParsable:
        o->parsable = true;
        break;
      case kTestOnly:
        o->test_only = true;
        break;
      case 'a':
        o->array = val;
        break;
      case kNoRequeue:
        o->no_requeue = true;
        break;
      case kRequeue:
        o->no_requeue = false;
        break;
      case kExclusive:
        // =user and =mcs let a user's (or group's) own jobs share the nodes; a whole node is
        // what the job gets either way, so they are taken as plain --exclusive (stricter).
        if (optarg && val != "user" && val != "mcs" && val != "topo") {
          return err("--exclusive=" + val + ": expected user, mcs or topo");
        }
        o->exclusive = true;
        break;
      case 'C':
        o->constraint = val;
        break;
      case 'w':
        s = NodeNames("--nodelist", val, &o->nodelist.emplace());
        if (!s.ok()) return s.Prepend(origin);
        break;
      case 'x':
        s = NodeNames("--exclude", val, &o->exclude.emplace());
        if (!s.ok()) return s.Prepend(origin);
        break;
      case kSwitches:
        s = ParseSwitches(val, o);
        if (!s.ok()) return s.Prepend(origin);
        break;
      case kTopology:
        if (val != "nvlink" && val != "leaf" && val != "block" && val != "any") {
          return err("--topology=" + val + ": expected nvlink, leaf, block or any");
        }
        o->topology = val;
        break;
      case kMemPerGpu: {
        auto m = ParseMemoryMb(val);
        if (!m.ok()) return err("--mem-per-gpu: " + m.status().message());
        o->mem_per_gpu_mb = *m;
        o->mem_mb.reset();
        o->mem_per_cpu_mb.reset();
        break;
      }
      case kGpusPerTask: {
        uint32_t n = 0;
        s = TypedCount("--gpus-per-task", val, o, &n);
        if (!s.ok()) return err(s.message());
        o->gpus_per_task = n;
        o->gpus.reset();
        o->gpus_per_node.reset();
        break;
      }
      case 'h':
        o->help = true;
        break;
      case 'l':
        o->label = true;
        break;
      case kExact:
        o->exact = true;
        break;
      case kOverlap:
        o->overlap = true;
        break;
      case 'K':
        o->kill_on_bad_exit = val.empty() || val != "0";
        break;
      case kPty:
        o->pty = true;
        break;
      case kJobId: {
        auto id = ParseUint(val);
        if (!id || *id == 0) return err("--jobid wants a job id, got '" + val + "'");
        o->jobid = *id;
        break;
      }
      case 'I': {
        auto n = val.empty() ? Result<uint32_t>(1u) : Count("--immediate", val);
        if (!n.ok()) return err(n.status().message());
        o->immediate_s = *n;
        break;
      }
      case 'i':
        o->input = val;
        break;
      case 'u':
        break;  // output is forwarded as it comes already
      case kMailType: {
        // No mail is sent (there is no mailer yet); a type Slurm does not know is still an error.
        static const char* const kTypes[] = {
            "none",          "begin",          "end",        "fail",       "requeue",
            "all",           "invalid_depend", "stage_out",  "time_limit", "time_limit_90",
            "time_limit_80", "time_limit_50",  "array_tasks"};
        for (const std::string& t : Split(val, ',', true)) {
          const std::string w = ToLower(t);
          if (std::none_of(std::begin(kTypes), std::end(kTypes),
                           [&](const char* k) { return w == k; })) {
            return err("invalid --mail-type '" + t + "'");
          }
        }
        break;
      }
      case kTimeMin: {
        // Backfill would shrink the job to fit; Muster gives it its --time.
        auto t = ParseTimeLimit(val);
        if (!t.ok()) return err("--time-min: " + t.status().message());
        break;
      }
      case kMemPerCpu: {
        auto m = ParseMemoryMb(val);
        if (!m.ok()) return err("--mem-per-cpu: " + m.status().message());
        o->mem_per_cpu_mb = *m;
        o->mem_mb.reset();
        o->mem_per_gpu_mb.reset();
        break;
      }
      case kCpusPerGpu:
      case kNtasksPerGpu: {
        auto n = Count(c == kCpusPerGpu ? "--cpus-per-gpu" : "--ntasks-per-gpu", val);
        if (!n.ok()) return err(n.status().message());
        (c == kCpusPerGpu ? o->cpus_per_gpu : o->ntasks_per_gpu) = *n;
        break;
      }
      case kMinCpus: {
        auto n = Count("--mincpus", val);
        if (!n.ok()) return err(n.status().message());
        o->min_cpus = *n;
        break;
      }
      case kOpenMode:
        if (val != "append" && val != "truncate" && val != "a" && val != "t") {
          return err("--open-mode=" + val + ": expected append or truncate");
        }
        o->open_mode_append = val[0] == 'a';
        break;
      case kPriority: {
        // TOP: the highest a job can have.
        auto p = ToLower(val) == "top" ? std::optional<uint64_t>(0xFFFFFFFFu) : ParseUint(val);
        if (!p || *p > 0xFFFFFFFFu) {
          return err("--priority=" + val + ": expected 0 to 4294967295 or TOP");
        }
        o->priority = static_cast<int64_t>(*p);
        break;
      }
      case kUid:
      case kGid:
        s = RunAs(c == kUid ? "--uid" : "--gid", val, o);
        if (!s.ok()) return s.Prepend(origin);
        break;
      case kIgnorePbs:
        break;  // #PBS and #BSUB lines are never read
      case kUsage:
        o->help = true;
        break;
      case kUseMinNodes:
        o->use_min_nodes = true;
        break;
      case kExportFile:
        s = ExportFile(val, &o->export_file_vars);
        if (!s.ok()) return s.Prepend(origin);
        break;
      case 'F':
        s = NodeFile("--nodefile", val, &o->nodelist.emplace());
        if (!s.ok()) return s.Prepend(origin);
        break;
      case 'M':
        o->clusters = val;
        break;
      case 'W': {
        if (set != OptionSet::kRun) {
          o->wait = true;
          break;
        }
        // srun -W SECONDS: once the first task has ended, how long the others get (0: no limit).
        auto n = ParseUint(val);
        if (!n || *n > 0xFFFFFFFFu) return err("--wait=" + val + ": expected a number of seconds");
        o->step_wait_s = static_cast<uint32_t>(*n);
        break;
      }
      case kProlog:
      case kEpilog:
        // A program srun runs on its own host before (after) the step; none: nothing.
        if (val.empty()) {
          return err(std::string(c == kProlog ? "--prolog" : "--epilog") +
                     " wants a program (or none)");
        }
        (c == kProlog ? o->prolog : o->epilog) = val == "none" ? "" : val;
        break;
      case kQuitOnInterrupt:
        o->quit_on_interrupt = true;
        break;
      case kBell:
        o->bell = true;
        break;
      case kNoBell:
        o->bell = false;
        break;
      case 'm': {
        // Tasks are laid out in blocks: consecutive ranks on a node, nodes in order. Another
        // layout would give ranks other neighbours, so it is refused.
        const std::vector<std::string> levels = Split(val.substr(0, val.find(',')), ':');
        for (size_t i = 0; i < levels.size(); ++i) {
          const std::string& l = levels[i];
          if (l == "block" || l == "*" || (i > 0 && l.empty())) continue;
          if (i > 0 && (l == "cyclic" || l == "fcyclic")) continue;  // CPUs within a node: unbound
          return Unimplemented(origin + ": --distribution=" + val +
                               " is not supported yet: tasks are laid out in blocks "
                               "(--distribution=block)");
        }
        if (size_t comma = val.find(','); comma != std::string::npos) {
          const std::string flag = val.substr(comma + 1);
          if (flag != "Pack" && flag != "NoPack") {
            return err("--distribution=" + val + ": expected Pack or NoPack after ','");
          }
        }
        break;
      }
      case kGpuBind: {
        auto bind = ParseGpuBind(val);
        if (!bind.ok()) return bind.status().Prepend(origin);
        o->gpu_bind = val;
        break;
      }
      case kMemBind: {
        // Tasks share the job's memory nodes: none (and verbose, quiet) ask for nothing more;
        // binding each task is not done yet, so it is refused.
        for (const std::string& word : Split(val, ',', true)) {
          const std::string w = ToLower(word);
          if (w == "none" || w == "no" || w == "verbose" || w == "v" || w == "quiet" || w == "q") {
            continue;
          }
          return Unimplemented(origin + ": --mem-bind=" + word +
                               " is not supported yet: a step's tasks share the job's memory "
                               "nodes (--mem-bind=none)");
        }
        break;
      }
      case kCpuFreq:
      case kGpuFreq:
      case kPower:
      case kMcsLabel:
      case kNetwork:
      case kWaitAllNodes:
      case kPrefer:
      case kClusterConstraint:
      case kContiguous:
      case kReboot:
      case kBatchFeatures:
      case kGresFlags:
      case kMsgTimeout:
      case kSlurmdDebug:
      case kResvPorts:
      case kBcastExclude:
      case kSendLibs:
      case kCompress:
      case 'T':
      case 'X':
      case 'E':
      case 's':
      case kMailUser:
      case kComment:
      case kWckey:
      case kAcctgFreq:
      case kProfile:
      case kDelayBoot:
      case 'Q':
      case 'v':
        break;
      case kCpuBind:
        // A step's tasks share the job's CPUs (its cgroup's cpuset): quiet, verbose and none
        // ask for nothing more. A binding of each task is not done yet, so it is refused rather
        // than silently not done.
        for (const std::string& word : Split(val, ',', true)) {
          const std::string w = ToLower(word);
          if (w == "q" || w == "quiet" || w == "v" || w == "verbose" || w == "no" || w == "none") {
            continue;
          }
          return Unimplemented(origin + ": --cpu-bind=" + word +
                               " is not supported yet: a step's tasks share the job's CPUs, none "
                               "is bound to CPUs of its own (--cpu-bind=none)");
        }
        break;
      case kMpi:
        if (val != "none" && val != "pmi1" && val != "pmi") {
          return Unimplemented(origin + ": --mpi=" + val +
                               " is not supported; srun serves PMI-1 (--mpi=pmi1, the default), "
                               "which MPICH and MVAPICH use, or nothing (--mpi=none)");
        }
        o->mpi = val;
        break;
      case ':':
        return err("option " + std::string(argv[static_cast<size_t>(optind) - 1]) +
                   " needs a value");
      case '?':
      default: {
        std::string bad =
            argv[static_cast<size_t>(optind) - 1] ? argv[static_cast<size_t>(optind) - 1] : "";
        if (optopt && bad.size() > 2 && bad[0] == '-' && bad[1] != '-')
          bad = std::string("-") + static_cast<char>(optopt);
        std::string name = bad;
        while (!name.empty() && name[0] == '-') name.erase(0, 1);
        name = name.substr(0, name.find('='));
        if (name.size() == 1) name = LongNameOf(name[0], set);
        const auto& unsupported = KnownUnsupported();
        if (auto it = unsupported.find(name); it != unsupported.end()) {
          return Unimplemented(origin + ": option " + bad.substr(0, bad.find('=')) + " " +
                               it->second);
        }
        return err("unknown option " + bad.substr(0, bad.find('=')));
      }
    }
  }
  for (int i = optind; i < argc; ++i) o->positional.push_back(argv[static_cast<size_t>(i)]);
  return Status::Ok();
}

Result<std::vector<std::string>> SplitWords(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < line.size()) {
        cur += line[++i];
      } else {
        cur += c;
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      cur += line[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else if (c == '#' && !in_word) {
      break;  // a comment after the directive
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) return InvalidArgument("unterminated quote");
  if (in_word) out.push_back(cur);
  return out;
}

Result<std::vector<Directive>> ParseDirectives(const std::string& script) {
  std::vector<Directive> out;
  std::vector<std::string> lines = Split(script, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = Trim(lines[i]);
    if (i == 0 && StartsWith(l, "#!")) continue;
    if (l.empty()) continue;
    if (l[0] != '#') break;  // Slurm stops reading directives at the first command
    if (!StartsWith(l, "#SBATCH")) continue;
    std::string rest(l.substr(7));
    if (!rest.empty() && rest[0] != ' ' && rest[0] != '\t') continue;  // e.g. #SBATCHX
    auto words = SplitWords(rest);
    if (!words.ok()) {
      return InvalidArgument("script line " + std::to_string(i + 1) + ": " +
                             words.status().message());
    }
    out.push_back({static_cast<int>(i + 1), std::move(*words)});
  }
  return out;
}

namespace {

// --ntasks-per-gpu and --cpus-per-gpu become the counts the controller takes, as Slurm reads
// them: tasks from the GPUs asked for (or GPUs from the tasks), and CPUs per task (with
// --gpus-per-task) or per node (a node's slot of at least that many CPUs per GPU on it).
Status ApplyPerGpuCounts(const SubmitOptions& o, v1::JobSpec* s) {
  constexpr uint64_t kMax = 10'000'000;
  auto too_many = [](const char* what) {
    return InvalidArgument(std::string(what) + " asks for more than 10000000 tasks or CPUs");
  };
  if (o.ntasks_per_gpu) {
    const uint64_t per = *o.ntasks_per_gpu;
    if (o.gpus_per_task) {
      return InvalidArgument("--ntasks-per-gpu and --gpus-per-task are mutually exclusive");
    }
    const uint64_t gpus = s->gpus_total() > 0 ? s->gpus_total()
                          : s->gpus_per_node() > 0
                              ? uint64_t{s->gpus_per_node()} * std::max<uint32_t>(1, s->nodes())
                              : 0;
    if (gpus > 0 && s->ntasks() == 0) {
      if (gpus * per > kMax) return too_many("--ntasks-per-gpu");
      s->set_ntasks(static_cast<uint32_t>(gpus * per));
    } else if (gpus == 0 && s->ntasks() > 0) {
      s->set_gpus_total(static_cast<uint32_t>((s->ntasks() + per - 1) / per));
    } else if (gpus == 0) {
      return InvalidArgument(
          "--ntasks-per-gpu needs --ntasks or a GPU count (--gpus, --gpus-per-node, --gres=gpu:N)");
    }
  }
  if (o.cpus_per_gpu) {
    const uint64_t per = *o.cpus_per_gpu;
    if (o.cpus_per_task) {
      return InvalidArgument("--cpus-per-gpu and --cpus-per-task are mutually exclusive");
    }
    uint64_t per_node = s->gpus_per_node();
    if (per_node == 0 && s->gpus_total() > 0 && s->nodes() > 0 && s->min_nodes() == 0 &&
        s->gpus_total() % s->nodes() == 0) {
      per_node = s->gpus_total() / s->nodes();
    }
    if (s->gpus_per_task() > 0) {
      if (per * s->gpus_per_task() > kMax) return too_many("--cpus-per-gpu");
      s->set_cpus_per_task(static_cast<uint32_t>(per * s->gpus_per_task()));
    } else if (per_node > 0) {
      if (per * per_node > kMax) return too_many("--cpus-per-gpu");
      s->set_min_cpus_per_node(
          std::max<uint32_t>(s->min_cpus_per_node(), static_cast<uint32_t>(per * per_node)));
    } else {
      return InvalidArgument(
          "--cpus-per-gpu needs the GPUs of each node or task: --gpus-per-node (--gres=gpu:N), "
          "--gpus-per-task, or --gpus with -N");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<v1::JobSpec> BuildJobSpec(const SubmitOptions& o, const SubmitContext& ctx) {
  if (!ctx.interactive && !StartsWith(ctx.script, "#!")) {
    return InvalidArgument(
        "this does not look like a batch script: the first line must start with #! "
        "(e.g. #!/bin/bash)");
  }
  v1::JobSpec s;
  std::string name = o.job_name.value_or("");
  if (name.empty()) {
    if (o.wrap) {
      name = "wrap";
    } else {
      name = ctx.script_name.empty() ? "sbatch"
                                     : ctx.script_name.substr(ctx.script_name.rfind('/') + 1);
    }
  }
  s.set_name(name);
  if (o.account) s.set_account(*o.account);
  if (o.qos) s.set_qos(*o.qos);
  if (o.reservation) s.set_reservation(*o.reservation);
  if (o.nice) s.set_nice(*o.nice);
  if (o.kill_on_invalid_dep) s.set_kill_on_invalid_dep(*o.kill_on_invalid_dep ? 1 : 2);
  if (o.begin_time_ms) s.set_begin_time_ms(*o.begin_time_ms);
  if (o.deadline_ms) s.set_deadline_ms(*o.deadline_ms);
  if (o.signal) {
    s.set_signal(*o.signal);
    s.set_signal_time_s(o.signal_time_s);
    s.set_signal_batch_only(o.signal_batch_only);
  }
  if (o.dependency) s.set_dependency(*o.dependency);
  if (o.partition) {
    for (const auto& p : Split(*o.partition, ',', true)) s.add_partitions(p);
  }
  if (o.use_min_nodes && o.min_nodes) {
    s.set_nodes(*o.min_nodes);  // --use-min-nodes: the range's smallest count, as a fixed one
  } else {
    s.set_nodes(o.nodes.value_or(0));
    s.set_min_nodes(o.min_nodes.value_or(0));
  }
  s.set_ntasks(o.ntasks.value_or(0));
  s.set_ntasks_per_node(o.ntasks_per_node.value_or(0));
  s.set_cpus_per_task(o.cpus_per_task.value_or(0));
  s.set_mem_per_node_mb(o.mem_mb.value_or(0));
  s.set_gpus_per_node(o.gpus_per_node.value_or(0));
  s.set_gpus_total(o.gpus.value_or(0));
  s.set_gpu_type(o.gpu_type.value_or(""));
  for (const std::string& t : o.gpu_types) s.add_gpu_types(t);
  s.set_exclusive(o.exclusive);
  s.set_gpus_per_task(o.gpus_per_task.value_or(0));
  s.set_mem_per_gpu_mb(o.mem_per_gpu_mb.value_or(0));
  s.set_mem_per_cpu_mb(o.mem_per_cpu_mb.value_or(0));
  s.set_min_cpus_per_node(o.min_cpus.value_or(0));
  s.set_open_mode_append(o.open_mode_append.value_or(false));
  if (!ctx.interactive && o.input) s.set_stdin_pattern(*o.input);
  if (o.run_as_uid) {  // root only: the controller takes these from anyone else's credentials
    s.set_uid(*o.run_as_uid);
    s.set_user(o.run_as_user);
    s.set_gid(o.run_as_gid.value_or(0));
  }
  MUSTER_RETURN_IF_ERROR(ApplyPerGpuCounts(o, &s));
  s.set_constraint(o.constraint.value_or(""));
  for (const std::string& n : o.nodelist.value_or(std::vector<std::string>{})) {
    s.add_required_nodes(n);
  }
  for (const std::string& n : o.exclude.value_or(std::vector<std::string>{})) {
    s.add_excluded_nodes(n);
  }
  s.set_max_switches(o.max_switches.value_or(0));
  s.set_switches_wait_ms(o.switches_wait_ms.value_or(0));
  s.set_topology(o.topology.value_or(""));
  for (const auto& g : o.gres) {
    v1::GresSpec* item = s.add_gres();
    item->set_name(g.name);
    item->set_type(g.type);
    item->set_count(g.count);
  }
  s.set_time_limit_ms(o.time_limit_ms.value_or(0));
  s.set_interactive(ctx.interactive);
  if (!ctx.interactive) s.set_script(ctx.script);
  if (o.positional.size() > 1 && !ctx.interactive) {
    for (size_t i = 1; i < o.positional.size(); ++i) s.add_script_args(o.positional[i]);
  }
  std::string wd = o.chdir.value_or(ctx.cwd);
  if (!wd.empty() && wd[0] != '/') wd = ctx.cwd + "/" + wd;
  s.set_work_dir(wd);
  s.set_submit_dir(ctx.cwd);
  s.set_submit_host(ctx.hostname);
  if (o.output) s.set_stdout_pattern(*o.output);
  if (o.error) s.set_stderr_pattern(*o.error);
  s.set_hold(o.hold);
  if (o.array) s.set_array(*o.array);
  s.set_no_requeue(o.no_requeue);

  // --export: ALL (default), NONE, or a list of names and NAME=value, optionally with ALL.
  std::map<std::string, std::string> env;
  std::vector<std::string> order;
  auto put = [&](const std::string& k, const std::string& v) {
    if (!env.count(k)) order.push_back(k);
    env[k] = v;
  };
  std::map<std::string, std::string> caller;
  for (const auto& kv : ctx.environment) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) caller[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  std::vector<std::string> items = Split(o.export_vars.value_or("ALL"), ',', true);
  bool all = items.empty();
  for (const auto& it : items) all |= it == "ALL";
  if (all) {
    for (const auto& kv : ctx.environment) {
      size_t eq = kv.find('=');
      if (eq != std::string::npos && eq > 0) put(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  bool none = false;
  for (const auto& it : items) {
    if (it == "ALL") continue;
    if (it == "NONE") {
      none = true;
      continue;
    }
    size_t eq = it.find('=');
    if (eq != std::string::npos) {
      put(it.substr(0, eq), it.substr(eq + 1));
    } else if (caller.count(it)) {
      put(it, caller[it]);
    }
  }
  for (const std::string& kv : o.export_file_vars) {
    const size_t eq = kv.find('=');
    put(kv.substr(0, eq), kv.substr(eq + 1));
  }
  s.set_export_none(none && !all);
  for (const auto& k : order) s.add_environment(k + "=" + env[k]);
  return s;
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
      --mem-per-gpu=SIZE     memory per allocated GPU (instead of --mem)
      --exclusive            whole nodes
  -C, --constraint=EXPR      node features: a&b (all), a|b (any), a&b|c
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
      --parsable             print only the job id
      --test-only            say when and where the job would start; submit nothing
  -a, --array=INDEXES        a job array: one job per index (0-15, 1-9:2, 1,3,5; %N runs at
                             most N at once); SLURM_ARRAY_* and %A/%a in file names
)";
}

v1::CreateStepRequest BuildStepRequest(const SubmitOptions& o, uint64_t job_id, bool in_job) {
  v1::CreateStepRequest r;
  r.set_job_id(job_id);
  const std::string command = o.positional.empty() ? "" : o.positional[0];
  r.set_name(o.job_name.value_or(command.substr(command.rfind('/') + 1)));
  r.set_overlap(o.overlap);
  if (!in_job) {
    r.set_exact(o.exact);
    return r;
  }
  r.set_nodes(o.nodes.value_or(0));
  r.set_ntasks(o.ntasks.value_or(0));
  r.set_ntasks_per_node(o.ntasks_per_node.value_or(0));
  r.set_cpus_per_task(o.cpus_per_task.value_or(0));
  r.set_gpus_per_task(o.gpus_per_task.value_or(0));
  r.set_gpus_per_node(o.gpus_per_node.value_or(0));
  r.set_gpus(o.gpus.value_or(0));
  r.set_exact(o.exact || o.exclusive);
  for (const auto& n : o.nodelist.value_or(std::vector<std::string>{})) r.add_nodelist(n);
  for (const auto& n : o.exclude.value_or(std::vector<std::string>{})) r.add_exclude(n);
  return r;
}

}  // namespace muster::client
