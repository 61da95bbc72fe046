#include "squeue_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// Fields whose data only the controller's full listing carries.
constexpr std::string_view kFullListingFields = "BEfmnxUyZ234567";

// -O names, lower case: the letter each prints.
const std::map<std::string, char>& LongNames() {
  static const std::map<std::string, char> names = {{"account", 'a'},
                                                    {"jobid", 'A'},
                                                    {"jobarrayid", 'i'},
                                                    {"arrayjobid", 'F'},
                                                    {"arraytaskid", 'K'},
                                                    {"name", 'j'},
                                                    {"username", 'u'},
                                                    {"userid", 'U'},
                                                    {"statecompact", 't'},
                                                    {"state", 'T'},
                                                    {"numnodes", 'D'},
                                                    {"numcpus", 'C'},
                                                    {"numtasks", kFieldNumTasks},
                                                    {"numtask", kFieldNumTasks},
                                                    {"cpus-per-task", kFieldCpusPerTask},
                                                    {"cpuspertask", kFieldCpusPerTask},
                                                    {"timeused", 'M'},
                                                    {"timelimit", 'l'},
                                                    {"timeleft", 'L'},
                                                    {"partition", 'P'},
                                                    {"reasonlist", 'R'},
                                                    {"reason", 'r'},
                                                    {"nodelist", 'N'},
                                                    {"priority", 'p'},
                                                    {"prioritylong", 'Q'},
                                                    {"submittime", 'V'},
                                                    {"starttime", 'S'},
                                                    {"endtime", 'e'},
                                                    {"tres-per-node", 'b'},
                                                    {"gres", 'b'},
                                                    {"qos", 'q'},
                                                    {"reservation", 'v'},
                                                    {"licenses", 'W'},
                                                    {"batchhost", 'B'},
                                                    {"mincpus", 'c'},
                                                    {"dependency", 'E'},
                                                    {"feature", 'f'},
                                                    {"minmemory", 'm'},
                                                    {"reqnodes", 'n'},
                                                    {"nice", 'y'},
                                                    {"schednodes", 'Y'},
                                                    {"workdir", 'Z'},
                                                    {"stdout", kFieldStdout},
                                                    {"stderr", kFieldStderr},
                                                    {"batchflag", kFieldBatchFlag},
                                                    {"requeue", kFieldRequeue},
                                                    {"restartcnt", kFieldRestartCnt},
                                                    {"exit_code", kFieldExitCode},
                                                    {"pendingtime", kFieldPendingTime},
                                                    {"cluster", kFieldCluster}};
  return names;
}

// ...and those of a step's row.
const std::map<std::string, char>& StepLongNames() {
  static const std::map<std::string, char> names = {
      {"stepid", 'i'},    {"stepname", 'j'}, {"name", 'j'},     {"partition", 'P'},
      {"username", 'u'},  {"userid", 'U'},   {"timeused", 'M'}, {"timelimit", 'l'},
      {"starttime", 'S'}, {"nodes", 'N'},    {"nodelist", 'N'}, {"numtasks", 'A'}};
  return names;
}

uint32_t CpusOf(const v1::JobInfo& j) {
  uint32_t cpus = j.cpus_total();
  if (cpus == 0) {
    for (const auto& na : j.allocation().nodes()) cpus += static_cast<uint32_t>(na.cpu_ids_size());
  }
  if (cpus == 0)
    cpus = std::max<uint32_t>(1, j.num_tasks()) * std::max<uint32_t>(1, j.cpus_per_task());
  return cpus;
}

uint32_t NodesOf(const v1::JobInfo& j) {
  return j.state() == v1::PENDING ? j.num_nodes() : static_cast<uint32_t>(j.nodes_size());
}

// When the job ended, or is to end by its time limit; 0: not known; -1: never (no limit).
int64_t EndMs(const v1::JobInfo& j) {
  const bool active =
      j.state() == v1::PENDING || j.state() == v1::RUNNING || j.state() == v1::SUSPENDED;
  if (!active) return j.end_time_ms();
  const int64_t start = j.state() == v1::PENDING ? j.expected_start_ms() : j.start_time_ms();
  if (j.time_limit_ms() <= 0) return start > 0 ? -1 : 0;
  return start > 0 ? start + j.time_limit_ms() : 0;
}

std::string Or(const std::string& v, const char* none) { return v.empty() ? none : v; }

}  // namespace

Result<std::vector<FormatItem>> ParseSqueueFormat(const std::string& format, bool steps) {
  const std::string_view letters = steps ? kSqueueStepLetters : kSqueueLetters;
  if (EqualsIgnoreCase(format, "%all")) {
    std::string all;
    for (char c : letters) all += std::string(all.empty() ? "%" : "|%") + c;
    return ParseFormatSpec(all, letters);
  }
  return ParseFormatSpec(format, letters);
}

Result<std::vector<FormatItem>> ParseSqueueLongFormat(const std::string& fmt, bool steps) {
  const auto& names = steps ? StepLongNames() : LongNames();
  std::vector<FormatItem> items;
  for (const std::string& part : Split(fmt, ',', true)) {
    FormatItem f;
    f.width = 20;
    std::string name = part, suffix;
    size_t colon = part.find(':');
    if (colon != std::string::npos) {
      name = part.substr(0, colon);
      std::string w = part.substr(colon + 1);
      if (!w.empty() && w[0] == '.') {
        f.right = true;
        w = w.substr(1);
      }
      // The width's digits, then any text to print after the field.
      size_t digits = 0;
      while (digits < w.size() && w[digits] >= '0' && w[digits] <= '9') ++digits;
      suffix = w.substr(digits);
      w.resize(digits);
      auto n = ParseUint(w);
      if (!w.empty() && (!n || *n == 0 || *n > 1000)) {
        return InvalidArgument("bad width in --Format item '" + part + "'");
      }
      if (n) f.width = static_cast<size_t>(*n);
    }
    auto it = names.find(ToLower(name));
    if (it == names.end()) {
      std::string known;
      for (const auto& [k, v] : names) known += (known.empty() ? "" : " ") + k;
      return InvalidArgument("--Format field '" + name + "' is not supported (supported: " + known +
                             ")");
    }
    f.letter = it->second;
    items.push_back(f);
    if (!suffix.empty()) items.push_back(FormatItem{suffix});
  }
  if (items.empty()) return InvalidArgument("--Format lists no fields");
  return items;
}

bool NeedsFullListing(const std::vector<FormatItem>& items) {
  return std::any_of(items.begin(), items.end(), [](const FormatItem& f) {
    return f.letter && kFullListingFields.find(f.letter) != std::string_view::npos;
  });
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
    case 'U':
      return "UID";
    case 't':
      return "ST";
    case 'T':
      return "STATE";
    case 'D':
      return "NODES";
    case 'C':
      return "CPUS";
    case 'c':
      return "MIN_CPUS";
    case 'M':
      return "TIME";
    case 'l':
      return "TIME_LIMIT";
    case 'L':
      return "TIME_LEFT";
    case 'P':
      return "PARTITION";
    case 'R':
      return "NODELIST(REASON)";
    case 'r':
      return "REASON";
    case 'N':
      return "NODELIST";
    case 'n':
      return "REQ_NODES";
    case 'x':
      return "EXC_NODES";
    case 'p':
    case 'Q':
      return "PRIORITY";
    case 'V':
      return "SUBMIT_TIME";
    case 'S':
      return "START_TIME";
    case 'e':
      return "END_TIME";
    case 'b':
      return "TRES_PER_NODE";
    case 'B':
      return "EXEC_HOST";
    case 'a':
      return "ACCOUNT";
    case 'q':
      return "QOS";
    case 'v':
      return "RESERVATION";
    case 'W':
      return "LICENSES";
    case 'E':
      return "DEPENDENCY";
    case 'f':
      return "FEATURES";
    case 'm':
      return "MIN_MEMORY";
    case 'y':
      return "NICE";
    case 'Y':
      return "SCHEDNODES";
    case 'Z':
      return "WORK_DIR";
    case 'F':
      return "ARRAY_JOB_ID";
    case 'K':
      return "ARRAY_TASK_ID";
    case kFieldNumTasks:
      return "TASKS";
    case kFieldCpusPerTask:
      return "CPUS_PER_TASK";
    case kFieldStdout:
      return "STDOUT";
    case kFieldStderr:
      return "STDERR";
    case kFieldBatchFlag:
      return "BATCH_FLAG";
    case kFieldRequeue:
      return "REQUEUE";
    case kFieldRestartCnt:
      return "RESTART_COUNT";
    case kFieldExitCode:
      return "EXIT_CODE";
    case kFieldPendingTime:
      return "PENDING_TIME";
    case kFieldCluster:
      return "CLUSTER";
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

std::string MemoryText(uint64_t mb, bool noconvert) {
  if (mb == 0) return "0";
  // As Slurm's exact conversion: a larger unit while no precision is lost (halves are kept).
  double v = static_cast<double>(mb);
  const char* units = "MGTP";
  int unit = 0;
  while (!noconvert && unit < 3 && v >= 1024 && std::fmod(v, 512) == 0) {
    v /= 1024;
    ++unit;
  }
  char buf[48];
  if (v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f%c", v, units[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f%c", v, units[unit]);
  }
  return buf;
}

std::string SqueueField(char letter, const v1::JobInfo& j, const RowId& row,
                        const SqueueContext& ctx) {
  const bool pending = j.state() == v1::PENDING;
  const int64_t now = ctx.now_ms;
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
    case 'U':
      return std::to_string(j.uid());
    case 't':
      return JobStateCode(j.state(), j.completing());
    case 'T':
      return JobStateName(j.state(), j.completing());
    case 'D':
      return std::to_string(NodesOf(j));
    case 'C':
      return std::to_string(CpusOf(j));
    case 'c':
      return std::to_string(std::max<uint32_t>(1, j.cpus_per_task()));
    case 'M':
      return FormatDuration(ElapsedMs(j, now));
    case 'l':
      return TimeLimitText(j.time_limit_ms());
    case 'L':
      if (j.time_limit_ms() <= 0) return "UNLIMITED";
      return FormatDuration(j.time_limit_ms() - ElapsedMs(j, now));
    case 'P':
      return j.partition();
    case 'R':
      return pending ? "(" + j.reason() + ")" : NodeList(j);
    case 'r':
      return j.reason().empty() ? "None" : j.reason();
    case 'N':
      return pending ? "" : NodeList(j);
    case 'n':
      return j.required_nodes();
    case 'x':
      return j.excluded_nodes();
    case 'p': {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%16.14f", static_cast<double>(j.priority()) / 4294967295.0);
      return buf;
    }
    case 'Q':
      return std::to_string(j.priority());
    case 'V':
      return FormatTimestamp(j.submit_time_ms());
    case 'S': {
      int64_t t = pending ? j.expected_start_ms() : j.start_time_ms();
      return t > 0 ? FormatTimestamp(t) : "N/A";
    }
    case 'e': {
      const int64_t end = EndMs(j);
      return end < 0 ? "NONE" : end > 0 ? FormatTimestamp(end) : "N/A";
    }
    case 'b':
      if (!j.gres().empty()) return "gres:" + j.gres();
      if (j.gpus_per_node() == 0) return "N/A";
      return "gres:gpu:" + (j.gpu_type().empty() ? "" : j.gpu_type() + ":") +
             std::to_string(j.gpus_per_node());
    case 'B':
      return !j.interactive() && !pending && j.nodes_size() > 0 ? j.nodes(0) : "n/a";
    case 'a':
      return Or(j.account(), "(null)");
    case 'q':
      return Or(j.qos(), "normal");
    case 'v':
      return Or(j.reservation(), "(null)");
    case 'W':
      return Or(j.licenses(), "(null)");
    case 'E':
      return j.dependency();
    case 'f':
      return Or(j.features(), "(null)");
    case 'm':
      return MemoryText(j.mem_per_node_mb(), ctx.noconvert);
    case 'y':
      return std::to_string(j.nice());
    case 'Y':
      return "(null)";  // the nodes a pending job is planned on are not published
    case 'Z':
      return j.work_dir();
    case 'K':
      return row.tasks;
    case kFieldNumTasks:
      return std::to_string(std::max<uint32_t>(1, j.num_tasks()));
    case kFieldCpusPerTask:
      return std::to_string(std::max<uint32_t>(1, j.cpus_per_task()));
    case kFieldStdout:
      return j.interactive() ? "N/A" : j.stdout_path();
    case kFieldStderr:
      return j.interactive() ? "N/A" : Or(j.stderr_path(), j.stdout_path().c_str());
    case kFieldBatchFlag:
      return j.interactive() ? "0" : "1";
    case kFieldRequeue:
      return j.no_requeue() ? "0" : "1";
    case kFieldRestartCnt:
      return std::to_string(j.requeue_count());
    case kFieldExitCode:
      // A wait status, as Slurm keeps it: the code in the high byte, a signal in the low.
      return std::to_string((j.exit_code() << 8) | (j.exit_signal() & 0x7f));
    case kFieldPendingTime: {
      const int64_t until = pending || j.start_time_ms() <= 0 ? now : j.start_time_ms();
      return std::to_string(std::max<int64_t>(0, until - j.submit_time_ms()) / 1000);
    }
    case kFieldCluster:
      return ctx.cluster;
    default:
      return "";
  }
}

void RenderSqueue(const std::vector<FormatItem>& items, const v1::JobInfo* j, const RowId& row,
                  const SqueueContext& ctx, std::string& out) {
  RenderLine(
      items,
      [&](char letter) { return j ? SqueueField(letter, *j, row, ctx) : SqueueHeader(letter); },
      /*trim=*/false, out);
}

Result<std::vector<SortKey>> ParseSortKeys(const std::string& spec, std::string_view letters,
                                           std::string_view inert) {
  std::vector<SortKey> keys;
  bool descending = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    const char c = spec[i];
    if (c == ',' || c == '+' || c == '-') {
      descending = c == '-';
      continue;
    }
    if (EqualsIgnoreCase(std::string_view(spec).substr(i, 7), "cluster")) {
      i += 6;  // one cluster: nothing to order
    } else if (letters.find(c) == std::string_view::npos) {
      return InvalidArgument(std::string("-S/--sort: invalid sort key '") + c + "' (keys: " +
                             std::string(letters) + ", each after + or - for the order)");
    } else if (inert.find(c) == std::string_view::npos) {
      keys.push_back({c, descending});
    }
    descending = false;
  }
  return keys;
}

SortValue SqueueSortValue(char letter, const v1::JobInfo& j, int64_t now) {
  SortValue v;
  switch (letter) {
    case 'B':
      v.text = j.state() != v1::PENDING && j.nodes_size() > 0 ? j.nodes(0) : "";
      break;
    case 'C':
      v.number = CpusOf(j);
      break;
    case 'D':
      v.number = NodesOf(j);
      break;
    case 'e': {
      const int64_t end = EndMs(j);
      v.number = end < 0 ? kNever : static_cast<double>(end);
      break;
    }
    case 'i':
      v.number = static_cast<double>(j.has_array() ? j.array().array_job_id() : j.id());
      v.number2 = j.has_array() ? j.array().task_id() : -1;
      break;
    case 'j':
      v.text = j.name();
      break;
    case 'l':
      v.number = j.time_limit_ms() <= 0 ? kNever : static_cast<double>(j.time_limit_ms());
      break;
    case 'L':
      v.number = j.time_limit_ms() <= 0
                     ? kNever
                     : static_cast<double>(j.time_limit_ms() - ElapsedMs(j, now));
      break;
    case 'm':
      v.number = static_cast<double>(j.mem_per_node_mb());
      break;
    case 'M':
      v.number = static_cast<double>(ElapsedMs(j, now));
      break;
    case 'N':
      v.text = j.nodes_size() > 0 ? j.nodes(0) : "";
      break;
    case 'p':
    case 'Q':
      v.number = static_cast<double>(j.priority());
      break;
    case 'P':
      v.text = j.partition();
      break;
    case 'S': {
      // As squeue: an unknown start sorts a little after now, a late pending one at now.
      int64_t t = j.state() == v1::PENDING ? j.expected_start_ms() : j.start_time_ms();
      if (t <= 0) {
        t = now + 100'000;
      } else if (j.state() == v1::PENDING && t < now) {
        t = now;
      }
      v.number = static_cast<double>(t);
      break;
    }
    case 't':
      v.text = JobStateCode(j.state(), j.completing());
      break;
    case 'T':
      v.text = JobStateName(j.state(), j.completing());
      break;
    case 'u':
      v.text = j.user();
      break;
    case 'U':
      v.number = j.uid();
      break;
    case 'v':
      v.text = j.reservation();
      break;
    case 'W':
      v.text = j.licenses();
      break;
    case 'V':
      v.number = static_cast<double>(j.submit_time_ms());
      break;
    default:
      break;
  }
  return v;
}

namespace {

std::string StepNodes(const StepRow& s) {
  if (!s.step) return s.job->nodes_size() > 0 ? s.job->nodes(0) : "";
  std::vector<std::string> nodes;
  for (const auto& na : s.step->nodes()) nodes.push_back(na.node());
  return CompressHostlist(nodes);
}

int64_t StepStartMs(const StepRow& s) {
  return s.step ? s.step->start_time_ms() : s.job->start_time_ms();
}

}  // namespace

std::string SqueueStepHeader(char letter) {
  switch (letter) {
    case 'i':
      return "STEPID";
    case 'A':
      return "TASKS";
    default:
      return SqueueHeader(letter);
  }
}

std::string SqueueStepField(char letter, const StepRow& s, int64_t now) {
  switch (letter) {
    case 'i':
      return JobIdText(*s.job) + "." + (s.step ? std::to_string(s.step->id()) : "batch");
    case 'j':
      return s.step ? s.step->name() : "batch";
    case 'P':
      return s.job->partition();
    case 'u':
      return s.job->user();
    case 'U':
      return std::to_string(s.job->uid());
    case 'M':
      return FormatDuration(StepStartMs(s) > 0 ? now - StepStartMs(s) : 0);
    case 'l':
      return TimeLimitText(s.job->time_limit_ms());
    case 'S':
      return StepStartMs(s) > 0 ? FormatTimestamp(StepStartMs(s)) : "N/A";
    case 'N':
      return StepNodes(s);
    case 'A':
      return std::to_string(s.step ? std::max<uint32_t>(1, s.step->ntasks()) : 1);
    default:
      return "";
  }
}

SortValue SqueueStepSortValue(char letter, const StepRow& s, int64_t now) {
  SortValue v;
  switch (letter) {
    case 'i':
      v.number = static_cast<double>(s.job->id());
      // The batch step after the numbered ones, as Slurm's large id for it sorts.
      v.number2 = s.step ? s.step->id() : kNever;
      break;
    case 'l':
      v.number = s.job->time_limit_ms() <= 0 ? kNever : static_cast<double>(s.job->time_limit_ms());
      break;
    case 'M':
      v.number = static_cast<double>(now - StepStartMs(s));
      break;
    case 'S':
      v.number = static_cast<double>(StepStartMs(s));
      break;
    case 'U':
      v.number = s.job->uid();
      break;
    default:
      v.text = SqueueStepField(letter, s, now);
      break;
  }
  return v;
}

Result<std::vector<StepRef>> ParseStepRefs(const std::string& list) {
  std::vector<StepRef> refs;
  for (const std::string& item : Split(list, ',', true)) {
    StepRef r;
    std::string job = item, step;
    if (const size_t dot = item.find('.'); dot != std::string::npos) {
      job = item.substr(0, dot);
      step = item.substr(dot + 1);
    }
    std::string task;
    if (const size_t us = job.find('_'); us != std::string::npos) {
      task = job.substr(us + 1);
      job.resize(us);
    }
    auto id = ParseUint(job);
    auto t = ParseUint(task);
    auto s = ParseUint(step);
    const bool batch = step == "batch";
    if (!id || (!task.empty() && !t) || (!step.empty() && !s && !batch)) {
      return InvalidArgument("-s/--steps: bad job step '" + item +
                             "' (JOBID[_TASK][.STEPID], STEPID a number or batch)");
    }
    r.job = *id;
    if (t) r.task = static_cast<int64_t>(*t);
    if (s) r.step = static_cast<int64_t>(*s);
    if (batch) r.step = kBatchStep;
    refs.push_back(r);
  }
  return refs;
}

bool StepRefsMatch(const std::vector<StepRef>& refs, const StepRow& s) {
  if (refs.empty()) return true;
  const v1::JobInfo& j = *s.job;
  const int64_t step = s.step ? static_cast<int64_t>(s.step->id()) : kBatchStep;
  for (const StepRef& r : refs) {
    const bool job = r.task < 0
                         ? (r.job == j.id() || (j.has_array() && r.job == j.array().array_job_id()))
                         : j.has_array() && r.job == j.array().array_job_id() &&
                               r.task == static_cast<int64_t>(j.array().task_id());
    if (job && (r.step == -1 || r.step == step)) return true;
  }
  return false;
}

}  // namespace muster::cli
