// muster queue, muster job show, muster cancel.
#include <getopt.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include "cli.h"
#include "muster/common/clock.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "output.h"

namespace muster::cli {
namespace {

std::string NodeList(const v1::JobInfo& j) {
  return CompressHostlist({j.nodes().begin(), j.nodes().end()});
}

int64_t ElapsedMs(const v1::JobInfo& j, int64_t now) {
  if (j.start_time_ms() <= 0 || j.state() == v1::PENDING) return 0;
  int64_t end = j.end_time_ms() > 0 && j.state() != v1::RUNNING ? j.end_time_ms() : now;
  return end - j.start_time_ms();
}

std::string TimeLimit(int64_t ms) { return ms <= 0 ? "UNLIMITED" : FormatDuration(ms); }

// squeue's -o/--format: "%[.][WIDTH]LETTER" fields (a '.' right-justifies; values longer than
// WIDTH are cut, as squeue does) between literal text.
// squeue's own default.
constexpr char kSqueueDefaultFormat[] = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";

struct FormatItem {
  std::string literal;  // when letter == 0
  char letter = 0;
  bool right = false;
  size_t width = 0;
};

Result<std::vector<FormatItem>> ParseSqueueFormat(const std::string& fmt) {
  static const std::string kLetters = "iAjutTDCMlPRrNQVSbaFK";
  std::vector<FormatItem> items;
  for (size_t i = 0; i < fmt.size();) {
    if (fmt[i] != '%') {
      if (items.empty() || items.back().letter) items.emplace_back();
      items.back().literal += fmt[i++];
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '%') {
      if (items.empty() || items.back().letter) items.emplace_back();
      items.back().literal += '%';
      i += 2;
      continue;
    }
    FormatItem f;
    ++i;
    if (i < fmt.size() && fmt[i] == '.') {
      f.right = true;
      ++i;
    }
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
      f.width = f.width * 10 + (fmt[i++] - '0');
    if (i >= fmt.size()) return InvalidArgument("format '" + fmt + "' ends inside a field");
    f.letter = fmt[i++];
    if (kLetters.find(f.letter) == std::string::npos) {
      return InvalidArgument(std::string("format field %") + f.letter +
                             " is not supported (supported: %i %A %j %u %t %T %D %C %M %l %P %R "
                             "%r %N %Q %V %S %b %a %F %K)");
    }
    items.push_back(f);
  }
  return items;
}

// squeue -O/--Format: "Name[:[.]width],..." (default width 20, left-justified; '.' right).
Result<std::vector<FormatItem>> ParseSqueueLongFormat(const std::string& fmt) {
  static const std::map<std::string, char> kNames = {
      {"jobid", 'i'},     {"jobarrayid", 'i'}, {"arrayjobid", 'F'},   {"arraytaskid", 'K'},
      {"name", 'j'},      {"username", 'u'},   {"statecompact", 't'}, {"state", 'T'},
      {"numnodes", 'D'},  {"numcpus", 'C'},    {"timeused", 'M'},     {"timelimit", 'l'},
      {"partition", 'P'}, {"reasonlist", 'R'}, {"reason", 'r'},       {"nodelist", 'N'},
      {"priority", 'Q'},  {"submittime", 'V'}, {"starttime", 'S'},    {"tres-per-node", 'b'},
      {"account", 'a'}};
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
    case 'F':
      return "ARRAY_JOB_ID";
    case 'K':
      return "ARRAY_TASK_ID";
    default:
      return "";
  }
}

// How a row names its job: "7", a job array's task "7_3", or its pending tasks as one row,
// "7_[4-15%2]" (squeue without -r).
struct RowId {
  std::string id;     // %i
  std::string tasks;  // %K: "3", "4-15%2"; "N/A" outside arrays
};

RowId RowIdOf(const v1::JobInfo& j) {
  if (!j.has_array()) return {std::to_string(j.id()), "N/A"};
  return {JobIdText(j), std::to_string(j.array().task_id())};
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
      return TimeLimit(j.time_limit_ms());
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
      return "(null)";
    case 'K':
      return row.tasks;
    default:
      return "";
  }
}

// Appends `v` in a column of `width` (0: as is), cut to fit as squeue cuts.
void AppendColumn(std::string& out, std::string_view v, size_t width, bool right) {
  if (width == 0) {
    out.append(v);
    return;
  }
  if (v.size() > width) v = v.substr(0, width);
  if (right) out.append(width - v.size(), ' ');
  out.append(v);
  if (!right) out.append(width - v.size(), ' ');
}

// One line (the header when `j` is null), appended to `out`.
void RenderSqueue(const std::vector<FormatItem>& items, const v1::JobInfo* j, const RowId& row,
                  int64_t now, std::string& out) {
  for (const FormatItem& f : items) {
    if (!f.letter) {
      out += f.literal;
      continue;
    }
    AppendColumn(out, j ? SqueueField(f.letter, *j, row, now) : SqueueHeader(f.letter), f.width,
                 f.right);
  }
  out += '\n';
}

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
  w.Field("gres", j.gres());
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

// `squeue --json` as Slurm 22.05 prints it (OpenAPI v0.0.38): the fields programs read, with
// Slurm's names and types (times in Unix seconds, time_limit in minutes or null for none).
void SlurmJobJson(JsonWriter& w, const v1::JobInfo& j, const std::string& cluster) {
  const bool pending = j.state() == v1::PENDING;
  const std::string nodes = NodeList(j);
  w.BeginObject();
  w.Field("account", std::string()).Field("job_id", j.id()).Field("name", j.name());
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
  w.Field("excluded_nodes", j.excluded_nodes());
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

// `muster queue --start`, as `squeue --start`: pending jobs and when they are expected to start.
std::string StartView(const v1::ListJobsResponse& resp, bool header) {
  std::string out;
  if (header) {
    out +=
        "             JOBID PARTITION     NAME     USER ST          START_TIME  NODES "
        "SCHEDNODES           NODELIST(REASON)\n";
  }
  for (const auto& j : resp.jobs()) {
    if (j.state() != v1::PENDING) continue;
    std::string start = j.expected_start_ms() > 0 ? FormatTimestamp(j.expected_start_ms()) : "N/A";
    out += Right(std::to_string(j.id()), 18) + " " + Right(j.partition(), 9) + " " +
           Right(j.name(), 8) + " " + Right(j.user(), 8) + " " +
           Right(JobStateCode(j.state(), j.completing()), 2) + " " + Right(start, 19) + " " +
           Right(std::to_string(j.num_nodes()), 6) + " " + Left("(null)", 20) + " (" + j.reason() +
           ")\n";
  }
  return out;
}

// `muster queue --priority`, as `sprio -n`: each pending job's priority and its normalised
// factors.
std::string PriorityView(const v1::ListJobsResponse& resp, bool header) {
  std::string out;
  if (header) {
    out +=
        "             JOBID PARTITION     USER   PRIORITY        AGE  FAIRSHARE    JOBSIZE "
        " PARTITION        QOS   NICE\n";
  }
  for (const auto& j : resp.jobs()) {
    if (j.state() != v1::PENDING) continue;
    const v1::PriorityFactors& f = j.priority_factors();
    out += Right(std::to_string(j.id()), 18) + " " + Right(j.partition(), 9) + " " +
           Right(j.user(), 8) + " " + Right(std::to_string(j.priority()), 10) + " " +
           Right(Factor(f.age()), 10) + " " + Right(Factor(f.fairshare()), 10) + " " +
           Right(Factor(f.size()), 10) + " " + Right(Factor(f.partition()), 10) + " " +
           Right(Factor(f.qos()), 10) + " " + Right(std::to_string(f.nice()), 6) + "\n";
  }
  return out;
}

int CmdQueue(int argc, char** argv) {
  v1::ListJobsRequest req;
  bool json = false, header = true, start_view = false, priority_view = false;
  std::string format;
  // As squeue, -h means --noheader (muster queue keeps -h for help).
  const bool squeue = FrontEnd() == "squeue";
  const struct option opts[] = {
      {"user", required_argument, nullptr, 'u'},   {"format", required_argument, nullptr, 'o'},
      {"states", required_argument, nullptr, 't'}, {"partition", required_argument, nullptr, 'p'},
      {"jobs", required_argument, nullptr, 'j'},   {"all", no_argument, nullptr, 'a'},
      {"json", no_argument, nullptr, 'J'},         {"noheader", no_argument, nullptr, 'H'},
      {"start", no_argument, nullptr, 'S'},        {"priority", no_argument, nullptr, 'P'},
      {"Format", required_argument, nullptr, 'O'}, {"array", no_argument, nullptr, 'r'},
      {"help", no_argument, nullptr, 'h'},         {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  bool long_format = false;
  bool expand_arrays = false;  // -r/--array: one row per job array task
  std::vector<JobRef> refs;    // -j, with array tasks (7_3) filtered here
  for (int c; (c = getopt_long(argc, argv, ":u:t:p:j:o:O:aHhr", opts, nullptr)) != -1;) {
    if (c == 'h' && squeue && std::string(argv[optind - 1]) != "--help") c = 'H';
    switch (c) {
      case 'o':
        format = optarg;
        long_format = false;
        break;
      case 'O':
        format = optarg;
        long_format = true;
        break;
      case 'u':
        for (const auto& u : Split(optarg, ',', true)) req.add_users(u);
        break;
      case 't':
        for (const auto& st : Split(optarg, ',', true)) {
          if (ToLower(st) == "all") {
            req.set_include_finished(true);
            continue;
          }
          v1::JobState js;
          if (!ParseJobState(st, &js)) return Usage("queue", "unknown job state '" + st + "'");
          req.add_states(js);
        }
        break;
      case 'p':
        for (const auto& p : Split(optarg, ',', true)) req.add_partitions(p);
        break;
      case 'j': {
        auto parsed = ParseJobRefs(optarg);
        if (!parsed.ok()) return Usage("queue", parsed.status().message());
        for (const JobRef& r : *parsed) {
          req.add_job_ids(r.id);
          refs.push_back(r);
        }
        break;
      }
      case 'r':
        expand_arrays = true;
        break;
      case 'a':
        req.set_include_finished(true);
        break;
      case 'J':
        json = true;
        break;
      case 'H':
        header = false;
        break;
      case 'S':
        start_view = true;
        break;
      case 'P':
        priority_view = true;
        break;
      case 'h':
        std::printf(
            "Usage: %s [-u USERS] [-t STATES] [-p PARTITIONS] [-j IDS] [--all] "
            "[--start | --priority] [-r] [%s] [-o FORMAT] [--json]\n"
            "  -o/--format FORMAT  squeue's fields: %%[.][WIDTH]LETTER, letters i A j u t T D C M "
            "l P R r N Q V S b a F K\n",
            ProgramName("queue").c_str(), squeue ? "-h/--noheader" : "--noheader");
        std::printf(
            "Pending and running jobs (with --all also those finished recently).\n"
            "  --start     pending jobs and their expected start times (squeue --start)\n"
            "  --priority  pending jobs' priorities and normalised factors (sprio -n)\n");
        return kExitOk;
      default:
        return Usage("queue",
                     "unknown or incomplete option '" + std::string(argv[optind - 1]) + "'");
    }
  }
  if (optind < argc)
    return Usage("queue", "unexpected argument '" + std::string(argv[optind]) + "'");
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("queue", controller.status());
  req.set_brief(!json && !start_view && !priority_view);
  if (json) {
    // Streamed: each job is written as it is parsed, in pieces of about 64 KiB. As squeue, in
    // the shape (and with the field names) of Slurm's own --json; as muster queue, Muster's.
    JsonWriter w;
    std::string cluster;
    if (squeue) {
      if (auto config = LoadConfig(ResolveConfigPath("")); config.ok()) {
        cluster = config->cluster_name;
      }
      w.BeginObject().Key("meta").BeginObject().Key("plugin").BeginObject();
      w.Field("type", std::string("openapi/v0.0.38"));
      w.Field("name", std::string("Muster (the fields of Slurm OpenAPI v0.0.38)")).EndObject();
      w.Key("Slurm").BeginObject().Key("version").BeginObject();
      w.Field("major", 22).Field("micro", 0).Field("minor", 5).EndObject();
      w.Field("release", std::string("muster ") + kVersion).EndObject().EndObject();
      w.Key("errors").BeginArray().EndArray();
    } else {
      w.BeginObject();
    }
    w.Key("jobs").BeginArray();
    Status listed = controller->ListJobsEach(req, [&](const v1::JobInfo& j) {
      if (!RefsMatch(refs, j)) return;
      if (squeue) {
        SlurmJobJson(w, j, cluster);
      } else {
        JobJson(w, j);
      }
      if (w.size() >= (64u << 10)) w.FlushTo(stdout);
    });
    if (!listed.ok()) return Fail("queue", listed);
    w.EndArray().EndObject();
    w.FlushTo(stdout);
    std::fputc('\n', stdout);
    return kExitOk;
  }
  if (start_view || priority_view) {
    auto jobs = controller->ListJobs(req);
    if (!jobs.ok()) return Fail("queue", jobs.status());
    std::fputs((start_view ? StartView(*jobs, header) : PriorityView(*jobs, header)).c_str(),
               stdout);
    return kExitOk;
  }
  // squeue's default format, unless -o/-O gave one.
  auto items = format.empty() ? ParseSqueueFormat(kSqueueDefaultFormat)
               : long_format  ? ParseSqueueLongFormat(format)
                              : ParseSqueueFormat(format);
  if (!items.ok()) return Usage("queue", items.status().message());
  const int64_t now = SystemClock::Get()->NowMs();
  // Rows are rendered as they stream in; like squeue, pending jobs come first. A job array's
  // pending tasks (consecutive in id order) make one row unless -r asks for one each.
  std::string pending, others;
  pending.reserve(1 << 20);  // no regrowth copies for the usual queue
  if (header) RenderSqueue(*items, nullptr, {}, now, pending);
  v1::JobInfo group;  // the first pending task of the array being collapsed
  std::vector<uint32_t> group_tasks;
  auto flush_group = [&] {
    if (group_tasks.empty()) return;
    RowId row = RowIdOf(group);
    if (group_tasks.size() > 1 || group.array().max_running() > 0) {
      std::vector<std::string> parts;
      for (size_t i = 0; i < group_tasks.size();) {
        size_t k = i;
        while (k + 1 < group_tasks.size() && group_tasks[k + 1] == group_tasks[k] + 1) ++k;
        parts.push_back(std::to_string(group_tasks[i]) +
                        (k > i ? "-" + std::to_string(group_tasks[k]) : ""));
        i = k + 1;
      }
      row.tasks = Join(parts, ",");
      if (group.array().max_running() > 0) {
        row.tasks += "%" + std::to_string(group.array().max_running());
      }
      row.id = std::to_string(group.array().array_job_id()) + "_[" + row.tasks + "]";
    }
    RenderSqueue(*items, &group, row, now, pending);
    group_tasks.clear();
  };
  Status listed = controller->ListJobsEach(req, [&](const v1::JobInfo& j) {
    if (!RefsMatch(refs, j)) return;
    if (!expand_arrays && j.has_array() && j.state() == v1::PENDING) {
      if (!group_tasks.empty() && group.array().array_job_id() == j.array().array_job_id()) {
        group_tasks.push_back(j.array().task_id());
        return;
      }
      flush_group();
      group = j;
      group_tasks.push_back(j.array().task_id());
      return;
    }
    if (j.state() == v1::PENDING) flush_group();
    RenderSqueue(*items, &j, RowIdOf(j), now, j.state() == v1::PENDING ? pending : others);
  });
  flush_group();
  if (!listed.ok()) return Fail("queue", listed);
  std::fwrite(pending.data(), 1, pending.size(), stdout);
  std::fwrite(others.data(), 1, others.size(), stdout);
  return kExitOk;
}

int CmdJob(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "show") {
    return Usage("job", "expected 'muster job show ID [--json]'");
  }
  bool json = false;
  std::vector<std::string> ids;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (!a.empty() && a[0] == '-') {
      return Usage("job", "unknown option '" + a + "'");
    } else {
      ids.push_back(a);
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
  std::printf("JobId=%llu JobName=%s\n", static_cast<unsigned long long>(j.id()), j.name().c_str());
  std::printf("   UserId=%s(%u) Priority=%lld\n", j.user().c_str(), j.uid(),
              static_cast<long long>(j.priority()));
  std::printf("   JobState=%s Reason=%s%s%s\n", JobStateName(j.state(), j.completing()).c_str(),
              j.reason().c_str(),
              j.reason_detail().empty() ? "" : " Detail=", j.reason_detail().c_str());
  std::printf("   Requeue=%d Restarts=%u ExitCode=%d:%d\n", j.no_requeue() ? 0 : 1,
              j.requeue_count(), j.exit_code(), j.exit_signal());
  std::printf("   RunTime=%s TimeLimit=%s\n", FormatDuration(ElapsedMs(j, now)).c_str(),
              TimeLimit(j.time_limit_ms()).c_str());
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
  std::printf("   WorkDir=%s\n   StdOut=%s\n   StdErr=%s\n", j.work_dir().c_str(),
              j.stdout_path().c_str(), j.stderr_path().c_str());
  return kExitOk;
}

namespace {

// A signal by name (USR1, SIGUSR1) or number, as scancel --signal takes it.
int ParseSignal(const std::string& v) {
  static const std::map<std::string, int> names = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
      {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"ALRM", SIGALRM}, {"URG", SIGURG}};
  if (auto n = ParseUint(v); n && *n > 0 && *n < 65) return static_cast<int>(*n);
  std::string name = v;
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (StartsWith(name, "SIG")) name = name.substr(3);
  auto it = names.find(name);
  return it == names.end() ? 0 : it->second;
}

}  // namespace

int CmdCancel(int argc, char** argv) {
  const struct option opts[] = {
      {"signal", required_argument, nullptr, 's'},   {"batch", no_argument, nullptr, 'b'},
      {"full", no_argument, nullptr, 'f'},           {"user", required_argument, nullptr, 'u'},
      {"name", required_argument, nullptr, 'n'},     {"jobname", required_argument, nullptr, 'n'},
      {"state", required_argument, nullptr, 't'},    {"partition", required_argument, nullptr, 'p'},
      {"nodelist", required_argument, nullptr, 'w'}, {"quiet", no_argument, nullptr, 'Q'},
      {"help", no_argument, nullptr, 'h'},           {nullptr, 0, nullptr, 0}};
  v1::CancelJobRequest req;
  std::vector<std::string> users, names, partitions, nodelist;
  std::vector<v1::JobState> states;
  bool quiet = false;
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":s:bfu:n:t:p:w:Qh", opts, nullptr)) != -1;) {
    const std::string val = optarg ? optarg : "";
    switch (c) {
      case 's': {
        int sig = ParseSignal(val);
        if (!sig) return Usage("cancel", "unknown signal '" + val + "'");
        req.set_signal(sig);
        break;
      }
      case 'b':
        req.set_batch_only(true);
        break;
      case 'f':
        req.set_full(true);
        break;
      case 'u':
        for (const auto& u : Split(val, ',', true)) users.push_back(u);
        break;
      case 'n':
        for (const auto& n : Split(val, ',', true)) names.push_back(n);
        break;
      case 't':
        for (const auto& st : Split(val, ',', true)) {
          v1::JobState state;
          if (!ParseJobState(st, &state)) return Usage("cancel", "unknown state '" + st + "'");
          states.push_back(state);
        }
        break;
      case 'p':
        for (const auto& p : Split(val, ',', true)) partitions.push_back(p);
        break;
      case 'w': {
        auto expanded = ExpandHostlist(val);
        if (!expanded.ok()) return Usage("cancel", expanded.status().message());
        nodelist = *expanded;
        break;
      }
      case 'Q':
        quiet = true;
        break;
      case 'h':
        std::printf(
            "Usage: %s [OPTIONS] [JOBID...]\n"
            "  -s, --signal=SIG     send SIG (USR1, 10, ...) to the jobs' steps instead of "
            "cancelling\n"
            "  -b, --batch          ... to the batch script only;  -f, --full: to every process\n"
            "  -u, --user=U  -n, --name=NAME  -t, --state=S  -p, --partition=P  -w, --nodelist=N\n"
            "                       select jobs (with ids: those of them that match)\n",
            ProgramName("cancel").c_str());
        return kExitOk;
      case ':':
        return Usage("cancel", std::string("option ") + argv[optind - 1] + " needs a value");
      default:
        return Usage("cancel",
                     std::string("option ") + argv[optind - 1] + " is not supported (see --help)");
    }
  }
  std::vector<JobRef> refs;
  for (int i = optind; i < argc; ++i) {
    auto parsed = ParseJobRefs(argv[i]);
    if (!parsed.ok()) return Usage("cancel", parsed.status().message());
    refs.insert(refs.end(), parsed->begin(), parsed->end());
  }
  const bool selecting = !users.empty() || !names.empty() || !states.empty() ||
                         !partitions.empty() || !nodelist.empty();
  bool tasks_named = false;  // 7_3: resolved to the task's own job id below
  for (const JobRef& r : refs) tasks_named |= !r.tasks.empty();
  if (refs.empty() && !selecting) return Usage("cancel", "no job id given");
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("cancel", controller.status());
  if (selecting || tasks_named) {
    // The selectors pick among the live jobs (and among the given ids, when there are some);
    // what they pick is cancelled job by job (a job array's first task is not its whole array).
    v1::ListJobsRequest list;
    for (const auto& u : users) list.add_users(u);
    for (auto st : states) list.add_states(st);
    for (const auto& p : partitions) list.add_partitions(p);
    for (const JobRef& r : refs) list.add_job_ids(r.id);
    list.set_brief(true);
    auto found = controller->ListJobs(list);
    if (!found.ok()) return Fail("cancel", found.status());
    std::set<std::string> want_names(names.begin(), names.end());
    std::set<std::string> want_nodes(nodelist.begin(), nodelist.end());
    for (const auto& j : found->jobs()) {
      if (!RefsMatch(refs, j)) continue;
      if (!want_names.empty() && !want_names.count(j.name())) continue;
      if (!want_nodes.empty()) {
        bool on = false;
        for (const auto& n : j.nodes()) on |= want_nodes.count(n) > 0;
        if (!on) continue;
      }
      if (j.state() != v1::PENDING && j.state() != v1::RUNNING) continue;
      req.add_single_job_ids(j.id());
    }
    if (req.single_job_ids_size() == 0) {
      // Nothing matched: scancel is silent, but names a task that does not exist.
      if (!selecting && FrontEnd() == "scancel" && !quiet) {
        std::fprintf(stderr,
                     "scancel: error: Kill job error on job id %s: Invalid job id specified\n",
                     argv[optind]);
      }
      return kExitOk;
    }
  } else {
    for (const JobRef& r : refs) req.add_job_ids(r.id);
  }
  auto resp = controller->CancelJob(req);
  if (!resp.ok()) return Fail("cancel", resp.status());
  int rc = kExitOk;
  for (const auto& r : resp->results()) {
    if (r.code() == 0) continue;
    if (FrontEnd() == "scancel") {
      // scancel's words and exit status (Slurm 22.05): the error is printed, the exit is 0.
      if (!quiet) {
        std::fprintf(stderr, "scancel: error: Kill job error on job id %llu: %s\n",
                     static_cast<unsigned long long>(r.job_id()),
                     r.code() == static_cast<int>(StatusCode::kNotFound)
                         ? "Invalid job id specified"
                         : r.message().c_str());
      }
      if (r.code() == static_cast<int>(StatusCode::kPermissionDenied)) rc = kExitFailed;
      continue;
    }
    std::fprintf(stderr, "%s: %s\n", ProgramName("cancel").c_str(), r.message().c_str());
    rc = kExitFailed;
  }
  return rc;
}

}  // namespace muster::cli
