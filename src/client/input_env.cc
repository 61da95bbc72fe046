// sbatch's and salloc's input environment variables: the table from their Slurm 22.05 manual
// pages, and the option words each variable set stands for.
#include "muster/client/input_env.h"

#include <map>
#include <optional>
#include <string_view>

#include "muster/common/duration.h"
#include "muster/common/strings.h"

namespace muster::client {
namespace {

using K = InputEnvKind;

// Variables both manual pages list that are not options.
constexpr const char* kConfNote =
    "not read: Muster's clients find their configuration by MUSTER_CONF, not slurm.conf";
constexpr const char* kDebugFlagsNote = "not read: Muster has no DebugFlags";
constexpr const char* kExitErrorNote =
    "not read: a Slurm error exits 1 (2 for a bad option), whatever the variable says";

const std::vector<InputEnvVar>& BatchVars() {
  static const std::vector<InputEnvVar> v = {
      {"SBATCH_ACCOUNT", "account", K::kValue, ""},
      {"SBATCH_ACCTG_FREQ", "acctg-freq", K::kValue, ""},
      {"SBATCH_ARRAY_INX", "array", K::kValue, ""},
      {"SBATCH_BATCH", "batch", K::kValue, ""},
      {"SBATCH_CLUSTERS", "clusters", K::kValue, ""},
      {"SLURM_CLUSTERS", "clusters", K::kValue, ""},
      {"SBATCH_CONSTRAINT", "constraint", K::kValue, ""},
      {"SBATCH_CONTAINER", "container", K::kValue, ""},
      {"SBATCH_CORE_SPEC", "core-spec", K::kValue, ""},
      {"SBATCH_CPUS_PER_GPU", "cpus-per-gpu", K::kValue, ""},
      {"SBATCH_DEBUG", "verbose", K::kZeroOne, ""},
      {"SBATCH_DELAY_BOOT", "delay-boot", K::kValue, ""},
      {"SBATCH_DISTRIBUTION", "distribution", K::kValue, ""},
      {"SBATCH_ERROR", "error", K::kValue, ""},
      {"SBATCH_EXCLUSIVE", "exclusive", K::kOptional, ""},
      {"SBATCH_EXPORT", "export", K::kValue, ""},
      {"SBATCH_GET_USER_ENV", "get-user-env", K::kOptional, ""},
      {"SBATCH_GPU_BIND", "gpu-bind", K::kValue, ""},
      {"SBATCH_GPU_FREQ", "gpu-freq", K::kValue, ""},
      {"SBATCH_GPUS", "gpus", K::kValue, ""},
      {"SBATCH_GPUS_PER_NODE", "gpus-per-node", K::kValue, ""},
      {"SBATCH_GPUS_PER_TASK", "gpus-per-task", K::kValue, ""},
      {"SBATCH_GRES", "gres", K::kValue, ""},
      {"SBATCH_GRES_FLAGS", "gres-flags", K::kValue, ""},
      {"SBATCH_HINT", "hint", K::kValue, ""},
      {"SLURM_HINT", "hint", K::kValue, ""},
      {"SBATCH_IGNORE_PBS", "ignore-pbs", K::kFlag, ""},
      {"SBATCH_INPUT", "input", K::kValue, ""},
      {"SBATCH_JOB_NAME", "job-name", K::kValue, ""},
      {"SBATCH_MEM_BIND", "mem-bind", K::kValue, ""},
      {"SBATCH_MEM_PER_CPU", "mem-per-cpu", K::kValue, ""},
      {"SBATCH_MEM_PER_GPU", "mem-per-gpu", K::kValue, ""},
      {"SBATCH_MEM_PER_NODE", "mem", K::kValue, ""},
      {"SBATCH_NETWORK", "network", K::kValue, ""},
      {"SBATCH_NO_KILL", "no-kill", K::kFlag, ""},
      {"SBATCH_NO_REQUEUE", "no-requeue", K::kFlag, ""},
      {"SBATCH_OPEN_MODE", "open-mode", K::kValue, ""},
      {"SBATCH_OUTPUT", "output", K::kValue, ""},
      {"SBATCH_OVERCOMMIT", "overcommit", K::kFlag, ""},
      {"SBATCH_PARTITION", "partition", K::kValue, ""},
      {"SBATCH_POWER", "power", K::kValue, ""},
      {"SBATCH_PROFILE", "profile", K::kValue, ""},
      {"SBATCH_QOS", "qos", K::kValue, ""},
      {"SBATCH_REQ_SWITCH", "switches", K::kValue, ""},
      {"SBATCH_REQUEUE", "requeue", K::kFlag, ""},
      {"SBATCH_RESERVATION", "reservation", K::kValue, ""},
      {"SBATCH_SIGNAL", "signal", K::kValue, ""},
      {"SBATCH_SPREAD_JOB", "spread-job", K::kFlag, ""},
      {"SBATCH_THREAD_SPEC", "thread-spec", K::kValue, ""},
      {"SBATCH_THREADS_PER_CORE", "threads-per-core", K::kValue, ""},
      {"SBATCH_TIMELIMIT", "time", K::kValue, ""},
      {"SBATCH_USE_MIN_NODES", "use-min-nodes", K::kFlag, ""},
      {"SBATCH_WAIT", "wait", K::kFlag, ""},
      {"SBATCH_WAIT_ALL_NODES", "wait-all-nodes", K::kZeroOne, ""},
      {"SBATCH_WAIT4SWITCH", "switches", K::kSwitchWait, ""},
      {"SBATCH_WCKEY", "wckey", K::kValue, ""},
      {"SLURM_CONF", "", K::kNotOption, kConfNote},
      {"SLURM_DEBUG_FLAGS", "", K::kNotOption, kDebugFlagsNote},
      {"SLURM_EXIT_ERROR", "", K::kNotOption, kExitErrorNote},
      {"SLURM_STEP_KILLED_MSG_NODE_ID", "", K::kNotOption,
       "not read: it only quiets Slurm's own log lines"},
      {"SLURM_UMASK", "", K::kNotOption, "not read: the job's umask is not taken from it"},
  };
  return v;
}

const std::vector<InputEnvVar>& AllocVars() {
  static const std::vector<InputEnvVar> v = {
      {"SALLOC_ACCOUNT", "account", K::kValue, ""},
      {"SALLOC_ACCTG_FREQ", "acctg-freq", K::kValue, ""},
      {"SALLOC_BELL", "bell", K::kFlag, ""},
      {"SALLOC_BURST_BUFFER", "bb", K::kValue, ""},
      {"SALLOC_CLUSTERS", "clusters", K::kValue, ""},
      {"SLURM_CLUSTERS", "clusters", K::kValue, ""},
      {"SALLOC_CONSTRAINT", "constraint", K::kValue, ""},
      {"SALLOC_CONTAINER", "container", K::kValue, ""},
      {"SALLOC_CORE_SPEC", "core-spec", K::kValue, ""},
      {"SALLOC_CPUS_PER_GPU", "cpus-per-gpu", K::kValue, ""},
      {"SALLOC_DEBUG", "verbose", K::kZeroOne, ""},
      {"SALLOC_DELAY_BOOT", "delay-boot", K::kValue, ""},
      {"SALLOC_EXCLUSIVE", "exclusive", K::kOptional, ""},
      {"SALLOC_GPU_BIND", "gpu-bind", K::kValue, ""},
      {"SALLOC_GPU_FREQ", "gpu-freq", K::kValue, ""},
      {"SALLOC_GPUS", "gpus", K::kValue, ""},
      {"SALLOC_GPUS_PER_NODE", "gpus-per-node", K::kValue, ""},
      {"SALLOC_GPUS_PER_TASK", "gpus-per-task", K::kValue, ""},
      {"SALLOC_GRES", "gres", K::kValue, ""},
      {"SALLOC_GRES_FLAGS", "gres-flags", K::kValue, ""},
      {"SALLOC_HINT", "hint", K::kValue, ""},
      {"SLURM_HINT", "hint", K::kValue, ""},
      {"SALLOC_IMMEDIATE", "immediate", K::kOptional, ""},
      {"SALLOC_KILL_CMD", "kill-command", K::kOptional, ""},
      {"SALLOC_MEM_BIND", "mem-bind", K::kValue, ""},
      {"SALLOC_MEM_PER_CPU", "mem-per-cpu", K::kValue, ""},
      {"SALLOC_MEM_PER_GPU", "mem-per-gpu", K::kValue, ""},
      {"SALLOC_MEM_PER_NODE", "mem", K::kValue, ""},
      {"SALLOC_NETWORK", "network", K::kValue, ""},
      {"SALLOC_NO_BELL", "no-bell", K::kFlag, ""},
      {"SALLOC_NO_KILL", "no-kill", K::kFlag, ""},
      {"SALLOC_OVERCOMMIT", "overcommit", K::kFlag, ""},
      {"SALLOC_PARTITION", "partition", K::kValue, ""},
      {"SALLOC_POWER", "power", K::kValue, ""},
      {"SALLOC_PROFILE", "profile", K::kValue, ""},
      {"SALLOC_QOS", "qos", K::kValue, ""},
      {"SALLOC_REQ_SWITCH", "switches", K::kValue, ""},
      {"SALLOC_RESERVATION", "reservation", K::kValue, ""},
      {"SALLOC_SIGNAL", "signal", K::kValue, ""},
      {"SALLOC_SPREAD_JOB", "spread-job", K::kFlag, ""},
      {"SALLOC_THREAD_SPEC", "thread-spec", K::kValue, ""},
      {"SALLOC_THREADS_PER_CORE", "threads-per-core", K::kValue, ""},
      {"SALLOC_TIMELIMIT", "time", K::kValue, ""},
      {"SALLOC_USE_MIN_NODES", "use-min-nodes", K::kFlag, ""},
      {"SALLOC_WAIT_ALL_NODES", "wait-all-nodes", K::kZeroOne, ""},
      {"SALLOC_WAIT4SWITCH", "switches", K::kSwitchWait, ""},
      {"SALLOC_WCKEY", "wckey", K::kValue, ""},
      {"SLURM_CONF", "", K::kNotOption, kConfNote},
      {"SLURM_DEBUG_FLAGS", "", K::kNotOption, kDebugFlagsNote},
      {"SLURM_EXIT_ERROR", "", K::kNotOption, kExitErrorNote},
      {"SLURM_EXIT_IMMEDIATE", "", K::kNotOption,
       "not read: salloc --immediate that is not granted in time exits 1"},
  };
  return v;
}

// The flag rule of both manual pages: empty, "yes" or a non-zero number sets the flag.
bool FlagSet(std::string_view v) {
  if (v.empty() || EqualsIgnoreCase(v, "yes")) return true;
  auto n = ParseInt(v);
  return n && *n != 0;
}

using EnvMap = std::map<std::string, std::string, std::less<>>;

// The variables of `environment` ("NAME=value"), by name.
EnvMap ByName(const std::vector<std::string>& environment) {
  EnvMap out;
  for (const std::string& e : environment) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos) continue;
    out.emplace(e.substr(0, eq), e.substr(eq + 1));  // the first, as getenv finds it
  }
  return out;
}

// Set, and not empty.
bool Given(const EnvMap& env, const char* name) {
  const auto it = env.find(name);
  return it != env.end() && !it->second.empty();
}

// The switch variables of `set`: the count's, the wait's.
std::pair<const char*, const char*> SwitchVars(OptionSet set) {
  return set == OptionSet::kAlloc ? std::pair{"SALLOC_REQ_SWITCH", "SALLOC_WAIT4SWITCH"}
                                  : std::pair{"SBATCH_REQ_SWITCH", "SBATCH_WAIT4SWITCH"};
}

// The table `front_end` reads, if any.
std::optional<OptionSet> ReaderSet(const std::string& front_end) {
  if (front_end == "sbatch") return OptionSet::kBatch;
  if (front_end == "salloc") return OptionSet::kAlloc;
  return std::nullopt;
}

// The option words of `set`'s variables in `env`.
Result<std::vector<EnvOption>> Options(OptionSet set, const EnvMap& env) {
  const auto [count_var, wait_var] = SwitchVars(set);
  std::vector<EnvOption> out;
  for (const InputEnvVar& var : InputEnvVars(set)) {
    const auto it = env.find(var.name);
    if (it == env.end() || var.kind == K::kNotOption) continue;
    const std::string& value = it->second;
    const std::string opt = std::string("--") + var.option;
    std::string word;
    switch (var.kind) {
      case K::kValue:
        if (value.empty()) continue;
        word = opt + "=" + value;
        // The count takes the wait of its own variable (COUNT@WAIT), else the wait variable's.
        if (var.name == std::string_view(count_var) && value.find('@') == std::string::npos &&
            Given(env, wait_var)) {
          word += "@" + env.find(wait_var)->second;
        }
        break;
      case K::kFlag:
        if (!FlagSet(value)) continue;
        word = opt;
        break;
      case K::kOptional:
        word = value.empty() ? opt : opt + "=" + value;
        break;
      case K::kZeroOne:
        if (value != "0" && value != "1") {
          return InvalidArgument(std::string(var.name) + "=" + value + ": expected 0 or 1 (" + opt +
                                 ")");
        }
        if (std::string_view(var.option) == "verbose") {  // -v takes no value
          if (value == "0") continue;
          word = opt;
        } else {
          word = opt + "=" + value;
        }
        break;
      case K::kSwitchWait:
        // Joined to the count above, or applied by ApplyInputEnv; checked here to be named.
        if (!value.empty()) {
          if (auto ms = ParseTimeLimit(value); !ms.ok()) {
            return ms.status().Prepend(std::string(var.name) + ": --switches wait");
          }
        }
        continue;
      case K::kNotOption:
        continue;
    }
    out.push_back({var.name, {std::move(word)}});
  }
  return out;
}

}  // namespace

const std::vector<InputEnvVar>& InputEnvVars(OptionSet set) {
  static const std::vector<InputEnvVar> none;
  switch (set) {
    case OptionSet::kBatch:
      return BatchVars();
    case OptionSet::kAlloc:
      return AllocVars();
    default:
      return none;
  }
}

Result<std::vector<EnvOption>> InputEnvOptions(const std::string& front_end,
                                               const std::vector<std::string>& environment) {
  const auto set = ReaderSet(front_end);
  if (!set) return std::vector<EnvOption>{};
  return Options(*set, ByName(environment));
}

Status ApplyInputEnv(const std::string& front_end, const std::vector<std::string>& environment,
                     SubmitOptions* opts) {
  const auto set = ReaderSet(front_end);
  if (!set) return Status::Ok();
  const EnvMap env = ByName(environment);
  MUSTER_ASSIGN_OR_RETURN(std::vector<EnvOption> options, Options(*set, env));
  for (const EnvOption& e : options) {
    MUSTER_RETURN_IF_ERROR(ParseSubmitArgs(e.words, e.variable, opts, *set));
  }
  // A wait without the count variable: the wait of the count the script's #SBATCH --switches
  // asked for (as Slurm keeps the two apart); with no count anywhere it has nothing to wait for.
  const auto [count_var, wait_var] = SwitchVars(*set);
  if (Given(env, wait_var) && !Given(env, count_var) && opts->max_switches) {
    auto ms = ParseTimeLimit(env.find(wait_var)->second);
    if (ms.ok()) opts->switches_wait_ms = *ms;  // (Options checked it)
  }
  return Status::Ok();
}

}  // namespace muster::client
