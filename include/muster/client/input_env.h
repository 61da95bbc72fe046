// sbatch's and salloc's input environment variables (SBATCH_*, SALLOC_*, and the SLURM_* ones
// their manual pages list), as Slurm 22.05 reads them: each stands for an option, which the
// command line overrides and which overrides the script's #SBATCH lines. Only the sbatch and
// salloc front ends read them; `muster submit` and `muster alloc` do not.
#pragma once

#include <string>
#include <vector>

#include "muster/client/submit_options.h"
#include "muster/common/status.h"

namespace muster::client {

// How a variable's value becomes option words.
enum class InputEnvKind {
  kValue,       // --OPTION=VALUE; an empty value sets nothing
  kFlag,        // --OPTION when empty, "yes" (any case) or a non-zero number; otherwise nothing
  kOptional,    // --OPTION when empty, else --OPTION=VALUE (an option whose value may be left out)
  kZeroOne,     // 0 or 1, anything else an error: 1 is --OPTION (SBATCH_DEBUG's -v), or
                // --OPTION=0|1 for an option with a value (--wait-all-nodes)
  kSwitchWait,  // the wait of --switches=COUNT@WAIT (SBATCH_WAIT4SWITCH)
  kNotOption,   // not an option (SLURM_CONF, SLURM_EXIT_ERROR ...): `note` says what Muster does
};

struct InputEnvVar {
  const char* name;    // "SBATCH_PARTITION"
  const char* option;  // the long option it stands for, without dashes ("" for kNotOption)
  InputEnvKind kind;
  const char* note;  // kNotOption: why it is not read; otherwise ""
};

// Every input variable of sbatch's (OptionSet::kBatch) or salloc's (kAlloc) manual page, in the
// order they are read: a later one wins, so SLURM_CLUSTERS and SLURM_HINT override
// SBATCH_CLUSTERS and SBATCH_HINT, as in Slurm. Empty for srun, which reads its own elsewhere.
const std::vector<InputEnvVar>& InputEnvVars(OptionSet set);

// One variable's option words, for ParseSubmitArgs with the variable's name as the origin.
struct EnvOption {
  std::string variable;
  std::vector<std::string> words;
};

// The option words the variables set in `environment` ("NAME=value" entries) stand for, for the
// command `front_end` runs as: "sbatch" reads InputEnvVars(kBatch), "salloc" InputEnvVars(kAlloc),
// anything else (Muster's own `muster submit`, "") nothing. In the table's order; variables that
// set nothing (a flag set to "no", an empty value) are left out. SBATCH_WAIT4SWITCH joins
// SBATCH_REQ_SWITCH's count (--switches=COUNT@WAIT); without it, it gives no words (ApplyInputEnv
// sets the wait of a count the script asked for). INVALID_ARGUMENT naming the variable for a
// value no option takes (SBATCH_DEBUG=2).
Result<std::vector<EnvOption>> InputEnvOptions(const std::string& front_end,
                                               const std::vector<std::string>& environment);

// Reads the variables into `opts` (on top of the script's #SBATCH lines; the command line goes on
// top of them). A malformed value, or an option this version refuses, fails as the option would,
// the message starting with the variable's name ("SBATCH_CONTAINER: option --container is not
// supported: ...").
Status ApplyInputEnv(const std::string& front_end, const std::vector<std::string>& environment,
                     SubmitOptions* opts);

}  // namespace muster::client
