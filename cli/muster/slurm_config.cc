#include "slurm_config.h"

#include <cstdio>
#include <string_view>
#include <vector>

#include "cli.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

std::string Or(const std::string& s) { return s.empty() ? "(null)" : s; }
std::string Sec(uint64_t ms) { return std::to_string(ms / 1000) + " sec"; }
// "host:port" -> port ("" when none).
std::string PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? "" : address.substr(colon + 1);
}
}  // namespace

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

std::string SlurmConfigLines(const Config& c, const std::string& path, int64_t now_ms) {
  const SchedulingConfig& s = c.scheduling;
  const AgentConfig& a = c.agent;
  const bool cgroups = a.cgroup_root != "none";
  bool preempting = false;
  for (const QosConfig& q : c.qos) preempting = preempting || !q.preempt.empty();
  std::vector<std::string> hidden;
  if (c.private_data.accounts) hidden.push_back("accounts");
  if (c.private_data.jobs) hidden.push_back("jobs");
  if (c.private_data.usage) hidden.push_back("usage");
  if (c.private_data.users) hidden.push_back("users");
  std::string out = "Configuration data as of " + FormatTimestamp(now_ms) + "\n";
  auto line = [&](std::string_view key, const std::string& value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%-23.*s = ", static_cast<int>(key.size()), key.data());
    out += buf;
    out += value;
    out += '\n';
  };
  // Accounting is Muster's own (sacct, sreport, sacctmgr work), with limits and QoS enforced.
  line("AccountingStorageEnforce", "associations,limits,qos");
  line("AccountingStorageType", "accounting_storage/slurmdbd");
  line("AcctGatherNodeFreq", "0 sec");
  line("AuthType", "auth/munge");
  line("BatchStartTimeout", "10 sec");
  line("ClusterName", c.cluster_name);
  line("CompleteWait", "0 sec");
  line("DefMemPerNode", "UNLIMITED");
  line("Epilog", Or(a.epilog));
  line("FirstJobId", "1");
  line("GresTypes", "gpu");
  line("HealthCheckInterval", a.health_check_program.empty()
                                  ? "0 sec"
                                  : std::to_string(a.health_check_interval_s) + " sec");
  line("HealthCheckProgram", Or(a.health_check_program));
  line("InactiveLimit", "0 sec");
  line("JobAcctGatherType", cgroups ? "jobacct_gather/cgroup" : "jobacct_gather/linux");
  line("JobRequeue", "1");
  line("KillOnBadExit", "0");
  line("KillWait", Sec(s.kill_grace_ms));
  {
    std::string licenses;  // "fluent:1,matlab:10", as slurm.conf's Licenses=
    for (const auto& [name, count] : c.licenses) {
      licenses += (licenses.empty() ? "" : ",") + name + ":" + std::to_string(count);
    }
    line("Licenses", Or(licenses));
  }
  line("MailProg", Or(c.controller.mail_prog));
  line("MaxArraySize", std::to_string(s.max_array_size));
  line("MaxJobCount", std::to_string(s.max_job_count));
  line("MessageTimeout", "10 sec");
  line("MinJobAge", Sec(s.finished_job_retention_ms));
  line("MpiDefault", "none");  // srun serves PMI-1, which Slurm's "none" (libpmi) is
  line("OverTimeLimit", "0 min");
  line("PreemptMode", preempting ? "REQUEUE" : "OFF");
  line("PreemptType", preempting ? "preempt/qos" : "preempt/none");
  line("PreemptExemptTime", FormatHms(static_cast<int64_t>(s.preempt_min_runtime_ms)));
  line("PriorityDecayHalfLife", FormatHms(static_cast<int64_t>(s.fairshare_half_life_ms)));
  line("PriorityMaxAge", FormatHms(static_cast<int64_t>(s.priority_max_age_ms)));
  line("PriorityType", "priority/multifactor");
  line("PriorityWeightAge", std::to_string(s.priority_weight_age));
  line("PriorityWeightFairShare", std::to_string(s.priority_weight_fairshare));
  line("PriorityWeightJobSize", std::to_string(s.priority_weight_size));
  line("PriorityWeightPartition", std::to_string(s.priority_weight_partition));
  line("PriorityWeightQOS", std::to_string(s.priority_weight_qos));
  line("PrivateData", hidden.empty() ? "none" : Join(hidden, ","));
  line("ProctrackType", cgroups ? "proctrack/cgroup" : "proctrack/linuxproc");
  line("Prolog", Or(a.prolog));
  line("PropagateResourceLimits", Or(s.propagate_resource_limits));
  line("PropagateResourceLimitsExcept", Or(s.propagate_resource_limits_except));
  line("PrologEpilogTimeout", std::to_string(a.prolog_timeout_s));
  line("ReturnToService", "2");  // a node is back as soon as its agent registers
  line("SchedulerParameters", "bf_max_job_test=" + std::to_string(s.backfill_depth));
  line("SchedulerTimeSlice", "30 sec");
  line("SchedulerType", "sched/backfill");
  line("SelectType", "select/cons_tres");
  line("SelectTypeParameters", "CR_CORE_MEMORY");
  line("SlurmUser", "root(0)");
  if (c.controllers.empty()) {
    line("SlurmctldHost[0]", HostOf(c.controller.agent_address));
  } else {
    for (size_t i = 0; i < c.controllers.size(); ++i) {
      const ControllerHostConfig& h = c.controllers[i];
      line("SlurmctldHost[" + std::to_string(i) + "]",
           h.name + "(" + HostOf(h.agent_address) + ")");
    }
  }
  line("SlurmctldPort", Or(PortOf(c.controller.agent_address)));
  line("SlurmdTimeout", Sec(s.node_down_ms));
  line("SLURM_CONF", path);
  line("SLURM_VERSION", kSlurmCompatVersion);
  line("StateSaveLocation", c.controller.state_dir);
  line("SuspendTime", "INFINITE");
  line("TaskPlugin", cgroups ? "task/cgroup" : "task/none");
  line("TmpFS", "/tmp");
  line("TopologyPlugin", "topology/tree");
  line("TrackWCKey", "No");
  line("TreeWidth", "50");
  line("UnkillableStepTimeout", "60 sec");
  line("WaitTime", "0 sec");
  return out;
}

}  // namespace muster::cli
