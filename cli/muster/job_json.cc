#include "job_json.h"

#include <algorithm>

namespace muster::cli {

void JobJson(JsonWriter& w, const v1::JobInfo& j) {
  w.BeginObject();
  w.Field("id", j.id()).Field("name", j.name()).Field("user", j.user()).Field("uid", j.uid());
  w.Field("state", JobStateName(j.state(), false)).Field("completing", j.completing());
  w.Field("reason", j.reason()).Field("reason_detail", j.reason_detail());
  w.Field("partition", j.partition());
  w.Key("nodes").BeginArray();
  for (const auto& n : j.nodes()) w.String(n);
  w.EndArray();
  w.Field("nodelist", NodeList(j));
  w.Field("num_nodes", j.num_nodes()).Field("min_nodes", j.min_nodes());
  w.Field("num_tasks", j.num_tasks());
  w.Field("cpus_per_task", j.cpus_per_task()).Field("gpus_per_node", j.gpus_per_node());
  w.Field("gpu_type", j.gpu_type()).Field("mem_per_node_mb", j.mem_per_node_mb());
  w.Field("submit_time", j.submit_time_ms() / 1000).Field("start_time", j.start_time_ms() / 1000);
  w.Field("end_time", j.end_time_ms() / 1000).Field("time_limit_s", j.time_limit_ms() / 1000);
  w.Field("exit_code", j.exit_code()).Field("exit_signal", j.exit_signal());
  w.Field("requeue_count", j.requeue_count()).Field("priority", j.priority());
  w.Field("hold", j.hold()).Field("no_requeue", j.no_requeue());
  w.Field("features", j.features()).Field("required_nodes", j.required_nodes());
  w.Field("excluded_nodes", j.excluded_nodes()).Field("max_switches", j.max_switches());
  w.Field("switches_wait_s", j.switches_wait_ms() / 1000).Field("topology", j.topology());
  w.Field("gres", j.gres()).Field("licenses", j.licenses());
  if (j.has_array()) {
    w.Field("array_job_id", j.array().array_job_id()).Field("array_task_id", j.array().task_id());
    w.Field("array", j.array().spec());
  }
  if (j.state() == v1::PENDING) {
    w.Field("expected_start_time", j.expected_start_ms() / 1000);
    const v1::PriorityFactors& f = j.priority_factors();
    w.Key("priority_factors").BeginObject();
    w.Field("age", f.age()).Field("size", f.size()).Field("partition", f.partition());
    w.Field("qos", f.qos()).Field("fairshare", f.fairshare()).Field("nice", f.nice());
    w.EndObject();
  }
  w.Field("work_dir", j.work_dir())
      .Field("stdout", j.stdout_path())
      .Field("stderr", j.stderr_path());
  w.Key("allocation").BeginArray();
  for (const auto& na : j.allocation().nodes()) {
    w.BeginObject()
        .Field("node", na.node())
        .Field("ntasks", na.ntasks())
        .Field("mem_mb", na.mem_mb());
    w.Key("cpus").BeginArray();
    for (uint32_t c : na.cpu_ids()) w.Uint(c);
    w.EndArray().Key("gpus").BeginArray();
    for (uint32_t g : na.gpu_indices()) w.Uint(g);
    w.EndArray().EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void SlurmJobJson(JsonWriter& w, const v1::JobInfo& j, const std::string& cluster) {
  const bool pending = j.state() == v1::PENDING;
  const std::string nodes = NodeList(j);
  w.BeginObject();
  w.Field("account", j.account())
      .Field("qos", j.qos())
      .Field("reservation", j.reservation())
      .Field("borrowed", j.borrowed())
      .Field("job_id", j.id())
      .Field("name", j.name());
  w.Field("user_name", j.user()).Field("user_id", j.uid());
  w.Field("job_state", JobStateName(j.state(), j.completing()));
  w.Field("state_reason", j.reason().empty() ? std::string("None") : j.reason());
  w.Field("state_description", j.reason_detail());
  w.Field("cluster", cluster).Field("partition", j.partition());
  w.Field("array_job_id", j.has_array() ? j.array().array_job_id() : 0);
  w.Key("array_task_id");
  if (j.has_array()) {
    w.Uint(j.array().task_id());
  } else {
    w.Null();
  }
  w.Field("array_max_tasks", j.has_array() ? j.array().max_running() : 0);
  w.Field("array_task_string", j.has_array() ? j.array().spec() : std::string());
  w.Field("batch_flag", !j.interactive());
  w.Field("batch_host", !pending && j.nodes_size() > 0 ? j.nodes(0) : std::string());
  w.Field("nodes", pending ? std::string() : nodes);
  w.Field("node_count", pending ? j.num_nodes() : static_cast<uint32_t>(j.nodes_size()));
  w.Field("cpus", j.cpus_total()).Field("tasks", j.num_tasks());
  w.Field("cpus_per_task", std::max<uint32_t>(1, j.cpus_per_task()));
  w.Field("priority", j.priority());
  w.Field("submit_time", j.submit_time_ms() / 1000)
      .Field("eligible_time", j.submit_time_ms() / 1000);
  const int64_t start = pending ? j.expected_start_ms() : j.start_time_ms();
  w.Field("start_time", start / 1000);
  int64_t end = j.end_time_ms();
  if (end <= 0 && start > 0 && j.time_limit_ms() > 0) end = start + j.time_limit_ms();
  w.Field("end_time", end / 1000);
  w.Key("time_limit");
  if (j.time_limit_ms() > 0) {
    w.Int((j.time_limit_ms() + 59'999) / 60'000);
  } else {
    w.Null();
  }
  w.Field("exit_code", j.exit_code());
  w.Field("restart_cnt", j.requeue_count()).Field("requeue", !j.no_requeue() && !j.interactive());
  w.Field("features", j.features()).Field("required_nodes", j.required_nodes());
  w.Field("excluded_nodes", j.excluded_nodes()).Field("licenses", j.licenses());
  std::string tres_node;
  if (!j.gres().empty()) {
    tres_node = "gres:" + j.gres();
  } else if (j.gpus_per_node() > 0) {
    tres_node = "gres:gpu:" + (j.gpu_type().empty() ? "" : j.gpu_type() + ":") +
                std::to_string(j.gpus_per_node());
  }
  w.Field("tres_per_node", tres_node);
  std::string tres = "cpu=" + std::to_string(j.cpus_total());
  if (j.mem_total_mb() > 0) tres += ",mem=" + std::to_string(j.mem_total_mb()) + "M";
  tres += ",node=" + std::to_string(pending ? j.num_nodes() : j.nodes_size());
  if (j.gpus_total() > 0) tres += ",gres/gpu=" + std::to_string(j.gpus_total());
  w.Field("tres_req_str", tres).Field("tres_alloc_str", pending ? std::string() : tres);
  w.Field("current_working_directory", j.work_dir()).Field("command", std::string());
  w.Field("standard_input", std::string("/dev/null"));
  w.Field("standard_output", j.stdout_path()).Field("standard_error", j.stderr_path());
  w.EndObject();
}

}  // namespace muster::cli
