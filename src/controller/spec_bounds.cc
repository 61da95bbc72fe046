#include "spec_bounds.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "job_mail.h"
#include "muster/common/config.h"
#include "muster/common/job_limits.h"
#include "muster/common/output_pattern.h"
#include "muster/common/resource_limit_names.h"
#include "muster/common/text_bounds.h"

namespace muster::controller {
namespace {

Status TooLong(std::string_view what, size_t limit) {
  return InvalidArgument(std::string(what) + " is longer than " + std::to_string(limit) + " bytes");
}

}  // namespace

Status CheckJobSpecBounds(const v1::JobSpec& spec, size_t cluster_nodes) {
  if (spec.script().size() > kMaxScriptBytes) {
    return InvalidArgument("batch script is larger than " + std::to_string(kMaxScriptBytes >> 20) +
                           " MiB");
  }
  MUSTER_RETURN_IF_ERROR(CheckText("job name", spec.name(), kMaxNameBytes));
  if (spec.name().find('\n') != std::string::npos) {
    return InvalidArgument("job name contains a line break");
  }
  // The environment and the arguments become execve()'s arrays on the node.
  if (static_cast<size_t>(spec.environment_size()) > kMaxEnvironmentEntries) {
    return InvalidArgument("environment has " + std::to_string(spec.environment_size()) +
                           " variables; at most " + std::to_string(kMaxEnvironmentEntries));
  }
  size_t env_bytes = 0;
  for (const std::string& kv : spec.environment()) {
    MUSTER_RETURN_IF_ERROR(CheckText("an environment variable", kv, kMaxArgumentBytes));
    if (kv.find('=') == std::string::npos || kv[0] == '=') {
      return InvalidArgument("environment entry '" + kv.substr(0, 64) + "' is not KEY=VALUE");
    }
    env_bytes += kv.size() + 1;
  }
  if (env_bytes > kMaxEnvironmentBytes) return TooLong("the environment", kMaxEnvironmentBytes);
  MUSTER_RETURN_IF_ERROR(
      CheckTextList("script arguments", spec.script_args(), kMaxScriptArgs, kMaxArgumentBytes));
  size_t arg_bytes = 0;
  for (const std::string& a : spec.script_args()) arg_bytes += a.size() + 1;
  if (arg_bytes > kMaxScriptArgsBytes)
    return TooLong("the script's arguments", kMaxScriptArgsBytes);

  MUSTER_RETURN_IF_ERROR(CheckText("working directory", spec.work_dir(), kMaxPathBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("submit directory", spec.submit_dir(), kMaxPathBytes));
  MUSTER_RETURN_IF_ERROR(CheckOutputPattern(spec.stdout_pattern(), "--output"));
  MUSTER_RETURN_IF_ERROR(CheckOutputPattern(spec.stdin_pattern(), "--input"));
  MUSTER_RETURN_IF_ERROR(CheckOutputPattern(spec.stderr_pattern(), "--error"));
  MUSTER_RETURN_IF_ERROR(CheckText("submit host", spec.submit_host(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("--gpus type", spec.gpu_type(), kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(
      CheckTextList("--gpus-per-node", spec.gpu_types(), 8, kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("--topology", spec.topology(), kMaxShortStringBytes));
  if (!spec.account().empty() && !IsValidAccountName(spec.account())) {
    return InvalidArgument("bad account name '" + spec.account().substr(0, 64) +
                           "': at most 64 letters, digits, '.', '_' and '-'");
  }
  if (!spec.qos().empty() && !IsValidAccountName(spec.qos())) {
    return InvalidArgument("bad qos name '" + spec.qos().substr(0, 64) +
                           "': at most 64 letters, digits, '.', '_' and '-'");
  }
  if (!spec.reservation().empty() && !IsValidAccountName(spec.reservation())) {
    return InvalidArgument("bad reservation name '" + spec.reservation().substr(0, 64) +
                           "': at most 64 letters, digits, '.', '_' and '-'");
  }
  MUSTER_RETURN_IF_ERROR(CheckMailRequest(spec));
  if (spec.signal() < 0 || spec.signal() > 64 || spec.signal_time_s() > 65'535) {
    return InvalidArgument("--signal: the signal is 1-64 and its time at most 65535 seconds");
  }
  MUSTER_RETURN_IF_ERROR(CheckText("--constraint", spec.constraint(), kMaxExpressionBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("--array", spec.array(), kMaxExpressionBytes));
  MUSTER_RETURN_IF_ERROR(CheckText("--dependency", spec.dependency(), kMaxExpressionBytes));
  MUSTER_RETURN_IF_ERROR(
      CheckTextList("--partition", spec.partitions(), kMaxListEntries, kMaxShortStringBytes));
  if (static_cast<size_t>(spec.gres_size()) > kMaxListEntries) {
    return InvalidArgument("--gres has " + std::to_string(spec.gres_size()) + " items; at most " +
                           std::to_string(kMaxListEntries));
  }
  for (const v1::GresSpec& g : spec.gres()) {
    MUSTER_RETURN_IF_ERROR(CheckText("a --gres name", g.name(), kMaxShortStringBytes));
    MUSTER_RETURN_IF_ERROR(CheckText("a --gres type", g.type(), kMaxShortStringBytes));
  }
  // --propagate: Slurm's ten limit names, each once at most; --get-user-env's mode.
  if (spec.propagated_limits_size() > 16) {
    return InvalidArgument("--propagate names " + std::to_string(spec.propagated_limits_size()) +
                           " limits; there are ten");
  }
  for (const v1::ResourceLimit& l : spec.propagated_limits()) {
    if (!ResourceLimitIndex(l.name())) {
      return InvalidArgument("--propagate: no resource limit named '" + l.name().substr(0, 16) +
                             "'");
    }
  }
  if (spec.has_get_user_env()) {
    const std::string& mode = spec.get_user_env().mode();
    if (!mode.empty() && mode != "S" && mode != "L") {
      return InvalidArgument("--get-user-env: the mode is S or L");
    }
  }
  if (static_cast<size_t>(spec.licenses_size()) > kMaxListEntries) {
    return InvalidArgument("--licenses names " + std::to_string(spec.licenses_size()) +
                           " licenses; at most " + std::to_string(kMaxListEntries));
  }
  // Numbers from a raw API client are not the CLI's parsed ones: bounded so that no product of
  // them (memory per GPU times GPUs, tasks times CPUs) can wrap.
  constexpr uint64_t kMaxMemoryMb = uint64_t{1} << 40;
  constexpr uint32_t kMaxCount = 10'000'000;
  constexpr int64_t kMaxTimeLimitMs = int64_t{100'000} * 86'400'000;
  if (spec.mem_per_node_mb() > kMaxMemoryMb || spec.mem_per_gpu_mb() > kMaxMemoryMb ||
      spec.mem_per_cpu_mb() > kMaxMemoryMb) {
    return InvalidArgument("memory request is too large (at most 1024T)");
  }
  if (spec.time_limit_ms() > kMaxTimeLimitMs || spec.switches_wait_ms() > kMaxTimeLimitMs) {
    return InvalidArgument("time limit is too long (at most 100000 days)");
  }
  if (spec.nice() < -2'147'483'645 || spec.nice() > 2'147'483'645) {
    return InvalidArgument("nice is between -2147483645 and 2147483645");
  }
  if (spec.begin_time_ms() < 0 || spec.deadline_ms() < 0) {
    return InvalidArgument("begin and deadline times must not be negative");
  }
  for (uint32_t n : {spec.nodes(), spec.min_nodes(), spec.ntasks(), spec.ntasks_per_node(),
                     spec.cpus_per_task(), spec.gpus_per_node(), spec.gpus_total(),
                     spec.gpus_per_task(), spec.gpus_per_socket(), spec.min_cpus_per_node()}) {
    if (n > kMaxCount) return InvalidArgument("a node, task, CPU or GPU count is too large");
  }
  for (const v1::GresSpec& g : spec.gres()) {
    if (g.count() > kMaxCount) return InvalidArgument("a --gres count is too large");
  }
  if (spec.core_spec() > 65'535 || spec.thread_spec() > 65'535) {
    return InvalidArgument("--core-spec and --thread-spec are at most 65535");
  }
  // Node lists are checked for size before anything looks at their names (de-duplication,
  // lookups): a list longer than the cluster is refused at once.
  const size_t max_nodes = std::max<size_t>(cluster_nodes, 1);
  MUSTER_RETURN_IF_ERROR(
      CheckTextList("--nodelist", spec.required_nodes(), max_nodes, kMaxShortStringBytes));
  MUSTER_RETURN_IF_ERROR(
      CheckTextList("--exclude", spec.excluded_nodes(), max_nodes, kMaxShortStringBytes));
  if (static_cast<size_t>(spec.tasks_per_node_size()) > max_nodes) {
    return InvalidArgument("tasks per node are given for more nodes than the cluster has");
  }
  return Status::Ok();
}

Status CheckIdCount(size_t ids) {
  if (ids > kMaxJobIdsPerRequest) {
    return InvalidArgument(std::to_string(ids) + " job ids in one request; at most " +
                           std::to_string(kMaxJobIdsPerRequest));
  }
  return Status::Ok();
}

}  // namespace muster::controller
