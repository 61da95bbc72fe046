#include "metrics_text.h"

#include <cstdio>
#include <map>
#include <utility>

namespace muster::rpc {
namespace {

// Label values escaped as the format wants: backslash, double quote, newline.
std::string Escaped(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

class Writer {
 public:
  void Family(const std::string& name, const char* type, const char* help) {
    out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  // labels: "" or `a="x",b="y"` (already escaped).
  void Sample(const std::string& name, const std::string& labels, double value) {
    out_ += name;
    if (!labels.empty()) out_ += "{" + labels + "}";
    out_ += " " + Number(value) + "\n";
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string Label(const char* name, const std::string& value) {
  return std::string(name) + "=\"" + Escaped(value) + "\"";
}

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
  Writer w;
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
  auto counter = [&](const char* name, const char* help, double v) {
    w.Family(name, "counter", help);
    w.Sample(name, "", v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    w.Family(name, "gauge", help);
    w.Sample(name, "", v);
  };
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
  const std::vector<double>& bounds = controller::ServiceStats::BoundsUs();
  std::map<std::string, std::vector<std::pair<Family, const controller::ServiceStats::Histogram*>>>
      families;
  for (const auto& h : m.timings) {
    Family f = FamilyOf(h.kind);
    families[f.name].emplace_back(std::move(f), &h);
  }
  for (const auto& [name, members] : families) {
    w.Family(name, "histogram", members.front().first.help);
    for (const auto& [f, h] : members) {
      const std::string sep = f.labels.empty() ? "" : ",";
      for (size_t i = 0; i < bounds.size(); ++i) {
        w.Sample(name + "_bucket", f.labels + sep + Label("le", Number(bounds[i] / 1e6)),
                 static_cast<double>(h->at_or_below[i]));
      }
      w.Sample(name + "_bucket", f.labels + sep + "le=\"+Inf\"", static_cast<double>(h->count));
      w.Sample(name + "_sum", f.labels, h->sum_us / 1e6);
      w.Sample(name + "_count", f.labels, static_cast<double>(h->count));
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
