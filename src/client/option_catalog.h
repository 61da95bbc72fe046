// Private to muster_client: which Slurm options sbatch, srun and salloc take (the getopt tables
// ParseSubmitArgs reads) and why the ones this version refuses are refused.
#pragma once

#include <getopt.h>

#include <map>
#include <string>

#include "muster/client/submit_options.h"

namespace muster::client {

// getopt's codes for the options that have no short letter (the others' code is their letter).
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
  kKillCommand,
  kNoShell,
  kProlog,
  kEpilog,
  kQuitOnInterrupt,
  kSocketsPerNode,
  kTmp,
  kSpreadJob,
  kCoresPerSocket,
  kThreadsPerCore,
  kNtasksPerCore,
  kNtasksPerSocket,
  kHint,
  kMultiProg,
  kTaskProlog,
  kTaskEpilog,
  kPropagate,
  kGetUserEnv,
  kThreadSpec,
  kGpusPerSocket,
  // Named (not left to getopt's abbreviations) so that it is never taken for --bcast-exclude.
  kBcast,
  kAccelBind,
};

// The getopt tables for a command's options (srun's -W takes a value, sbatch's does not).
const char* ShortOptionsFor(OptionSet set);
const struct option* LongOptionsFor(OptionSet set);

// Whether the command takes option `c`: some are only srun's, salloc's or sbatch's, and elsewhere
// unknown, as in Slurm.
bool Accepted(int c, OptionSet set);

// Slurm options this version does not implement, by long name, each with why it is refused.
const std::map<std::string, std::string>& KnownUnsupported();

// The long name of a refused option's short letter (empty when none).
std::string LongNameOf(char letter);

}  // namespace muster::client
