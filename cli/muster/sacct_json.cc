#include "sacct_json.h"

#include <cstdio>
#include <string>

#include "muster/common/hostlist.h"
#include "output.h"

namespace muster::cli {

void PrintSacctJson(const std::vector<v1::JobInfo>& jobs, int64_t now) {
  JsonWriter w;
  w.BeginObject().Key("jobs").BeginArray();
  auto exit = [&](int32_t code, int32_t sig) {
    w.Key("exit_code").BeginObject();
    w.Field("status", std::string(sig ? "SIGNALED" : code ? "FAILED" : "SUCCESS"));
    w.Field("return_code", static_cast<int64_t>(code));
    w.Field("signal", static_cast<int64_t>(sig));
    w.EndObject();
  };
  auto times = [&](int64_t submit, int64_t start, int64_t end, int64_t limit) {
    w.Key("time").BeginObject();
    if (submit >= 0) w.Field("submission", submit / 1000);
    w.Field("start", start / 1000);
    w.Field("end", end / 1000);
    w.Field("elapsed", start > 0 ? ((end > 0 ? end : now) - start) / 1000 : int64_t{0});
    if (limit >= 0) w.Field("limit", limit / 60'000);  // minutes, as Slurm
    w.EndObject();
  };
  for (const v1::JobInfo& j : jobs) {
    w.BeginObject();
    w.Field("job_id", static_cast<uint64_t>(j.id()));
    w.Field("name", j.name());
    w.Field("user", j.user());
    w.Field("uid", static_cast<uint64_t>(j.uid()));
    w.Field("partition", j.partition());
    w.Key("state").BeginObject();
    w.Field("current", JobStateName(j.state(), false));
    w.Field("reason", j.reason());
    w.EndObject();
    exit(j.exit_code(), j.exit_signal());
    times(j.submit_time_ms(), j.start_time_ms(), j.end_time_ms(), j.time_limit_ms());
    w.Field("nodes", CompressHostlist({j.nodes().begin(), j.nodes().end()}));
    w.Field("allocation_nodes", static_cast<uint64_t>(j.num_nodes()));
    w.Key("required").BeginObject();
    w.Field("CPUs", static_cast<uint64_t>(j.cpus_total()));
    w.Field("gpus", static_cast<uint64_t>(j.gpus_total()));
    w.Field("memory_mb", static_cast<uint64_t>(j.mem_total_mb()));
    w.EndObject();
    w.Field("restarts", static_cast<uint64_t>(j.requeue_count()));
    w.Field("working_directory", j.work_dir());
    w.Field("interactive", j.interactive());
    w.Key("steps").BeginArray();
    for (const v1::StepRecord& s : j.steps()) {
      w.BeginObject();
      w.Key("step").BeginObject();
      w.Field("id", std::to_string(j.id()) + "." + std::to_string(s.id()));
      w.Field("name", s.name());
      w.EndObject();
      w.Key("state").BeginObject().Field("current", JobStateName(s.state(), false)).EndObject();
      exit(s.exit_code(), s.exit_signal());
      times(-1, s.start_time_ms(), s.end_time_ms(), -1);
      std::vector<std::string> names;
      for (const auto& na : s.nodes()) names.push_back(na.node());
      w.Key("nodes").BeginObject();
      w.Field("count", static_cast<uint64_t>(names.size()));
      w.Field("range", CompressHostlist(names));
      w.EndObject();
      w.Key("tasks").BeginObject().Field("count", static_cast<uint64_t>(s.ntasks())).EndObject();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray().EndObject();
  std::printf("%s\n", w.str().c_str());
}

}  // namespace muster::cli
