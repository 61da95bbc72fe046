// muster job show ID [--json]: one job, everything the controller knows of it.
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "job_json.h"
#include "muster/common/clock.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "options.h"
#include "output.h"

namespace muster::cli {
namespace {

Result<std::vector<uint64_t>> ParseIds(const std::vector<std::string>& items) {
  std::vector<uint64_t> ids;
  for (const auto& it : items) {
    for (const auto& p : Split(it, ',', true)) {
      auto id = ParseUint(p);
      if (!id || *id == 0) return InvalidArgument("invalid job id '" + p + "'");
      ids.push_back(*id);
    }
  }
  return ids;
}

}  // namespace

int CmdJob(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "show") {
    return Usage("job", "expected 'muster job show ID [--json]'");
  }
  bool json = false;
  std::vector<std::string> ids;
  const struct option opts[] = {{"json", no_argument, nullptr, 'j'}, {nullptr, 0, nullptr, 0}};
  OptionReader in(argc - 1, argv + 1, "", opts);  // from "show" on
  // Ids come in order, so --json counts after them too.
  for (int c; (c = in.Next()) != -1;) {
    if (c == 'j') {
      json = true;
    } else if (c == OptionReader::kWord) {
      ids.push_back(in.Word());
    } else {
      return Usage("job", "unknown option '" + in.Word() + "'");
    }
  }
  auto parsed = ParseIds(ids);
  if (!parsed.ok() || parsed->size() != 1) return Usage("job", "expected exactly one job id");
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("job", controller.status());
  auto resp = controller->GetJob((*parsed)[0]);
  if (!resp.ok()) return Fail("job", resp.status());
  const v1::JobInfo& j = resp->job();
  if (json) {
    JsonWriter w;
    JobJson(w, j);
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  int64_t now = SystemClock::Get()->NowMs();
  std::printf("JobId=%llu JobName=%s\n", static_cast<unsigned long long>(j.id()),
              Printable(j.name()).c_str());
  std::printf("   UserId=%s(%u) Account=%s Priority=%lld\n", j.user().c_str(), j.uid(),
              j.account().empty() ? "(null)" : j.account().c_str(),
              static_cast<long long>(j.priority()));
  std::printf("   JobState=%s Reason=%s%s%s\n", JobStateName(j.state(), j.completing()).c_str(),
              j.reason().c_str(),
              j.reason_detail().empty() ? "" : " Detail=", Printable(j.reason_detail()).c_str());
  std::printf("   Requeue=%d Restarts=%u ExitCode=%d:%d\n", j.no_requeue() ? 0 : 1,
              j.requeue_count(), j.exit_code(), j.exit_signal());
  std::printf("   RunTime=%s TimeLimit=%s\n", FormatDuration(ElapsedMs(j, now)).c_str(),
              TimeLimitText(j.time_limit_ms()).c_str());
  // For a pending job StartTime is the expected start, as in scontrol.
  std::string start = FormatTimestamp(j.start_time_ms());
  if (j.state() == v1::PENDING) {
    start = j.expected_start_ms() > 0 ? FormatTimestamp(j.expected_start_ms()) : "Unknown";
  }
  std::printf("   SubmitTime=%s StartTime=%s EndTime=%s\n",
              FormatTimestamp(j.submit_time_ms()).c_str(), start.c_str(),
              FormatTimestamp(j.end_time_ms()).c_str());
  std::printf("   Partition=%s NodeList=%s\n", j.partition().c_str(),
              j.nodes().empty() ? "(null)" : NodeList(j).c_str());
  std::string num_nodes = std::to_string(j.num_nodes());
  if (j.min_nodes() > 0) num_nodes = std::to_string(j.min_nodes()) + "-" + num_nodes;
  std::printf("   NumNodes=%s NumTasks=%u CPUs/Task=%u Mem/Node=%lluM GPUs/Node=%u%s%s\n",
              num_nodes.c_str(), j.num_tasks(), j.cpus_per_task(),
              static_cast<unsigned long long>(j.mem_per_node_mb()), j.gpus_per_node(),
              j.gpu_type().empty() ? "" : " GpuType=", j.gpu_type().c_str());
  auto or_null = [](const std::string& v) { return v.empty() ? std::string("(null)") : v; };
  std::printf("   ReqNodeList=%s ExcNodeList=%s\n", or_null(j.required_nodes()).c_str(),
              or_null(j.excluded_nodes()).c_str());
  std::printf("   Features=%s Switches=%u%s Topology=%s\n", or_null(j.features()).c_str(),
              j.max_switches(),
              j.max_switches() && j.switches_wait_ms()
                  ? ("@" + FormatDuration(j.switches_wait_ms())).c_str()
                  : "",
              j.topology().empty() ? "any" : j.topology().c_str());
  if (!j.gres().empty()) std::printf("   TresPerNode=gres/%s\n", j.gres().c_str());
  for (const auto& na : j.allocation().nodes()) {
    std::vector<std::string> g;
    for (uint32_t i : na.gpu_indices()) g.push_back(std::to_string(i));
    for (const auto& gu : na.gres()) {
      std::vector<std::string> u;
      for (uint32_t i : gu.units()) u.push_back(std::to_string(i));
      g.push_back(gu.name() + (gu.type().empty() ? "" : ":" + gu.type()) + "(" + Join(u, ",") +
                  ")");
    }
    std::printf("     Node=%s Tasks=%u CPUs=%d Mem=%lluM GPUs=%s\n", na.node().c_str(), na.ntasks(),
                na.cpu_ids_size(), static_cast<unsigned long long>(na.mem_mb()),
                g.empty() ? "none" : Join(g, ",").c_str());
  }
  // Users' names and paths (any bytes) shown, never obeyed by the terminal.
  std::printf("   WorkDir=%s\n   StdOut=%s\n   StdErr=%s\n", Printable(j.work_dir()).c_str(),
              Printable(j.stdout_path()).c_str(), Printable(j.stderr_path()).c_str());
  return kExitOk;
}

}  // namespace muster::cli
