#include "muster/common/config_reload.h"

#include <map>
#include <utility>

namespace muster {
namespace {

// Appends the name of every listed field that differs between a and b.
#define MUSTER_CHANGED(field) \
  if (!(a.field == b.field)) out.push_back(#field)

std::vector<std::string> ChangedControllerKeys(const ControllerConfig& a,
                                               const ControllerConfig& b) {
  std::vector<std::string> out;
  MUSTER_CHANGED(socket_path);
  MUSTER_CHANGED(api_address);
  MUSTER_CHANGED(api_listen);
  MUSTER_CHANGED(user_request_rate);
  MUSTER_CHANGED(user_request_burst);
  MUSTER_CHANGED(agent_address);
  MUSTER_CHANGED(metrics_address);
  MUSTER_CHANGED(metrics_token_file);
  MUSTER_CHANGED(web_address);
  MUSTER_CHANGED(web_url);
  MUSTER_CHANGED(insecure);
  MUSTER_CHANGED(state_dir);
  MUSTER_CHANGED(group_commit);
  MUSTER_CHANGED(state_reserve_mb);
  MUSTER_CHANGED(log_level);
  MUSTER_CHANGED(log_file);
  MUSTER_CHANGED(log_format);
  MUSTER_CHANGED(etcd_endpoints);
  MUSTER_CHANGED(etcd_prefix);
  MUSTER_CHANGED(etcd_ca_file);
  MUSTER_CHANGED(etcd_cert_file);
  MUSTER_CHANGED(etcd_key_file);
  MUSTER_CHANGED(leader_lease_s);
  MUSTER_CHANGED(mail_prog);
  MUSTER_CHANGED(mail_prog_user);
  if (out.empty() && !(a == b)) out.push_back("(a key this list does not name)");
  return out;
}

std::vector<std::string> ChangedSchedulingKeys(const SchedulingConfig& a,
                                               const SchedulingConfig& b) {
  std::vector<std::string> out;
  MUSTER_CHANGED(sched_min_interval_ms);
  MUSTER_CHANGED(sched_max_interval_ms);
  MUSTER_CHANGED(kill_grace_ms);
  MUSTER_CHANGED(heartbeat_interval_ms);
  MUSTER_CHANGED(node_not_responding_ms);
  MUSTER_CHANGED(node_down_ms);
  MUSTER_CHANGED(finished_job_retention_ms);
  MUSTER_CHANGED(max_job_count);
  MUSTER_CHANGED(max_array_size);
  MUSTER_CHANGED(max_pending_jobs_per_user);
  MUSTER_CHANGED(max_stored_mb_per_user);
  MUSTER_CHANGED(accounting_retention_days);
  MUSTER_CHANGED(audit_retention_days);
  MUSTER_CHANGED(allocation_grace_ms);
  MUSTER_CHANGED(step_credential_lifetime_ms);
  MUSTER_CHANGED(fairshare_algorithm);
  MUSTER_CHANGED(fairshare_half_life_ms);
  MUSTER_CHANGED(backfill_depth);
  MUSTER_CHANGED(backfill);
  MUSTER_CHANGED(order);
  MUSTER_CHANGED(protect_after_ms);
  MUSTER_CHANGED(backfill_order);
  MUSTER_CHANGED(placement);
  MUSTER_CHANGED(placement_seed);
  MUSTER_CHANGED(max_switch_wait_ms);
  MUSTER_CHANGED(priority_weight_age);
  MUSTER_CHANGED(priority_weight_size);
  MUSTER_CHANGED(priority_weight_partition);
  MUSTER_CHANGED(priority_weight_qos);
  MUSTER_CHANGED(priority_weight_fairshare);
  MUSTER_CHANGED(priority_max_age_ms);
  MUSTER_CHANGED(preempt_min_runtime_ms);
  MUSTER_CHANGED(max_preemptors_per_pass);
  MUSTER_CHANGED(kill_invalid_depend);
  MUSTER_CHANGED(enable_user_top);
  MUSTER_CHANGED(propagate_resource_limits);
  MUSTER_CHANGED(propagate_resource_limits_except);
  if (out.empty() && !(a == b)) out.push_back("(a key this list does not name)");
  return out;
}

std::vector<std::string> ChangedNodeFields(const NodeConfig& a, const NodeConfig& b) {
  std::vector<std::string> out;
  MUSTER_CHANGED(cpus);
  MUSTER_CHANGED(memory_mb);
  MUSTER_CHANGED(gpus);
  MUSTER_CHANGED(gpu_type);
  MUSTER_CHANGED(topology);
  MUSTER_CHANGED(features);
  MUSTER_CHANGED(nvlink_domain);
  MUSTER_CHANGED(tmp_disk_mb);
  MUSTER_CHANGED(gres);
  MUSTER_CHANGED(shards_per_gpu);
  MUSTER_CHANGED(weight);
  if (out.empty() && !(a == b)) out.push_back("(a key this list does not name)");
  return out;
}

std::vector<std::string> ChangedPartitionFields(const PartitionConfig& a,
                                                const PartitionConfig& b) {
  std::vector<std::string> out;
  MUSTER_CHANGED(nodes);
  MUSTER_CHANGED(is_default);
  MUSTER_CHANGED(max_time_ms);
  MUSTER_CHANGED(default_time_ms);
  MUSTER_CHANGED(priority_tier);
  MUSTER_CHANGED(preempt_mode);
  MUSTER_CHANGED(grace_time_ms);
  MUSTER_CHANGED(allowed_uids);
  MUSTER_CHANGED(denied_uids);
  if (out.empty() && !(a == b)) out.push_back("(a key this list does not name)");
  return out;
}

#undef MUSTER_CHANGED

std::string Joined(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : ", ") + w;
  return s;
}

// "node n3 added", "node n4 removed", "node n5 changed: gpus, features" for records with a name,
// in the new file's order, then the removed ones in the old file's.
template <typename T, typename FieldsFn>
void DescribeNamed(const char* kind, const std::vector<T>& before, const std::vector<T>& after,
                   FieldsFn changed_fields, std::vector<std::string>& out) {
  std::map<std::string, const T*> old_by_name;
  for (const T& t : before) old_by_name[t.name] = &t;
  std::map<std::string, const T*> new_by_name;
  for (const T& t : after) new_by_name[t.name] = &t;
  for (const T& t : after) {
    auto it = old_by_name.find(t.name);
    if (it == old_by_name.end()) {
      out.push_back(std::string(kind) + " " + t.name + " added");
    } else if (!(*it->second == t)) {
      const std::vector<std::string> fields = changed_fields(*it->second, t);
      out.push_back(std::string(kind) + " " + t.name + " changed" +
                    (fields.empty() ? "" : ": " + Joined(fields)));
    }
  }
  for (const T& t : before) {
    if (!new_by_name.count(t.name)) out.push_back(std::string(kind) + " " + t.name + " removed");
  }
}

}  // namespace

ConfigReload MergeReloadedConfig(const Config& running, Config next) {
  ConfigReload r;
  // Set up once, at the start: the listeners, the store, the credentials, the election.
  for (const std::string& key : ChangedControllerKeys(running.controller, next.controller)) {
    if (key != "log_level") r.restart_only.push_back("controller." + key);
  }
  const std::string log_level = next.controller.log_level;
  next.controller = running.controller;
  next.controller.log_level = log_level;
  auto keep = [&](bool same, const char* key, auto& field, const auto& value) {
    if (same) return;
    r.restart_only.push_back(key);
    field = value;
  };
  keep(running.controllers == next.controllers, "controllers", next.controllers,
       running.controllers);
  keep(running.tls == next.tls, "tls", next.tls, running.tls);
  keep(running.node_auth == next.node_auth, "node_auth", next.node_auth, running.node_auth);
  keep(running.munge == next.munge, "munge", next.munge, running.munge);
  keep(running.cluster_name == next.cluster_name, "cluster_name", next.cluster_name,
       running.cluster_name);
  // The agents read their own copy; the controller keeps what it started with.
  next.agent = running.agent;

  std::vector<std::string>& c = r.changes;
  if (running.controller.log_level != next.controller.log_level) {
    c.push_back("controller.log_level");
  }
  if (running.admins != next.admins) c.push_back("admins");
  if (running.operators != next.operators) c.push_back("operators");
  if (!(running.private_data == next.private_data)) c.push_back("private_data");
  for (const std::string& key : ChangedSchedulingKeys(running.scheduling, next.scheduling)) {
    c.push_back("scheduling." + key);
  }
  if (!(running.billing == next.billing)) c.push_back("billing");
  if (running.licenses != next.licenses) c.push_back("licenses");
  DescribeNamed("node", running.nodes, next.nodes, ChangedNodeFields, c);
  std::vector<std::string> old_order, new_order;
  for (const NodeConfig& n : running.nodes) old_order.push_back(n.name);
  for (const NodeConfig& n : next.nodes) new_order.push_back(n.name);
  if (old_order.size() == new_order.size() && old_order != new_order) {
    c.push_back("nodes reordered");
  }
  DescribeNamed("partition", running.partitions, next.partitions, ChangedPartitionFields, c);
  DescribeNamed(
      "account", running.accounts, next.accounts,
      [](const AccountConfig&, const AccountConfig&) { return std::vector<std::string>{}; }, c);
  DescribeNamed(
      "qos", running.qos, next.qos,
      [](const QosConfig&, const QosConfig&) { return std::vector<std::string>{}; }, c);
  r.config = std::move(next);
  return r;
}

}  // namespace muster
