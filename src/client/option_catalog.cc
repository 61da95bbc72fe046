// The Slurm options each command takes, and the reasons for the ones refused.
#include "option_catalog.h"

#include <cstring>
#include <vector>

namespace muster::client {

namespace {

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
    {"gpus-per-socket", required_argument, nullptr, kGpusPerSocket},
    {"help", no_argument, nullptr, 'h'},
    // srun and salloc.
    {"label", no_argument, nullptr, 'l'},
    {"exact", no_argument, nullptr, kExact},
    {"overlap", no_argument, nullptr, kOverlap},
    {"kill-on-bad-exit", optional_argument, nullptr, 'K'},
    {"kill-command", optional_argument, nullptr, kKillCommand},
    {"no-shell", no_argument, nullptr, kNoShell},
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
    {"relative", required_argument, nullptr, 'r'},
    {"uid", required_argument, nullptr, kUid},
    {"gid", required_argument, nullptr, kGid},
    {"prolog", required_argument, nullptr, kProlog},
    {"epilog", required_argument, nullptr, kEpilog},
    {"quit-on-interrupt", no_argument, nullptr, kQuitOnInterrupt},
    {"extra-node-info", required_argument, nullptr, 'B'},
    {"sockets-per-node", required_argument, nullptr, kSocketsPerNode},
    {"tmp", required_argument, nullptr, kTmp},
    {"cores-per-socket", required_argument, nullptr, kCoresPerSocket},
    {"threads-per-core", required_argument, nullptr, kThreadsPerCore},
    {"ntasks-per-core", required_argument, nullptr, kNtasksPerCore},
    {"ntasks-per-socket", required_argument, nullptr, kNtasksPerSocket},
    {"hint", required_argument, nullptr, kHint},
    {"multi-prog", no_argument, nullptr, kMultiProg},
    {"task-prolog", required_argument, nullptr, kTaskProlog},
    {"task-epilog", required_argument, nullptr, kTaskEpilog},
    {"propagate", optional_argument, nullptr, kPropagate},
    {"get-user-env", optional_argument, nullptr, kGetUserEnv},
    {"overcommit", no_argument, nullptr, 'O'},
    {"licenses", required_argument, nullptr, 'L'},
    {"spread-job", no_argument, nullptr, kSpreadJob},
    {"core-spec", required_argument, nullptr, 'S'},
    {"thread-spec", required_argument, nullptr, kThreadSpec},
    {"no-kill", optional_argument, nullptr, 'k'},
    {"accel-bind", required_argument, nullptr, kAccelBind},
    {nullptr, 0, nullptr, 0},
};
constexpr const char* kShortOptions =
    "+:J:p:A:q:d:N:n:c:G:t:o:e:D:C:w:x:HhlK::I::i:ua:b:QvT:XEsF:M:Wm:r:B:OL:k::S:";

}  // namespace

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
    case kBcast:
    case kBcastExclude:
    case kAccelBind:
    case kSendLibs:
    case kCompress:
    case 'r':
    case 'T':
    case 'X':
    case 'E':
    case kProlog:
    case kEpilog:
    case kQuitOnInterrupt:
    case kMultiProg:
    case kTaskProlog:
    case kTaskEpilog:
      return set == OptionSet::kRun;
    case kBell:
    case kNoBell:
    case kKillCommand:
    case kNoShell:
      return set == OptionSet::kAlloc;
    case 'i':
      return set != OptionSet::kAlloc;
    case kBatchFeatures:
    case kIgnorePbs:
    case kExportFile:
      return set == OptionSet::kBatch;
    case kPropagate:  // sbatch's and srun's
      return set != OptionSet::kAlloc;
    case kGetUserEnv:  // sbatch's and salloc's
      return set != OptionSet::kRun;
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
  static const std::string kNever = "is not supported: ";
  static const std::map<std::string, std::string> k = {
      {"bb", kNever + "Muster has no burst buffers"},
      {"bbf", kNever + "Muster has no burst buffers"},
      {"container", kNever + "Muster runs no OCI containers itself; start one in the job"},
      {"het-group", kNever + "Muster has no heterogeneous jobs"},
      {"x11", kNever + "Muster does not forward X11"},
      {"no-allocate", kNever + "every step runs in an allocation"},
  };
  return k;
}

// Short letters of refused options.
std::string LongNameOf(char letter) {
  switch (letter) {
    case 'Z':
      return "no-allocate";
    default:
      return "";
  }
}

}  // namespace muster::client
