#include "agent_metrics.h"

#include "muster/metrics/prometheus_text.h"

namespace muster::agent {

using metrics::Label;

std::string AgentMetricsText(const AgentMetrics& m) {
  metrics::PrometheusWriter w;
  w.Family("muster_agent_info", "gauge", "This agent: its node and version (always 1).");
  w.Sample("muster_agent_info", Label("node", m.node) + "," + Label("version", m.version), 1);
  w.Gauge("muster_agent_start_time_seconds", "When this agent started (Unix time).",
          static_cast<double>(m.start_time_ms) / 1000.0);
  w.Gauge("muster_agent_connected", "Whether the agent holds a session with a controller.",
          m.connected ? 1 : 0);
  w.Gauge("muster_agent_controller_epoch", "The newest controller epoch this node obeyed.",
          static_cast<double>(m.epoch));
  w.Counter("muster_agent_commands_refused_total",
            "Commands refused as coming from an older controller epoch (a stale controller "
            "fenced off).",
            static_cast<double>(m.commands_refused));
  w.Family("muster_agent_jobs", "gauge", "Jobs on this node by phase.");
  for (const auto& [phase, n] : m.jobs_by_phase) {
    w.Sample("muster_agent_jobs", Label("phase", phase), n);
  }
  w.Gauge("muster_agent_steps", "Job steps running here under their supervisors.", m.steps);
  w.Counter("muster_agent_launches_total", "Jobs started on this node.",
            static_cast<double>(m.counters.launches_started));
  w.Family("muster_agent_launch_failures_total", "counter",
           "Launches that failed, by whose fault (the node's drains it).");
  w.Sample("muster_agent_launch_failures_total", Label("fault", "node"),
           static_cast<double>(m.counters.launches_node_fault));
  w.Sample("muster_agent_launch_failures_total", Label("fault", "job"),
           static_cast<double>(m.counters.launches_failed - m.counters.launches_node_fault));
  w.Family("muster_agent_launch_duration_seconds", "histogram",
           "From a job's launch arriving to its start here (prolog, cgroup, the batch script's "
           "spawn).");
  w.Histogram("muster_agent_launch_duration_seconds", "",
              {kLaunchBoundsS.begin(), kLaunchBoundsS.end()},
              {m.counters.launch_at_or_below.begin(), m.counters.launch_at_or_below.end()},
              m.counters.launches_started, m.counters.launch_sum_s);
  w.Gauge("muster_agent_cgroups_enabled", "Whether jobs are contained by cgroup v2 here.",
          m.cgroups ? 1 : 0);
  w.Gauge("muster_agent_job_cgroups", "Jobs with a cgroup of their own now.", m.job_cgroups);
  if (m.health_check >= 0) {
    w.Gauge("muster_agent_health_check_ok", "Whether the admin's health check passed last.",
            m.health_check);
  }
  w.Counter("muster_agent_reboots_total", "Reboots the controller issued to this node.",
            static_cast<double>(m.counters.reboots_issued));
  w.Family("muster_agent_gpu_healthy", "gauge",
           "Each GPU: 1 healthy, 0 not (a critical XID, uncorrectable ECC, retired pages, fallen "
           "off the bus).");
  for (const v1::GpuDevice& g : m.gpus) {
    w.Sample("muster_agent_gpu_healthy",
             Label("gpu", std::to_string(g.index())) + "," + Label("uuid", g.uuid()) + "," +
                 Label("type", g.type()),
             g.health().empty() ? 1 : 0);
  }
  w.Family("muster_agent_gpu_fault", "gauge",
           "Why a GPU is unhealthy (XID number, ECC, ...), as the agent reports it (always 1).");
  for (const v1::GpuDevice& g : m.gpus) {
    if (g.health().empty()) continue;
    w.Sample("muster_agent_gpu_fault",
             Label("gpu", std::to_string(g.index())) + "," + Label("reason", g.health()), 1);
  }
  return w.Take();
}

}  // namespace muster::agent
