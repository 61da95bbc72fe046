// muster acct (sacct): finished and live jobs with their steps, from the controller's records.
#include <getopt.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <optional>

#include "cli.h"
#include "format_spec.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

// One line of output: a job, its batch script (ID.batch) or one of its steps (ID.N).
struct Row {
  const v1::JobInfo* job = nullptr;
  std::string id;      // 7, 7_3 (a job array's task), 7.batch, 7_3.0
  std::string raw_id;  // the same with the job's own id (JobIDRaw)
  std::string name;
  std::string partition;
  std::string state;
  int32_t exit_code = 0;
  int32_t exit_signal = 0;
  uint32_t cpus = 0;
  uint32_t gpus = 0;
  uint32_t nnodes = 0;
  uint32_t ntasks = 0;
  std::string nodelist;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  bool is_job = false;
};

std::string Time(int64_t ms) { return ms > 0 ? FormatTimestamp(ms) : "Unknown"; }

int64_t NowMs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

struct Field {
  const char* name;
  size_t width;
  std::function<std::string(const Row&, int64_t now)> value;
};

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      {"JobID", 12, [](const Row& r, int64_t) { return r.id; }},
      {"JobIDRaw", 12, [](const Row& r, int64_t) { return r.raw_id; }},
      {"JobName", 10, [](const Row& r, int64_t) { return r.name; }},
      {"Partition", 10, [](const Row& r, int64_t) { return r.partition; }},
      {"Account", 10,
       [](const Row& r, int64_t) { return r.job ? r.job->account() : std::string(); }},
      {"QOS", 10, [](const Row& r, int64_t) { return r.job ? r.job->qos() : std::string(); }},
      {"Reservation", 12,
       [](const Row& r, int64_t) { return r.job ? r.job->reservation() : std::string(); }},
      {"AllocCPUS", 10, [](const Row& r, int64_t) { return std::to_string(r.cpus); }},
      {"State", 10, [](const Row& r, int64_t) { return r.state; }},
      {"ExitCode", 8,
       [](const Row& r, int64_t) {
         return std::to_string(r.exit_code) + ":" + std::to_string(r.exit_signal);
       }},
      {"User", 9, [](const Row& r, int64_t) { return r.is_job ? r.job->user() : std::string(); }},
      {"UID", 6,
       [](const Row& r, int64_t) {
         return r.is_job ? std::to_string(r.job->uid()) : std::string();
       }},
      {"Submit", 19, [](const Row& r, int64_t) { return Time(r.job->submit_time_ms()); }},
      {"Start", 19, [](const Row& r, int64_t) { return Time(r.start_ms); }},
      {"End", 19, [](const Row& r, int64_t) { return Time(r.end_ms); }},
      {"Elapsed", 10,
       [](const Row& r, int64_t now) {
         if (r.start_ms <= 0) return FormatHms(0);
         return FormatHms((r.end_ms > 0 ? r.end_ms : now) - r.start_ms);
       }},
      {"ElapsedRaw", 10,
       [](const Row& r, int64_t now) {
         if (r.start_ms <= 0) return std::string("0");
         return std::to_string(((r.end_ms > 0 ? r.end_ms : now) - r.start_ms) / 1000);
       }},
      {"NNodes", 8, [](const Row& r, int64_t) { return std::to_string(r.nnodes); }},
      {"AllocNodes", 10,
       [](const Row& r, int64_t) { return std::to_string(r.start_ms > 0 ? r.nnodes : 0); }},
      {"NodeList", 15,
       [](const Row& r, int64_t) { return r.nodelist.empty() ? "None assigned" : r.nodelist; }},
      {"NTasks", 8,
       [](const Row& r, int64_t) { return r.is_job ? std::string() : std::to_string(r.ntasks); }},
      {"ReqCPUS", 8, [](const Row& r, int64_t) { return std::to_string(r.cpus); }},
      {"AllocTRES", 30,
       [](const Row& r, int64_t) {
         if (r.start_ms <= 0) return std::string();
         std::string t = "cpu=" + std::to_string(r.cpus);
         if (r.is_job && r.job->mem_total_mb() > 0) {
           t += ",mem=" + std::to_string(r.job->mem_total_mb()) + "M";
         }
         t += ",node=" + std::to_string(r.nnodes);
         if (r.gpus > 0) t += ",gres/gpu=" + std::to_string(r.gpus);
         return t;
       }},
      {"Timelimit", 10,
       [](const Row& r, int64_t) {
         if (!r.is_job) return std::string();
         // As sacct's other time fields: [D-]HH:MM:SS.
         return r.job->time_limit_ms() > 0 ? FormatHms(r.job->time_limit_ms())
                                           : std::string("UNLIMITED");
       }},
      {"CPUTimeRaw", 10,
       [](const Row& r, int64_t now) {
         if (r.start_ms <= 0) return std::string("0");
         return std::to_string(((r.end_ms > 0 ? r.end_ms : now) - r.start_ms) / 1000 * r.cpus);
       }},
      {"Reason", 20, [](const Row& r, int64_t) { return r.is_job ? r.job->reason() : ""; }},
      {"WorkDir", 20, [](const Row& r, int64_t) { return r.job->work_dir(); }},
      {"Priority", 10,
       [](const Row& r, int64_t) { return r.is_job ? std::to_string(r.job->priority()) : ""; }},
      {"Restarts", 8,
       [](const Row& r, int64_t) {
         return r.is_job ? std::to_string(r.job->requeue_count()) : std::string();
       }},
  };
  return fields;
}

struct Column {
  const Field* field;
  size_t width;
};

Result<std::vector<Column>> ParseFormat(const std::string& spec) {
  std::string names;
  for (const Field& f : Fields()) names += std::string(names.empty() ? "" : " ") + f.name;
  auto find = [](const std::string& name) -> std::optional<size_t> {
    for (size_t i = 0; i < Fields().size(); ++i) {
      if (EqualsIgnoreCase(Fields()[i].name, name)) return i;
    }
    return std::nullopt;
  };
  MUSTER_ASSIGN_OR_RETURN(std::vector<NamedField> named, ParseNamedFields(spec, find, names));
  std::vector<Column> out;
  for (const NamedField& n : named) {
    const Field& f = Fields()[n.index];
    out.push_back({&f, n.width ? n.width : f.width});
  }
  return out;
}

// sacct cuts a long value and marks the cut with '+'.
std::string Fit(const std::string& v, size_t width) {
  if (v.size() <= width) return std::string(width - v.size(), ' ') + v;
  return v.substr(0, width - 1) + "+";
}

std::string BatchState(const v1::JobInfo& j) {
  switch (j.state()) {
    case v1::RUNNING:
      return "RUNNING";
    case v1::SUSPENDED:
      return "SUSPENDED";
    case v1::COMPLETED:
      return "COMPLETED";
    case v1::FAILED:
      return "FAILED";
    default:
      return "CANCELLED";  // killed with the job (cancel, time limit, node failure)
  }
}

std::vector<Row> RowsOf(const v1::JobInfo& j, bool allocations_only) {
  std::vector<Row> rows;
  Row job;
  job.job = &j;
  job.is_job = true;
  job.id = JobIdText(j);
  job.raw_id = std::to_string(j.id());
  job.name = j.name();
  job.partition = j.partition();
  job.state = JobStateName(j.state(), false);
  if (j.state() == v1::PENDING && j.requeue_count() > 0) job.state = "PENDING";
  job.exit_code = j.exit_code();
  job.exit_signal = j.exit_signal();
  job.cpus = j.cpus_total();
  job.gpus = j.gpus_total();
  job.nnodes = j.num_nodes();
  job.nodelist = CompressHostlist({j.nodes().begin(), j.nodes().end()});
  job.start_ms = j.start_time_ms();
  job.end_ms = j.end_time_ms();
  if (j.state() == v1::PENDING) job.nodelist.clear();
  rows.push_back(job);
  if (allocations_only || j.start_time_ms() <= 0) return rows;
  if (!j.interactive() && j.nodes_size() > 0) {
    Row b = job;
    b.is_job = false;
    b.id = job.id + ".batch";
    b.raw_id = job.raw_id + ".batch";
    b.name = "batch";
    b.partition.clear();
    b.state = BatchState(j);
    b.nnodes = 1;
    b.ntasks = 1;
    b.nodelist = j.nodes(0);
    b.gpus = 0;
    b.cpus = j.allocation().nodes_size() > 0
                 ? static_cast<uint32_t>(j.allocation().nodes(0).cpu_ids_size())
                 : (j.num_nodes() ? j.cpus_total() / j.num_nodes() : 0);
    rows.push_back(b);
  }
  for (const v1::StepRecord& s : j.steps()) {
    Row r;
    r.job = &j;
    r.id = job.id + "." + std::to_string(s.id());
    r.raw_id = job.raw_id + "." + std::to_string(s.id());
    r.name = s.name();
    r.state = JobStateName(s.state(), false);
    r.exit_code = s.exit_code();
    r.exit_signal = s.exit_signal();
    std::vector<std::string> names;
    for (const auto& na : s.nodes()) {
      names.push_back(na.node());
      r.cpus += static_cast<uint32_t>(na.cpu_ids_size());
      r.gpus += static_cast<uint32_t>(na.gpu_indices_size());
    }
    if (s.overlap()) r.cpus = s.ntasks() * std::max<uint32_t>(1, s.cpus_per_task());
    r.nnodes = static_cast<uint32_t>(names.size());
    r.ntasks = s.ntasks();
    r.nodelist = CompressHostlist(names);
    r.start_ms = s.start_time_ms();
    r.end_ms = s.end_time_ms();
    rows.push_back(r);
  }
  return rows;
}

void PrintJson(const std::vector<v1::JobInfo>& jobs, int64_t now) {
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

std::string AcctUsage(const std::string& prog) {
  return "Usage: " + prog + R"( [OPTIONS]
Jobs and their steps from the controller's records: running, pending and finished ones (kept for
scheduling.accounting_retention_days).

  -j, --jobs=ID[,ID...]      these jobs (any time); ID.STEP selects the job
  -u, --user=U[,U...]        these users' jobs (default: your own; root: everyone's)
  -a, --allusers             every user's jobs
  -S, --starttime=TIME       jobs not over before TIME (default: midnight today)
  -E, --endtime=TIME         jobs submitted before TIME (default: now)
  -s, --state=S[,S...]       CD, F, CA, TO, NF, PD, R (or the full names)
  -r, --partition=P[,P...]
  -X, --allocations          jobs only, not their batch and job steps
  -n, --noheader
  -p, --parsable             '|' after every field;  -P, --parsable2: between fields
  -o, --format=F[%W],...     fields (see --helpformat)
  -e, --helpformat           list the fields
      --json                 JSON (schema in docs/user-guide.md)
TIME: YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], now[-N{min,hours,days,weeks}], today.
)";
}

}  // namespace

int CmdAcct(int argc, char** argv) {
  enum { kJson = 1000 };
  const struct option opts[] = {{"jobs", required_argument, nullptr, 'j'},
                                {"user", required_argument, nullptr, 'u'},
                                {"allusers", no_argument, nullptr, 'a'},
                                {"starttime", required_argument, nullptr, 'S'},
                                {"endtime", required_argument, nullptr, 'E'},
                                {"state", required_argument, nullptr, 's'},
                                {"partition", required_argument, nullptr, 'r'},
                                {"allocations", no_argument, nullptr, 'X'},
                                {"noheader", no_argument, nullptr, 'n'},
                                {"parsable", no_argument, nullptr, 'p'},
                                {"parsable2", no_argument, nullptr, 'P'},
                                {"format", required_argument, nullptr, 'o'},
                                {"helpformat", no_argument, nullptr, 'e'},
                                {"json", no_argument, nullptr, kJson},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  const int64_t now = NowMs();
  v1::ListAccountingRequest req;
  StateFilter states;        // -s
  std::vector<JobRef> refs;  // -j, with job array tasks (7_3) filtered here
  bool all_users = ::getuid() == 0, noheader = false, allocations = false, json = false;
  int parsable = 0;  // 1: -p, 2: -P
  std::string format = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
  std::optional<int64_t> start;
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":j:u:aS:E:s:r:XnpPo:eh", opts, nullptr)) != -1;) {
    const std::string val = optarg ? optarg : "";
    switch (c) {
      case 'j': {
        auto parsed = ParseJobRefs(val);
        if (!parsed.ok()) return Usage("acct", parsed.status().message());
        for (const JobRef& r : *parsed) {
          req.add_job_ids(r.id);  // a job array's id brings all its tasks
          refs.push_back(r);
        }
        break;
      }
      case 'u':
        for (const auto& u : Split(val, ',', true)) req.add_users(u);
        all_users = true;
        break;
      case 'a':
        all_users = true;
        break;
      case 'S': {
        auto t = ParseWhen(val, now);
        if (!t.ok()) return Usage("acct", t.status().message());
        start = *t;
        break;
      }
      case 'E': {
        auto t = ParseWhen(val, now);
        if (!t.ok()) return Usage("acct", t.status().message());
        req.set_end_ms(*t);
        break;
      }
      case 's': {
        auto parsed = ParseStateFilter(val);
        if (!parsed.ok()) return Usage("acct", parsed.status().message());
        states = std::move(*parsed);
        break;
      }
      case 'r':
        for (const auto& p : Split(val, ',', true)) req.add_partitions(p);
        break;
      case 'X':
        allocations = true;
        break;
      case 'n':
        noheader = true;
        break;
      case 'p':
        parsable = 1;
        break;
      case 'P':
        parsable = 2;
        break;
      case 'o':
        format = val;
        break;
      case 'e': {
        std::string names;
        for (const Field& f : Fields()) names += std::string(names.empty() ? "" : " ") + f.name;
        std::printf("%s\n", names.c_str());
        return kExitOk;
      }
      case kJson:
        json = true;
        break;
      case 'h':
        std::fputs(AcctUsage(ProgramName("acct")).c_str(), stdout);
        return kExitOk;
      case ':':
        return Usage("acct", std::string("option ") + argv[optind - 1] + " needs a value");
      default:
        return Usage("acct", std::string("unknown or unsupported option ") + argv[optind - 1]);
    }
  }
  if (optind < argc)
    return Usage("acct", std::string("unexpected argument '") + argv[optind] + "'");
  auto columns = ParseFormat(format);
  if (!columns.ok()) return Usage("acct", columns.status().message());
  if (!all_users) {
    // Your own jobs by default, as sacct shows them.
    req.add_users(CurrentUserName());
  }
  if (req.job_ids_size() == 0) {
    req.set_start_ms(start ? *start : *ParseWhen("today", now));
  } else if (start) {
    req.set_start_ms(*start);
  }
  req.set_without_steps(allocations && !json);
  // What the controller cannot filter by (COMPLETING, states no job is in) is filtered here.
  if (states.ServerSide()) {
    for (v1::JobState s : states.states) req.add_states(s);
  }
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("acct", controller.status());
  auto resp = controller->ListAccounting(req);
  if (!resp.ok()) return Fail("acct", resp.status());
  std::vector<v1::JobInfo> jobs;
  for (const v1::JobInfo& j : resp->jobs()) {
    if (RefsMatch(refs, j) && states.Matches(j)) jobs.push_back(j);
  }
  if (json) {
    PrintJson(jobs, now);
    return kExitOk;
  }
  std::string out;
  auto line = [&](const std::function<std::string(const Column&)>& cell) {
    for (size_t i = 0; i < columns->size(); ++i) {
      const Column& c = (*columns)[i];
      if (parsable) {
        AppendPrintable(out, cell(c));  // a job's name or path is shown, never obeyed
        if (parsable == 1 || i + 1 < columns->size()) out += '|';
      } else {
        out += Fit(Printable(cell(c)), c.width);
        out += ' ';
      }
    }
    out += '\n';
  };
  if (!noheader) {
    line([](const Column& c) { return std::string(c.field->name); });
    if (!parsable) line([](const Column& c) { return std::string(c.width, '-'); });
  }
  for (const v1::JobInfo& j : jobs) {
    for (const Row& r : RowsOf(j, allocations)) {
      line([&](const Column& c) { return c.field->value(r, now); });
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

}  // namespace muster::cli
