#include "squeue_format.h"

#include <algorithm>
#include <map>

#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {

Result<std::vector<FormatItem>> ParseSqueueFormat(const std::string& format) {
  return ParseFormatSpec(format, kSqueueLetters);
}

// squeue -O/--Format: "Name[:[.]width],..." (default width 20, left-justified; '.' right).
Result<std::vector<FormatItem>> ParseSqueueLongFormat(const std::string& fmt) {
  static const std::map<std::string, char> kNames = {
      {"jobid", 'i'},     {"jobarrayid", 'i'}, {"arrayjobid", 'F'},   {"arraytaskid", 'K'},
      {"name", 'j'},      {"username", 'u'},   {"statecompact", 't'}, {"state", 'T'},
      {"numnodes", 'D'},  {"numcpus", 'C'},    {"timeused", 'M'},     {"timelimit", 'l'},
      {"partition", 'P'}, {"reasonlist", 'R'}, {"reason", 'r'},       {"nodelist", 'N'},
      {"priority", 'Q'},  {"submittime", 'V'}, {"starttime", 'S'},    {"tres-per-node", 'b'},
      {"account", 'a'},   {"qos", 'q'},        {"reservation", 'v'}};
  std::vector<FormatItem> items;
  for (const std::string& part : Split(fmt, ',', true)) {
    FormatItem f;
    f.width = 20;
    std::string name = part;
    size_t colon = part.find(':');
    if (colon != std::string::npos) {
      name = part.substr(0, colon);
      std::string w = part.substr(colon + 1);
      if (!w.empty() && w[0] == '.') {
        f.right = true;
        w = w.substr(1);
      }
      auto n = ParseUint(w);
      if (!w.empty() && (!n || *n == 0 || *n > 1000)) {
        return InvalidArgument("bad width in --Format item '" + part + "'");
      }
      if (n) f.width = static_cast<size_t>(*n);
    }
    auto it = kNames.find(ToLower(name));
    if (it == kNames.end()) {
      std::string known;
      for (const auto& [k, v] : kNames) known += (known.empty() ? "" : " ") + k;
      return InvalidArgument("--Format field '" + name + "' is not supported (supported: " + known +
                             ")");
    }
    f.letter = it->second;
    items.push_back(f);
  }
  if (items.empty()) return InvalidArgument("--Format lists no fields");
  return items;
}

std::string SqueueHeader(char letter) {
  switch (letter) {
    case 'i':
    case 'A':
      return "JOBID";
    case 'j':
      return "NAME";
    case 'u':
      return "USER";
    case 't':
      return "ST";
    case 'T':
      return "STATE";
    case 'D':
      return "NODES";
    case 'C':
      return "CPUS";
    case 'M':
      return "TIME";
    case 'l':
      return "TIME_LIMIT";
    case 'P':
      return "PARTITION";
    case 'R':
      return "NODELIST(REASON)";
    case 'r':
      return "REASON";
    case 'N':
      return "NODELIST";
    case 'Q':
      return "PRIORITY";
    case 'V':
      return "SUBMIT_TIME";
    case 'S':
      return "START_TIME";
    case 'b':
      return "TRES_PER_NODE";
    case 'a':
      return "ACCOUNT";
    case 'q':
      return "QOS";
    case 'v':
      return "RESERVATION";
    case 'F':
      return "ARRAY_JOB_ID";
    case 'K':
      return "ARRAY_TASK_ID";
    default:
      return "";
  }
}

RowId RowIdOf(const v1::JobInfo& j) {
  if (!j.has_array()) return {std::to_string(j.id()), "N/A"};
  return {JobIdText(j), std::to_string(j.array().task_id())};
}

RowId CollapsedRowId(const v1::JobInfo& first, std::vector<uint32_t> tasks) {
  RowId row = RowIdOf(first);
  if (tasks.size() <= 1 && first.array().max_running() == 0) return row;
  // A task split off its carrier (held or updated alone) comes after the carrier's runs.
  std::sort(tasks.begin(), tasks.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < tasks.size();) {
    size_t k = i;
    while (k + 1 < tasks.size() && tasks[k + 1] == tasks[k] + 1) ++k;
    parts.push_back(std::to_string(tasks[i]) + (k > i ? "-" + std::to_string(tasks[k]) : ""));
    i = k + 1;
  }
  row.tasks = Join(parts, ",");
  if (first.array().max_running() > 0) {
    row.tasks += "%" + std::to_string(first.array().max_running());
  }
  row.id = std::to_string(first.array().array_job_id()) + "_[" + row.tasks + "]";
  return row;
}

std::string SqueueField(char letter, const v1::JobInfo& j, const RowId& row, int64_t now) {
  const bool pending = j.state() == v1::PENDING;
  switch (letter) {
    case 'i':
      return row.id;
    case 'F':
      return std::to_string(j.has_array() ? j.array().array_job_id() : j.id());
    case 'A':
      return std::to_string(j.id());
    case 'j':
      return j.name();
    case 'u':
      return j.user();
    case 't':
      return JobStateCode(j.state(), j.completing());
    case 'T':
      return JobStateName(j.state(), j.completing());
    case 'D':
      return std::to_string(pending ? j.num_nodes() : static_cast<uint32_t>(j.nodes_size()));
    case 'C': {
      uint32_t cpus = j.cpus_total();
      if (cpus == 0) {
        for (const auto& na : j.allocation().nodes())
          cpus += static_cast<uint32_t>(na.cpu_ids_size());
      }
      if (cpus == 0)
        cpus = std::max<uint32_t>(1, j.num_tasks()) * std::max<uint32_t>(1, j.cpus_per_task());
      return std::to_string(cpus);
    }
    case 'M':
      return FormatDuration(ElapsedMs(j, now));
    case 'l':
      return TimeLimitText(j.time_limit_ms());
    case 'P':
      return j.partition();
    case 'R':
      return pending ? "(" + j.reason() + ")" : NodeList(j);
    case 'r':
      return j.reason().empty() ? "None" : j.reason();
    case 'N':
      return pending ? "" : NodeList(j);
    case 'Q':
      return std::to_string(j.priority());
    case 'V':
      return FormatTimestamp(j.submit_time_ms());
    case 'S': {
      int64_t t = pending ? j.expected_start_ms() : j.start_time_ms();
      return t > 0 ? FormatTimestamp(t) : "N/A";
    }
    case 'b':
      if (!j.gres().empty()) return "gres:" + j.gres();
      if (j.gpus_per_node() == 0) return "N/A";
      return "gres:gpu:" + (j.gpu_type().empty() ? "" : j.gpu_type() + ":") +
             std::to_string(j.gpus_per_node());
    case 'a':
      return j.account().empty() ? "(null)" : j.account();
    case 'q':
      return j.qos().empty() ? "normal" : j.qos();
    case 'v':
      return j.reservation().empty() ? "(null)" : j.reservation();
    case 'K':
      return row.tasks;
    default:
      return "";
  }
}

void RenderSqueue(const std::vector<FormatItem>& items, const v1::JobInfo* j, const RowId& row,
                  int64_t now, std::string& out) {
  RenderLine(
      items,
      [&](char letter) { return j ? SqueueField(letter, *j, row, now) : SqueueHeader(letter); },
      /*trim=*/false, out);
}

}  // namespace muster::cli
