// sbatch's, srun's and salloc's options, from the command line and #SBATCH lines (their words:
// sbatch_directives.cc; the help texts: submit_usage.cc).
#include "muster/client/submit_options.h"

#include <getopt.h>

#include <algorithm>

#include "muster/common/clock.h"
#include "muster/common/cpu_bind.h"
#include "muster/common/dependency.h"
#include "muster/common/duration.h"
#include "muster/common/gpu_bind.h"
#include "muster/common/signals.h"
#include "muster/common/strings.h"
#include "option_catalog.h"
#include "option_values.h"

namespace muster::client {
namespace {

// A count of sockets, cores, threads or tasks per core or socket: 1 to 65535, as Slurm's.
Result<uint32_t> ShapeCount(const std::string& opt, const std::string& v) {
  MUSTER_ASSIGN_OR_RETURN(uint32_t n, Count(opt, v));
  if (n > 65'535) return InvalidArgument("invalid value for " + opt + ": at most 65535");
  return n;
}

// -B SOCKETS[:CORES[:THREADS]]: each level a minimum, '*' for any. As in Slurm, a level may be
// MIN-MAX, of which only the minimum counts.
Status ParseExtraNodeInfo(const std::string& val, SubmitOptions* o) {
  const std::vector<std::string> levels = Split(val, ':');
  if (val.empty() || levels.size() > 3) {
    return InvalidArgument("invalid value for --extra-node-info: '" + val +
                           "' (expected SOCKETS[:CORES[:THREADS]], each a number or *)");
  }
  std::optional<uint32_t>* fields[] = {&o->sockets_per_node, &o->cores_per_socket,
                                       &o->threads_per_core};
  for (size_t i = 0; i < levels.size(); ++i) {
    const std::string& l = levels[i];
    if (l == "*") {
      *fields[i] = 0;
      continue;
    }
    const size_t dash = l.find('-');
    MUSTER_ASSIGN_OR_RETURN(uint32_t min, ShapeCount("--extra-node-info", l.substr(0, dash)));
    if (dash != std::string::npos && l.substr(dash + 1) != "*") {
      auto max = ShapeCount("--extra-node-info", l.substr(dash + 1));
      if (!max.ok() || *max < min) {
        return InvalidArgument("invalid value for --extra-node-info: '" + l +
                               "' (expected MIN-MAX with MIN <= MAX)");
      }
    }
    *fields[i] = min;
  }
  o->extra_node_info = true;
  return Status::Ok();
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
    // salloc's -K is --kill-command; srun's -K (and --kill-on-bad-exit) another option, which
    // salloc does not have.
    if (c == 'K' && set == OptionSet::kAlloc) c = idx < 0 ? static_cast<int>(kKillCommand) : '?';
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
      case kGpusPerSocket: {
        uint32_t n = 0;
        s = TypedCount("--gpus-per-socket", val, o, &n);
        if (!s.ok()) return err(s.message());
        o->gpus_per_socket = n;
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
      case kNoShell:
        o->no_shell = true;
        break;
      case kKillCommand: {
        const int sig = val.empty() ? 0 : SignalNumber(val);
        if (!val.empty() && sig == 0) {
          return err("--kill-command=" + val + ": expected a signal name or number");
        }
        o->kill_command = sig;
        break;
      }
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
      case kMailUser:
        if (val.empty()) return err("--mail-user wants a user or an address");
        o->mail_user = val;
        break;
      case 'u':
        break;  // output is forwarded as it comes already
      case kMailType: {
        // Slurm's names, a comma-separated list; ALL is BEGIN,END,FAIL,INVALID_DEPEND,REQUEUE
        // (and STAGE_OUT, which has nothing to stage here); NONE clears what came before it.
        static const std::pair<const char*, uint32_t> kTypes[] = {
            {"none", 0},
            {"begin", v1::MAIL_BEGIN},
            {"end", v1::MAIL_END},
            {"fail", v1::MAIL_FAIL},
            {"requeue", v1::MAIL_REQUEUE},
            {"all", v1::MAIL_BEGIN | v1::MAIL_END | v1::MAIL_FAIL | v1::MAIL_INVALID_DEPEND |
                        v1::MAIL_REQUEUE},
            {"invalid_depend", v1::MAIL_INVALID_DEPEND},
            {"stage_out", 0},
            {"time_limit", v1::MAIL_TIME_LIMIT},
            {"time_limit_90", v1::MAIL_TIME_LIMIT_90},
            {"time_limit_80", v1::MAIL_TIME_LIMIT_80},
            {"time_limit_50", v1::MAIL_TIME_LIMIT_50},
            {"array_tasks", v1::MAIL_ARRAY_TASKS}};
        uint32_t bits = 0;
        for (const std::string& t : Split(val, ',', true)) {
          const std::string w = ToLower(t);
          auto it = std::find_if(std::begin(kTypes), std::end(kTypes),
                                 [&](const auto& k) { return w == k.first; });
          if (it == std::end(kTypes)) return err("invalid --mail-type '" + t + "'");
          bits = w == "none" ? 0 : bits | it->second;
        }
        o->mail_types = bits;
        break;
      }
      case kTimeMin: {
        // Backfill would shrink the job to fit; Muster gives it its --time.
        auto t = ParseTimeLimit(val);
        if (!t.ok()) return err("--time-min: " + t.status().message());
        break;
      }
      case 'L': {
        // name[:count],...: all of them (Slurm's "|" for one of several is not taken).
        if (val.find('|') != std::string::npos) {
          return err("--licenses: a choice of licenses (a|b) is not supported; name them all");
        }
        for (const std::string& item : Split(val, ',', true)) {
          const size_t colon = item.find_first_of(":=");
          const std::string name = item.substr(0, colon);
          uint64_t count = 1;
          if (colon != std::string::npos) {
            auto n = ParseUint(item.substr(colon + 1));
            if (!n || *n == 0 || *n > 1'000'000'000) {
              return err("--licenses: bad count in '" + item + "'");
            }
            count = *n;
          }
          if (name.empty() || name.find('@') != std::string::npos ||
              name.find_first_of(" \t") != std::string::npos) {
            return err("--licenses: bad license name in '" + item +
                       "' (remote licenses, name@server, are not supported)");
          }
          uint32_t& have = o->licenses[name];
          if (have + count > 1'000'000'000) return err("--licenses: too many of " + name);
          have += static_cast<uint32_t>(count);
        }
        if (o->licenses.size() > 64) return err("--licenses: at most 64 licenses");
        break;
      }
      case kSpreadJob:
        o->spread_job = true;
        break;
      case 'S':
      case kThreadSpec: {
        // As Slurm's: --core-spec may be 0 (none set aside, the nodes still whole), --thread-spec
        // not.
        const bool cores = c == 'S';
        const char* name = cores ? "--core-spec" : "--thread-spec";
        auto n = Count(name, val, cores ? 0 : 1);
        if (!n.ok() || *n > 65'535) {
          return err("invalid value for " + std::string(name) + ": '" + val +
                     "' (expected a number of " + (cores ? "cores" : "threads") + " per node, " +
                     (cores ? "0" : "1") + " to 65535)");
        }
        (cores ? o->core_spec : o->thread_spec) = *n;
        break;
      }
      case kTmp: {
        auto m = ParseMemoryMb(val);
        if (!m.ok()) return err("--tmp: " + m.status().message());
        o->tmp_mb = *m;
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
      case 'r': {
        auto n = Count("--relative", val, /*min=*/0);
        if (!n.ok()) return err(n.status().message());
        o->relative = *n;
        break;
      }
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
      case 'm':
        // Which task ids go to which node (block, cyclic, plane=N), and how a node's CPUs are
        // dealt to its tasks for --cpu-bind.
        s = ParseDistribution(val, o);
        if (!s.ok()) return s.Prepend(origin);
        break;
      case 'B':
        s = ParseExtraNodeInfo(val, o);
        if (!s.ok()) return s.Prepend(origin);
        break;
      case kSocketsPerNode:
      case kCoresPerSocket:
      case kThreadsPerCore:
      case kNtasksPerCore:
      case kNtasksPerSocket: {
        const char* name = c == kSocketsPerNode   ? "--sockets-per-node"
                           : c == kCoresPerSocket ? "--cores-per-socket"
                           : c == kThreadsPerCore ? "--threads-per-core"
                           : c == kNtasksPerCore  ? "--ntasks-per-core"
                                                  : "--ntasks-per-socket";
        auto n = ShapeCount(name, val);
        if (!n.ok()) return err(n.status().message());
        (c == kSocketsPerNode   ? o->sockets_per_node
         : c == kCoresPerSocket ? o->cores_per_socket
         : c == kThreadsPerCore ? o->threads_per_core
         : c == kNtasksPerCore  ? o->ntasks_per_core
                                : o->ntasks_per_socket) = *n;
        break;
      }
      case kHint: {
        const std::string h = ToLower(val);
        if (h == "help") {
          o->hint_help = o->help = true;
        } else if (h == "compute_bound" || h == "memory_bound" || h == "multithread" ||
                   h == "nomultithread") {
          o->hint = h;
        } else {
          return err("--hint=" + val +
                     ": expected compute_bound, memory_bound, multithread, nomultithread or help");
        }
        break;
      }
      case kGpuBind: {
        auto bind = ParseGpuBind(val);
        if (!bind.ok()) return bind.status().Prepend(origin);
        o->gpu_bind = val;
        break;
      }
      case kAccelBind:  // g: each task's GPUs closest to its CPUs; v: say so; m: no MICs here
        for (char letter : val) {
          if (letter == 'g') {
            o->accel_bind_gpus = true;
          } else if (letter != 'v' && letter != 'm') {
            return letter == 'n' ? Unimplemented(origin +
                                                 ": --accel-bind=n is not supported: tasks "
                                                 "are not bound to network cards")
                                 : err("--accel-bind=" + val + ": expected letters of g, m, n, v");
          }
        }
        if (val.empty()) return err("--accel-bind needs a value (g, m, n, v)");
        break;
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
      case kComment:
      case kWckey:
      case kAcctgFreq:
      case kProfile:
      case kDelayBoot:
      case 'Q':
      case 'v':
        break;
      case kCpuBind: {
        // Each task bound to its share of the step's CPUs on its node (common/cpu_bind.h),
        // checked here so that a bad value runs nothing.
        auto bind = ParseCpuBind(val);
        if (!bind.ok()) return bind.status().Prepend(origin);
        o->cpu_bind = val;
        break;
      }
      case kMultiProg:
        o->multi_prog = true;
        break;
      case kBcast:
        o->bcast = val;  // DEST is checked once the step's directory is known
        break;
      case kTaskProlog:
      case kTaskEpilog:
        if (val.empty()) {
          return err(std::string(c == kTaskProlog ? "--task-prolog" : "--task-epilog") +
                     " wants a program");
        }
        (c == kTaskProlog ? o->task_prolog : o->task_epilog) = val;
        break;
      case kPropagate: {
        auto names = ParsePropagateList(val.empty() ? "ALL" : val);
        if (!names.ok()) return err(names.status().message());
        o->propagate = ToUpper(val.empty() ? "ALL" : val);
        break;
      }
      case kGetUserEnv: {
        // [TIMEOUT][S|L], as Slurm's: "10", "10L", "S".
        size_t digits = 0;
        while (digits < val.size() && val[digits] >= '0' && val[digits] <= '9') ++digits;
        const std::string mode = ToUpper(val.substr(digits));
        auto secs = digits ? ParseUint(val.substr(0, digits)) : std::optional<uint64_t>(0);
        if (!secs || *secs > 3600 || (mode != "" && mode != "S" && mode != "L")) {
          return err("--get-user-env=" + val +
                     ": expected [TIMEOUT][S|L], a timeout of at most 3600 seconds");
        }
        o->get_user_env = true;
        o->get_user_env_timeout_s = static_cast<uint32_t>(*secs);
        o->get_user_env_mode = mode;
        break;
      }
      case 'O':
        o->overcommit = true;
        break;
      case 'k':  // -k/--no-kill[=off]
        if (!val.empty() && val != "off") {
          return err("--no-kill=" + val + ": the only value it takes is off");
        }
        o->no_kill = val.empty();
        break;
      case kMpi:
        if (!IsMpiType(val) && val != "list") {
          return Unimplemented(origin + ": --mpi=" + val +
                               " is not supported; srun serves PMI-1 (--mpi=pmi1, the default), "
                               "PMI-1 and PMI-2 (--mpi=pmi2), or nothing (--mpi=none); "
                               "--mpi=list lists them");
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
        if (name.size() == 1) name = LongNameOf(name[0]);
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

}  // namespace muster::client
