#include "metrics_text.h"

#include <map>
#include <utility>

#include "muster/metrics/prometheus_text.h"

namespace muster::rpc {
namespace {

using metrics::Label;

// A timing kind ("api/SUBMIT_JOB") as its metric family and label.
struct Family {
  std::string name;
  std::string labels;
  const char* help;
};
Family FamilyOf(const std::string& kind) {
  auto rest = [&](size_t n) { return kind.substr(n); };
  if (kind.rfind("api/", 0) == 0) {
    return {"muster_api_request_duration_seconds", Label("method", rest(4)),
            "Requests to the user API, from arrival to reply (waiting for the controller "
            "included), by method."};
  }
  if (kind.rfind("agent/", 0) == 0) {
    return {"muster_agent_message_duration_seconds", Label("message", rest(6)),
            "Messages from node agents, from arrival to handled, by kind."};
  }
  if (kind == "scheduler/pass") {
    return {"muster_scheduler_pass_duration_seconds", "",
            "Scheduling passes, whole (the part off the controller's event loop included)."};
  }
  if (kind == "scheduler/pass_on_strand") {
    return {"muster_scheduler_pass_blocking_seconds", "",
            "The part of each scheduling pass that held the controller's event loop."};
  }
  if (kind == "store/write") {
    return {"muster_store_commit_duration_seconds", "",
            "Commits to the state store (one write of a change's records), before their sync."};
  }
  if (kind == "store/sync") {
    return {"muster_store_sync_duration_seconds", "",
            "Synced writes of the state store (one covers every change made while the last ran)."};
  }
  return {"muster_work_duration_seconds", Label("kind", kind), "Other work of the controller."};
}

}  // namespace

std::string PrometheusText(const ControllerMetrics& m) {
  const controller::ClusterMetrics& c = m.cluster;
  metrics::PrometheusWriter w;
  w.Family("muster_jobs", "gauge",
           "Jobs in the controller's memory by state, partition and account (an array's waiting "
           "tasks one by one).");
  for (const auto& [key, n] : c.jobs) {
    const auto& [state, partition, account] = key;
    w.Sample("muster_jobs",
             Label("state", state) + "," + Label("partition", partition) + "," +
                 Label("account", account),
             static_cast<double>(n));
  }
  w.Family("muster_nodes", "gauge", "Configured nodes by state.");
  for (const auto& [state, n] : c.nodes) {
    w.Sample("muster_nodes", Label("state", state), static_cast<double>(n));
  }
  w.Family("muster_nodes_responding", "gauge", "Nodes whose agent holds a session now.");
  w.Sample("muster_nodes_responding", "", c.nodes_responding);
  w.Family("muster_gpus", "gauge",
           "GPUs by state (allocated, idle, drained, down), type and partition; a node in two "
           "partitions counts in both.");
  for (const auto& [key, n] : c.gpus) {
    const auto& [state, type, partition] = key;
    w.Sample(
        "muster_gpus",
        Label("state", state) + "," + Label("type", type) + "," + Label("partition", partition),
        static_cast<double>(n));
  }
  auto counter = [&](const char* name, const char* help, double v) { w.Counter(name, help, v); };
  auto gauge = [&](const char* name, const char* help, double v) { w.Gauge(name, help, v); };
  counter("muster_scheduler_passes_total", "Scheduling passes run.", static_cast<double>(c.passes));
  counter("muster_scheduler_jobs_started_total", "Jobs the scheduler started.",
          static_cast<double>(c.jobs_started));
  counter("muster_scheduler_jobs_backfilled_total",
          "Jobs started below a reservation of a job ahead of them (backfill).",
          static_cast<double>(c.jobs_backfilled));
  counter("muster_scheduler_forecasts_total",
          "Start-time searches (for reservations and estimates).",
          static_cast<double>(c.forecasts));
  gauge("muster_scheduler_last_pass_considered", "Pending jobs the last pass looked at.",
        c.last_pass_considered);
  gauge("muster_scheduler_backfill_depth",
        "Reservations the last pass made: how deep its backfill reached.",
        c.last_pass_reservations);
  counter("muster_preemptions_total", "Running jobs preempted (requeued, cancelled or suspended).",
          static_cast<double>(c.preemptions));
  w.Family("muster_queue_wait_seconds", "histogram",
           "Jobs the scheduler started: their time from submission (or --begin, when later) to "
           "the start.");
  w.Histogram("muster_queue_wait_seconds", "",
              {controller::kQueueWaitBoundsS.begin(), controller::kQueueWaitBoundsS.end()},
              {c.queue_waits.at_or_below.begin(), c.queue_waits.at_or_below.end()},
              c.queue_waits.count, c.queue_waits.sum_s);
  counter("muster_heartbeats_late_total",
          "Agent messages that came more than two heartbeat intervals after the one before "
          "(the node's link or agent is slow).",
          static_cast<double>(c.heartbeats_late));
  w.Family("muster_node_gpus", "gauge", "GPUs each node's agent reports.");
  for (const auto& [node, counts] : c.node_gpu_health) {
    w.Sample("muster_node_gpus", Label("node", node), counts.first);
  }
  w.Family("muster_node_gpus_unhealthy", "gauge",
           "GPUs each node's agent reports unhealthy (XID, ECC, fallen off the bus).");
  for (const auto& [node, counts] : c.node_gpu_health) {
    w.Sample("muster_node_gpus_unhealthy", Label("node", node), counts.second);
  }
  gauge("muster_controller_epoch", "This controller's epoch (one more at every start).",
        static_cast<double>(c.epoch));
  gauge("muster_controller_start_time_seconds", "When this controller started (Unix time).",
        static_cast<double>(c.start_time_ms) / 1000.0);
  gauge("muster_store_job_payload_bytes",
        "Bytes of jobs' scripts and environments in the state store.",
        static_cast<double>(c.store_bytes));
  if (m.replicating) {
    gauge("muster_standbys_in_sync", "Hot standbys in sync now (each change waits for them).",
          static_cast<double>(m.standbys_in_sync));
  }

  // Timings: one histogram family per kind of work (its kinds gathered: a family is written
  // once), its buckets in seconds.
  std::vector<double> bounds_s;
  for (double us : controller::ServiceStats::BoundsUs()) bounds_s.push_back(us / 1e6);
  std::map<std::string, std::vector<std::pair<Family, const controller::ServiceStats::Histogram*>>>
      families;
  for (const auto& h : m.timings) {
    Family f = FamilyOf(h.kind);
    families[f.name].emplace_back(std::move(f), &h);
  }
  for (const auto& [name, members] : families) {
    w.Family(name, "histogram", members.front().first.help);
    for (const auto& [f, h] : members) {
      w.Histogram(name, f.labels, bounds_s, h->at_or_below, h->count, h->sum_us / 1e6);
    }
  }
  w.Family("muster_api_requests_total", "counter",
           "Requests to the user API by method and result code.");
  for (const auto& [key, n] : m.results) {
    const auto& [kind, code] = key;
    const std::string method = kind.rfind("api/", 0) == 0 ? kind.substr(4) : kind;
    w.Sample("muster_api_requests_total", Label("method", method) + "," + Label("code", code),
             static_cast<double>(n));
  }
  return w.Take();
}

}  // namespace muster::rpc
