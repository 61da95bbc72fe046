#include "muster/common/config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "config_reader.h"
#include "muster/common/duration.h"
#include "muster/common/framing.h"
#include "muster/common/hostlist.h"
#include "muster/common/job_limits.h"
#include "muster/common/resource_limit_names.h"
#include "muster/common/strings.h"
#include "muster/common/toml.h"

namespace muster {
namespace {
using config_internal::ParseControllers;
using config_internal::ParseSharing;
using config_internal::SubTable;
using config_internal::TableArray;
using config_internal::TableReader;
using config_internal::ValidateControllers;
using config_internal::ValidateSharing;

Status ValidateTls(const TlsConfig& t, const std::string& source) {
  const std::pair<const char*, const std::string*> files[] = {
      {"ca_file", &t.ca_file},
      {"controller_cert_file", &t.controller_cert_file},
      {"controller_key_file", &t.controller_key_file},
      {"node_cert_file", &t.node_cert_file},
      {"node_key_file", &t.node_key_file}};
  int set = 0;
  for (const auto& [key, value] : files) set += value->empty() ? 0 : 1;
  if (set == 0) return Status::Ok();
  for (const auto& [key, value] : files) {
    if (value->empty()) {
      return InvalidArgument(source + ": tls." + key +
                             " is missing: [tls] needs ca_file, controller_cert_file, "
                             "controller_key_file, node_cert_file and node_key_file");
    }
  }
  if (!IsValidNodeName(t.controller_name)) {
    return InvalidArgument(source + ": tls.controller_name '" + t.controller_name +
                           "' is not a valid name");
  }
  return Status::Ok();
}

Status Validate(Config& c, const std::string& source) {
  MUSTER_RETURN_IF_ERROR(ValidateTls(c.tls, source));
  if (c.node_auth.enabled() && c.node_auth.key_file.find("%n") == std::string::npos) {
    return InvalidArgument(source + ": node_auth.key_file '" + c.node_auth.key_file +
                           "' must contain %n (each node has its own key; the controller reads "
                           "every node's)");
  }
  MUSTER_RETURN_IF_ERROR(ValidateSharing(c, source));
  MUSTER_RETURN_IF_ERROR(ValidateControllers(c, source));
  if (!IsLoopbackAddress(c.controller.agent_address) && !c.controller.insecure &&
      !c.tls.enabled()) {
    return FailedPrecondition(
        source + ": controller.agent_address " + c.controller.agent_address +
        " is not a loopback address and [tls] is not configured: anyone who can reach it could "
        "register as a node. Configure [tls] (see `muster certs`), or, on a network only the "
        "cluster's hosts reach, say so with `insecure = true` under [controller]");
  }
  for (const auto& [key, value] : {std::pair{"api_address", &c.controller.api_address},
                                   std::pair{"api_listen", &c.controller.api_listen}}) {
    std::string host;
    uint16_t port = 0;
    if (!value->empty() && (!SplitHostPort(*value, &host, &port).ok() || port == 0)) {
      return InvalidArgument(source + ": controller." + key + " '" + *value +
                             "' is not host:port with a port");
    }
  }
  if (!c.controller.metrics_address.empty()) {
    std::string host;
    uint16_t port = 0;
    if (!SplitHostPort(c.controller.metrics_address, &host, &port).ok()) {
      return InvalidArgument(source + ": controller.metrics_address '" +
                             c.controller.metrics_address + "' is not host:port");
    }
    if (c.controller.metrics_token_file.empty()) {
      return InvalidArgument(source +
                             ": controller.metrics_address needs metrics_token_file: every "
                             "scraper must present its bearer token");
    }
  }
  if (!c.controller.web_address.empty()) {
    std::string host;
    uint16_t port = 0;
    if (!SplitHostPort(c.controller.web_address, &host, &port).ok()) {
      return InvalidArgument(source + ": controller.web_address '" + c.controller.web_address +
                             "' is not host:port");
    }
  }
  if (!c.controller.web_url.empty() && c.controller.web_url.rfind("http://", 0) != 0 &&
      c.controller.web_url.rfind("https://", 0) != 0) {
    return InvalidArgument(source + ": controller.web_url '" + c.controller.web_url +
                           "' must start with http:// or https://");
  }
  if (!c.agent.metrics_address.empty()) {
    std::string host;
    uint16_t port = 0;
    if (!SplitHostPort(c.agent.metrics_address, &host, &port).ok()) {
      return InvalidArgument(source + ": agent.metrics_address '" + c.agent.metrics_address +
                             "' is not host:port");
    }
    if (c.agent.metrics_token_file.empty()) {
      return InvalidArgument(source +
                             ": agent.metrics_address needs metrics_token_file: every scraper "
                             "must present its bearer token");
    }
  }
  if (!c.agent.reboot_program.empty() && c.agent.reboot_program[0] != '/') {
    return InvalidArgument(source + ": agent.reboot_program must be an absolute path");
  }
  if (!c.controller.api_listen.empty() && c.controller.api_address.empty()) {
    return InvalidArgument(source +
                           ": controller.api_listen needs api_address (where clients connect)");
  }
  std::set<std::string> node_names;
  for (const auto& n : c.nodes) {
    if (!IsValidNodeName(n.name)) {
      return InvalidArgument(source + ": node name '" + n.name +
                             "' is not valid (letters, digits, '.', '_' and '-', at most 64)");
    }
    if (c.tls.enabled() && n.name == c.tls.controller_name) {
      return InvalidArgument(source + ": node '" + n.name +
                             "' has the controller's certificate name (tls.controller_name)");
    }
    if (!node_names.insert(n.name).second) {
      return InvalidArgument(source + ": node '" + n.name + "' is defined twice");
    }
  }
  std::set<std::string> part_names;
  int defaults = 0;
  for (const auto& p : c.partitions) {
    if (!part_names.insert(p.name).second) {
      return InvalidArgument(source + ": partition '" + p.name + "' is defined twice");
    }
    for (const auto& n : p.nodes) {
      if (!node_names.count(n)) {
        return InvalidArgument(source + ": partition '" + p.name + "' names node '" + n +
                               "', which no [[nodes]] entry defines");
      }
    }
    if (p.is_default) ++defaults;
    if (p.max_time_ms && p.default_time_ms > p.max_time_ms) {
      return InvalidArgument(source + ": partition '" + p.name +
                             "': default_time is longer than max_time");
    }
  }
  if (defaults > 1) return InvalidArgument(source + ": more than one partition has default = true");
  if (defaults == 0 && !c.partitions.empty()) c.partitions.front().is_default = true;
  const auto& s = c.scheduling;
  if (s.node_not_responding_ms < s.heartbeat_interval_ms) {
    return InvalidArgument(
        source + ": scheduling.node_not_responding_ms must be at least heartbeat_interval_ms");
  }
  if (s.node_down_ms < s.node_not_responding_ms) {
    return InvalidArgument(source +
                           ": scheduling.node_down_ms must be at least node_not_responding_ms");
  }
  return Status::Ok();
}

}  // namespace

const NodeConfig* Config::FindNode(const std::string& name) const {
  for (const auto& n : nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

const PartitionConfig* Config::FindPartition(const std::string& name) const {
  for (const auto& p : partitions) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const PartitionConfig* Config::DefaultPartition() const {
  for (const auto& p : partitions) {
    if (p.is_default) return &p;
  }
  return nullptr;
}

Result<Config> ParseConfig(const std::string& text, const std::string& source) {
  MUSTER_ASSIGN_OR_RETURN(toml::table root, ParseToml(text, source));
  Config c;
  c.source = source;
  TableReader r(root, "", source);
  MUSTER_RETURN_IF_ERROR(r.String("cluster_name", &c.cluster_name));
  MUSTER_RETURN_IF_ERROR(r.StringList("admins", &c.admins));
  MUSTER_RETURN_IF_ERROR(r.StringList("operators", &c.operators));
  std::vector<std::string> private_data;
  MUSTER_RETURN_IF_ERROR(r.StringList("private_data", &private_data));
  for (const auto& what : private_data) {
    if (what == "jobs") {
      c.private_data.jobs = true;
    } else if (what == "usage") {
      c.private_data.usage = true;
    } else if (what == "accounts") {
      c.private_data.accounts = true;
    } else if (what == "users") {
      c.private_data.users = true;
    } else {
      return r.Error(
          r.Get("private_data"), "private_data",
          "unknown value '" + what + "' (supported: \"jobs\", \"usage\", \"accounts\", \"users\")");
    }
  }

  MUSTER_RETURN_IF_ERROR(SubTable(
      r, "controller",
      [&](TableReader& t) {
        MUSTER_RETURN_IF_ERROR(t.String("socket", &c.controller.socket_path));
        MUSTER_RETURN_IF_ERROR(t.String("agent_address", &c.controller.agent_address));
        MUSTER_RETURN_IF_ERROR(t.String("api_address", &c.controller.api_address));
        MUSTER_RETURN_IF_ERROR(t.String("api_listen", &c.controller.api_listen));
        MUSTER_RETURN_IF_ERROR(t.String("metrics_address", &c.controller.metrics_address));
        MUSTER_RETURN_IF_ERROR(t.String("metrics_token_file", &c.controller.metrics_token_file));
        MUSTER_RETURN_IF_ERROR(t.String("web_address", &c.controller.web_address));
        MUSTER_RETURN_IF_ERROR(t.String("web_url", &c.controller.web_url));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("user_request_rate", &c.controller.user_request_rate, 0, 1'000'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("user_request_burst", &c.controller.user_request_burst, 1, 10'000'000));
        MUSTER_RETURN_IF_ERROR(t.Bool("insecure", &c.controller.insecure));
        MUSTER_RETURN_IF_ERROR(t.String("state_dir", &c.controller.state_dir));
        MUSTER_RETURN_IF_ERROR(t.Bool("group_commit", &c.controller.group_commit));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("state_reserve_mb", &c.controller.state_reserve_mb, 0, 1'000'000));
        MUSTER_RETURN_IF_ERROR(t.String("log_level", &c.controller.log_level));
        MUSTER_RETURN_IF_ERROR(t.StringList("etcd_endpoints", &c.controller.etcd_endpoints));
        MUSTER_RETURN_IF_ERROR(t.String("etcd_prefix", &c.controller.etcd_prefix));
        MUSTER_RETURN_IF_ERROR(t.String("etcd_ca_file", &c.controller.etcd_ca_file));
        MUSTER_RETURN_IF_ERROR(t.String("etcd_cert_file", &c.controller.etcd_cert_file));
        MUSTER_RETURN_IF_ERROR(t.String("etcd_key_file", &c.controller.etcd_key_file));
        MUSTER_RETURN_IF_ERROR(t.Uint("leader_lease_s", &c.controller.leader_lease_s, 1, 60));
        MUSTER_RETURN_IF_ERROR(t.String("mail_prog", &c.controller.mail_prog));
        MUSTER_RETURN_IF_ERROR(t.String("mail_prog_user", &c.controller.mail_prog_user));
        if (!IsValidAccountName(c.controller.mail_prog_user)) {
          return t.Error(t.Get("mail_prog_user"), "mail_prog_user", "expected a user name");
        }
        if (!c.controller.mail_prog.empty() && c.controller.mail_prog[0] != '/') {
          return t.Error(t.Get("mail_prog"), "mail_prog", "expected an absolute path");
        }
        MUSTER_RETURN_IF_ERROR(t.String("log_format", &c.controller.log_format));
        if (c.controller.log_format != "text" && c.controller.log_format != "json") {
          return t.Error(t.Get("log_format"), "log_format", "expected text or json");
        }
        return t.String("log_file", &c.controller.log_file);
      },
      source));

  MUSTER_RETURN_IF_ERROR(SubTable(
      r, "scheduling",
      [&](TableReader& t) {
        auto& s = c.scheduling;
        MUSTER_RETURN_IF_ERROR(
            t.Uint("sched_min_interval_ms", &s.sched_min_interval_ms, 0, 60'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("sched_max_interval_ms", &s.sched_max_interval_ms, 1, 600'000));
        MUSTER_RETURN_IF_ERROR(t.Uint("kill_grace_ms", &s.kill_grace_ms, 0, 3'600'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("heartbeat_interval_ms", &s.heartbeat_interval_ms, 50, 600'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("node_not_responding_ms", &s.node_not_responding_ms, 100, 3'600'000));
        MUSTER_RETURN_IF_ERROR(t.Uint("node_down_ms", &s.node_down_ms, 100, 86'400'000));
        MUSTER_RETURN_IF_ERROR(t.Uint("reboot_timeout_s", &s.reboot_timeout_s, 1, 86'400));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("finished_job_retention_ms", &s.finished_job_retention_ms, 0, 86'400'000));
        MUSTER_RETURN_IF_ERROR(t.Uint("max_job_count", &s.max_job_count, 1, 100'000'000));
        MUSTER_RETURN_IF_ERROR(t.Uint("max_array_size", &s.max_array_size, 1, kMaxArrayTasks));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("max_pending_jobs_per_user", &s.max_pending_jobs_per_user, 0, 100'000'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("max_stored_mb_per_user", &s.max_stored_mb_per_user, 0, 100'000'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("accounting_retention_days", &s.accounting_retention_days, 0, 100'000));
        MUSTER_RETURN_IF_ERROR(t.Uint("audit_retention_days", &s.audit_retention_days, 0, 100'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("allocation_grace_ms", &s.allocation_grace_ms, 1'000, 86'400'000));
        MUSTER_RETURN_IF_ERROR(t.Uint("step_credential_lifetime_ms", &s.step_credential_lifetime_ms,
                                      1'000, 86'400'000));
        MUSTER_RETURN_IF_ERROR(t.Uint("backfill_depth", &s.backfill_depth, 0, 100'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("max_switch_wait_ms", &s.max_switch_wait_ms, 0, 30U * 86'400'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("priority_weight_age", &s.priority_weight_age, 0, 1'000'000'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("priority_weight_size", &s.priority_weight_size, 0, 1'000'000'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("priority_weight_partition", &s.priority_weight_partition, 0, 1'000'000'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("priority_weight_qos", &s.priority_weight_qos, 0, 1'000'000'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("priority_weight_fairshare", &s.priority_weight_fairshare, 0, 1'000'000'000));
        MUSTER_RETURN_IF_ERROR(t.Uint("fairshare_half_life_ms", &s.fairshare_half_life_ms, 60'000,
                                      3'650ULL * 86'400'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("preempt_min_runtime_ms", &s.preempt_min_runtime_ms, 0, 30ULL * 86'400'000));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("max_preemptors_per_pass", &s.max_preemptors_per_pass, 0, 1'000));
        MUSTER_RETURN_IF_ERROR(t.Bool("kill_invalid_depend", &s.kill_invalid_depend));
        MUSTER_RETURN_IF_ERROR(t.Bool("enable_user_top", &s.enable_user_top));
        for (const char* key : {"propagate_resource_limits", "propagate_resource_limits_except"}) {
          std::string& v = std::string_view(key) == "propagate_resource_limits"
                               ? s.propagate_resource_limits
                               : s.propagate_resource_limits_except;
          MUSTER_RETURN_IF_ERROR(t.String(key, &v));
          for (const std::string& item : Split(v, ',', true)) {
            std::string n = ToUpper(std::string(Trim(item)));
            if (StartsWith(n, "RLIMIT_")) n = n.substr(7);
            if (n != "ALL" && n != "NONE" && !ResourceLimitIndex(n)) {
              return t.Error(t.Get(key), key,
                             "expected resource limit names: ALL, NONE, AS, CORE, CPU, DATA, "
                             "FSIZE, MEMLOCK, NOFILE, NPROC, RSS, STACK");
            }
          }
        }
        MUSTER_RETURN_IF_ERROR(t.String("backfill", &s.backfill));
        if (s.backfill != "standard" && s.backfill != "strict") {
          return t.Error(t.Get("backfill"), "backfill", "expected standard or strict");
        }
        MUSTER_RETURN_IF_ERROR(t.String("placement", &s.placement));
        if (s.placement != "topology" && s.placement != "first_fit" && s.placement != "random") {
          return t.Error(t.Get("placement"), "placement", "expected topology, first_fit or random");
        }
        MUSTER_RETURN_IF_ERROR(t.Uint("placement_seed", &s.placement_seed));
        MUSTER_RETURN_IF_ERROR(t.String("backfill_order", &s.backfill_order));
        if (s.backfill_order != "priority" && s.backfill_order != "shortest" &&
            s.backfill_order != "area") {
          return t.Error(t.Get("backfill_order"), "backfill_order",
                         "expected priority, shortest or area");
        }
        MUSTER_RETURN_IF_ERROR(t.String("order", &s.order));
        if (s.order != "multifactor" && s.order != "fcfs" && s.order != "sjf" &&
            s.order != "wfp3" && s.order != "unicep" && s.order != "f1" && s.order != "hrrn") {
          return t.Error(t.Get("order"), "order",
                         "expected multifactor, fcfs, sjf, wfp3, unicep, f1 or hrrn");
        }
        MUSTER_RETURN_IF_ERROR(
            t.Uint("protect_after_ms", &s.protect_after_ms, 0, 3'650ULL * 86'400'000));
        if (s.protect_after_ms > 0 && s.order == "multifactor") {
          return t.Error(t.Get("protect_after_ms"), "protect_after_ms",
                         "applies to a published order (scheduling.order fcfs, sjf, wfp3, unicep, "
                         "f1 or hrrn); multifactor protects waiting jobs by their age factor and "
                         "reservations");
        }
        MUSTER_RETURN_IF_ERROR(t.String("fairshare_algorithm", &s.fairshare_algorithm));
        if (s.fairshare_algorithm != "fair_tree" && s.fairshare_algorithm != "drf") {
          return t.Error(t.Get("fairshare_algorithm"), "fairshare_algorithm",
                         "expected fair_tree or drf");
        }
        return t.Uint("priority_max_age_ms", &s.priority_max_age_ms, 1, 3'650ULL * 86'400'000);
      },
      source));

  MUSTER_RETURN_IF_ERROR(SubTable(
      r, "agent",
      [&](TableReader& t) {
        MUSTER_RETURN_IF_ERROR(t.String("spool_dir", &c.agent.spool_dir));
        MUSTER_RETURN_IF_ERROR(t.String("job_state_dir", &c.agent.job_state_dir));
        if (!c.agent.job_state_dir.empty() && c.agent.job_state_dir[0] != '/') {
          return t.Error(t.Get("job_state_dir"), "job_state_dir", "expected an absolute path");
        }
        MUSTER_RETURN_IF_ERROR(t.String("step_address", &c.agent.step_address));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("gpu_health_interval_ms", &c.agent.gpu_health_interval_ms, 50, 3'600'000));
        MUSTER_RETURN_IF_ERROR(t.String("health_check_program", &c.agent.health_check_program));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("health_check_interval_s", &c.agent.health_check_interval_s, 1, 86'400));
        MUSTER_RETURN_IF_ERROR(
            t.Uint("health_check_timeout_s", &c.agent.health_check_timeout_s, 1, 3'600));
        MUSTER_RETURN_IF_ERROR(t.Bool("kill_jobs_on_stop", &c.agent.kill_jobs_on_stop));
        MUSTER_RETURN_IF_ERROR(t.String("cgroup_root", &c.agent.cgroup_root));
        MUSTER_RETURN_IF_ERROR(t.String("prolog", &c.agent.prolog));
        MUSTER_RETURN_IF_ERROR(t.String("epilog", &c.agent.epilog));
        MUSTER_RETURN_IF_ERROR(t.Uint("prolog_timeout_s", &c.agent.prolog_timeout_s, 1, 86'400));
        MUSTER_RETURN_IF_ERROR(t.Uint("epilog_timeout_s", &c.agent.epilog_timeout_s, 1, 86'400));
        MUSTER_RETURN_IF_ERROR(t.String("reboot_program", &c.agent.reboot_program));
        MUSTER_RETURN_IF_ERROR(t.String("metrics_address", &c.agent.metrics_address));
        MUSTER_RETURN_IF_ERROR(t.String("metrics_token_file", &c.agent.metrics_token_file));
        MUSTER_RETURN_IF_ERROR(t.String("log_format", &c.agent.log_format));
        if (c.agent.log_format != "text" && c.agent.log_format != "json") {
          return t.Error(t.Get("log_format"), "log_format", "expected text or json");
        }
        return t.String("log_level", &c.agent.log_level);
      },
      source));

  MUSTER_RETURN_IF_ERROR(SubTable(
      r, "tls",
      [&](TableReader& t) {
        MUSTER_RETURN_IF_ERROR(t.String("ca_file", &c.tls.ca_file));
        MUSTER_RETURN_IF_ERROR(t.String("controller_cert_file", &c.tls.controller_cert_file));
        MUSTER_RETURN_IF_ERROR(t.String("controller_key_file", &c.tls.controller_key_file));
        MUSTER_RETURN_IF_ERROR(t.String("node_cert_file", &c.tls.node_cert_file));
        MUSTER_RETURN_IF_ERROR(t.String("node_key_file", &c.tls.node_key_file));
        return t.String("controller_name", &c.tls.controller_name);
      },
      source));

  MUSTER_RETURN_IF_ERROR(SubTable(
      r, "node_auth", [&](TableReader& t) { return t.String("key_file", &c.node_auth.key_file); },
      source));

  MUSTER_RETURN_IF_ERROR(SubTable(
      r, "munge",
      [&](TableReader& t) {
        MUSTER_RETURN_IF_ERROR(t.String("socket", &c.munge.socket));
        return t.Uint("max_ttl_s", &c.munge.max_ttl_s, 1, 86'400);
      },
      source));
  MUSTER_RETURN_IF_ERROR(SubTable(
      r, "billing",
      [&](TableReader& t) {
        MUSTER_RETURN_IF_ERROR(t.Double("cpu", &c.billing.cpu, 0, 1e6));
        MUSTER_RETURN_IF_ERROR(t.Double("mem_gb", &c.billing.mem_gb, 0, 1e6));
        MUSTER_RETURN_IF_ERROR(t.Double("gpu", &c.billing.gpu, 0, 1e6));
        return t.NumberTable("gpu_types", &c.billing.gpu_types, 0, 1e6);
      },
      source));

  MUSTER_RETURN_IF_ERROR(TableArray(
      r, "nodes",
      [&](TableReader& t, const toml::table& tbl) {
        std::string names;
        MUSTER_RETURN_IF_ERROR(t.String("names", &names));
        if (names.empty())
          return t.Error(&tbl, "names", "every [[nodes]] entry needs names = \"...\"");
        NodeConfig proto;
        MUSTER_RETURN_IF_ERROR(t.Uint("cpus", &proto.cpus, 1, 1'000'000));
        MUSTER_RETURN_IF_ERROR(t.Uint("memory_mb", &proto.memory_mb, 1));
        MUSTER_RETURN_IF_ERROR(t.Uint("gpus", &proto.gpus, 0, 1024));
        MUSTER_RETURN_IF_ERROR(t.String("gpu_type", &proto.gpu_type));
        MUSTER_RETURN_IF_ERROR(t.String("topology", &proto.topology));
        MUSTER_RETURN_IF_ERROR(t.StringList("features", &proto.features));
        MUSTER_RETURN_IF_ERROR(t.String("nvlink_domain", &proto.nvlink_domain));
        MUSTER_RETURN_IF_ERROR(t.Uint("tmp_disk_mb", &proto.tmp_disk_mb, 0));
        MUSTER_RETURN_IF_ERROR(t.Uint("shards_per_gpu", &proto.shards_per_gpu, 0, 1024));
        MUSTER_RETURN_IF_ERROR(t.Uint("weight", &proto.weight, 0, 4'294'967'280));
        std::vector<std::string> mig, gres;
        MUSTER_RETURN_IF_ERROR(t.StringList("mig", &mig));
        MUSTER_RETURN_IF_ERROR(t.StringList("gres", &gres));
        // "PROFILE:COUNT" for MIG slices, "NAME[:TYPE]:COUNT" for other GRES.
        auto item = [&](const std::string& key, const std::string& v, bool is_mig) -> Status {
          std::vector<std::string> f = Split(v, ':');
          NodeConfig::Gres g;
          uint64_t count = 0;
          if (f.size() >= 2) {
            if (auto n = ParseUint(f.back())) count = *n;
          }
          bool ok = count >= 1 && count <= 100'000 && f.size() <= (is_mig ? 2u : 3u);
          for (const auto& part : f) ok = ok && !part.empty();
          if (!ok) {
            return t.Error(
                t.Get(key), key,
                "'" + v + "': expected " +
                    (is_mig ? "PROFILE:COUNT (\"1g.10gb:7\")" : "NAME[:TYPE]:COUNT (\"nvme:2\")"));
          }
          g.name = is_mig ? "gpu" : ToLower(f[0]);
          g.type = is_mig ? ToLower(f[0]) : (f.size() == 3 ? ToLower(f[1]) : "");
          g.count = static_cast<uint32_t>(count);
          if (!is_mig && (g.name == "gpu" || g.name == "shard")) {
            return t.Error(t.Get(key), key,
                           "'" + v + "': GPUs are set with gpus/gpu_type/mig, shards with " +
                               "shards_per_gpu");
          }
          proto.gres.push_back(std::move(g));
          return Status::Ok();
        };
        for (const auto& v : mig) MUSTER_RETURN_IF_ERROR(item("mig", v, true));
        for (const auto& v : gres) MUSTER_RETURN_IF_ERROR(item("gres", v, false));
        if (proto.gpus > 0 && proto.gpu_type.empty()) proto.gpu_type = "gpu";
        auto expanded = ExpandHostlist(names);
        if (!expanded.ok()) return t.Error(t.Get("names"), "names", expanded.status().message());
        for (const auto& n : *expanded) {
          NodeConfig nc = proto;
          nc.name = n;
          c.nodes.push_back(std::move(nc));
        }
        return Status::Ok();
      },
      source));

  MUSTER_RETURN_IF_ERROR(TableArray(
      r, "partition",
      [&](TableReader& t, const toml::table& tbl) {
        PartitionConfig p;
        MUSTER_RETURN_IF_ERROR(t.String("name", &p.name));
        if (p.name.empty())
          return t.Error(&tbl, "name", "every [[partition]] needs name = \"...\"");
        MUSTER_RETURN_IF_ERROR(t.String("nodes", &p.nodes_expr));
        MUSTER_RETURN_IF_ERROR(t.Bool("default", &p.is_default));
        MUSTER_RETURN_IF_ERROR(t.TimeLimit("max_time", &p.max_time_ms));
        MUSTER_RETURN_IF_ERROR(t.TimeLimit("default_time", &p.default_time_ms));
        MUSTER_RETURN_IF_ERROR(t.Uint("priority_tier", &p.priority_tier, 0, 65'535));
        MUSTER_RETURN_IF_ERROR(t.String("preempt_mode", &p.preempt_mode));
        p.preempt_mode = ToLower(p.preempt_mode);
        if (p.preempt_mode != "off" && p.preempt_mode != "requeue" && p.preempt_mode != "cancel" &&
            p.preempt_mode != "suspend") {
          return t.Error(t.Get("preempt_mode"), "preempt_mode",
                         "expected off, requeue, cancel or suspend");
        }
        int64_t grace = 0;
        MUSTER_RETURN_IF_ERROR(t.Duration("grace_time", &grace));
        p.grace_time_ms = static_cast<uint64_t>(grace);
        MUSTER_RETURN_IF_ERROR(t.StringList("allowed_uids", &p.allowed_uids));
        MUSTER_RETURN_IF_ERROR(t.StringList("denied_uids", &p.denied_uids));
        auto expanded = ExpandHostlist(p.nodes_expr);
        if (!expanded.ok()) return t.Error(t.Get("nodes"), "nodes", expanded.status().message());
        p.nodes = std::move(*expanded);
        c.partitions.push_back(std::move(p));
        return Status::Ok();
      },
      source));

  MUSTER_RETURN_IF_ERROR(ParseSharing(r, c, source));
  MUSTER_RETURN_IF_ERROR(ParseControllers(r, c, source));

  MUSTER_RETURN_IF_ERROR(r.CheckNoUnknownKeys());
  MUSTER_RETURN_IF_ERROR(Validate(c, source));
  return c;
}

Result<Config> LoadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return NotFound("cannot read config file " + path +
                    " (set MUSTER_CONF or --config to the cluster's muster.toml)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseConfig(ss.str(), path);
}

std::string ResolveConfigPath(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  const char* env = std::getenv("MUSTER_CONF");
  if (env && *env) return env;
  return kDefaultConfigPath;
}

namespace {
std::string ReplaceNodeName(const std::string& pattern, const std::string& node) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'n') {
      out += node;
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}
}  // namespace

std::string TlsConfig::NodeCertFile(const std::string& node) const {
  return ReplaceNodeName(node_cert_file, node);
}

std::string TlsConfig::NodeKeyFile(const std::string& node) const {
  return ReplaceNodeName(node_key_file, node);
}

std::string NodeAuthConfig::KeyFile(const std::string& node) const {
  return ReplaceNodeName(key_file, node);
}

bool IsValidAccountName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '.' || name[0] == '-') return false;
  for (char ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') {
      return false;
    }
  }
  return true;
}

bool IsValidNodeName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '.' || name[0] == '-') return false;
  for (char ch : name) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

bool IsLoopbackAddress(const std::string& host_port) {
  std::string host;
  uint16_t port = 0;
  if (!SplitHostPort(host_port, &host, &port).ok()) return false;
  return host == "localhost" || host == "::1" || StartsWith(host, "127.");
}

}  // namespace muster
