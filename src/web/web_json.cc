#include "web_json.h"

#include "muster/common/json_writer.h"
#include "muster/common/strings.h"

namespace muster::web {
namespace {

void Job(JsonWriter& w, const v1::JobInfo& j) {
  w.BeginObject();
  // What users chose, made printable (and so valid UTF-8: a browser's JSON parser needs it).
  w.Field("id", j.id()).Field("name", Printable(j.name())).Field("user", Printable(j.user()));
  w.Field("account", Printable(j.account())).Field("partition", Printable(j.partition()));
  w.Field("state", v1::JobState_IsValid(j.state()) ? v1::JobState_Name(j.state()) : "UNKNOWN");
  w.Field("completing", j.completing());
  w.Field("reason", j.reason()).Field("reason_detail", Printable(j.reason_detail()));
  w.Key("nodes").BeginArray();
  for (const std::string& n : j.nodes()) w.String(n);
  w.EndArray();
  w.Field("num_nodes", j.num_nodes()).Field("gpus_per_node", j.gpus_per_node());
  w.Field("gpus_total", j.gpus_total());
  w.Field("submit_time", j.submit_time_ms() / 1000).Field("start_time", j.start_time_ms() / 1000);
  w.Field("end_time", j.end_time_ms() / 1000).Field("time_limit_s", j.time_limit_ms() / 1000);
  w.Field("expected_start_time", j.expected_start_ms() / 1000);
  w.EndObject();
}

}  // namespace

std::string NodeStateText(const v1::NodeInfo& n) {
  std::string s;
  switch (n.state()) {
    case v1::NODE_IDLE:
      s = "idle";
      break;
    case v1::NODE_MIXED:
      s = "mixed";
      break;
    case v1::NODE_ALLOCATED:
      s = "allocated";
      break;
    case v1::NODE_NOT_RESPONDING:
      s = "not_responding";
      break;
    case v1::NODE_DOWN:
      s = "down";
      break;
    default:
      s = "unknown";
  }
  if (n.drain()) s += n.job_ids_size() > 0 ? "+draining" : "+drained";
  return s;
}

std::string JobsJson(const v1::ListJobsResponse& jobs) {
  JsonWriter w;
  w.BeginObject().Key("jobs").BeginArray();
  for (const v1::JobInfo& j : jobs.jobs()) Job(w, j);
  w.EndArray().Field("complete", jobs.next_after_id() == 0).EndObject();
  return w.str();
}

std::string JobJson(const v1::JobInfo& job) {
  JsonWriter w;
  w.BeginObject().Key("job");
  Job(w, job);
  w.EndObject();
  return w.str();
}

std::string NodesJson(const v1::ListNodesResponse& nodes) {
  JsonWriter w;
  w.BeginObject().Key("nodes").BeginArray();
  for (const v1::NodeInfo& n : nodes.nodes()) {
    w.BeginObject().Field("name", n.name()).Field("state", NodeStateText(n));
    w.Field("drain", n.drain()).Field("reason", Printable(n.reason()));
    w.Field("gpus", n.gpus()).Field("gpus_allocated", n.gpus_allocated());
    w.Field("gpu_type", n.gpu_type()).Field("topology", n.topology());
    w.Key("job_ids").BeginArray();
    for (uint64_t id : n.job_ids()) w.Uint(id);
    w.EndArray().EndObject();
  }
  w.EndArray().EndObject();
  return w.str();
}

std::string SharesJson(const v1::ListSharesResponse& shares) {
  JsonWriter w;
  w.BeginObject().Key("shares").BeginArray();
  for (const v1::ShareRow& r : shares.rows()) {
    w.BeginObject().Field("account", Printable(r.account())).Field("user", Printable(r.user()));
    w.Field("raw_shares", r.raw_shares()).Field("norm_shares", r.norm_shares());
    w.Field("raw_usage", r.raw_usage()).Field("effective_usage", r.effective_usage());
    w.Field("fairshare", r.fairshare()).EndObject();
  }
  w.EndArray().EndObject();
  return w.str();
}

}  // namespace muster::web
