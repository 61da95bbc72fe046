// muster queue (squeue): the queue in squeue's formats, --start and --priority views, and JSON
// in Muster's schema or, as squeue, in Slurm's.
#include <getopt.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "cli.h"
#include "job_json.h"
#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "output.h"
#include "squeue_format.h"

namespace muster::cli {

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
           Right(Printable(j.name()), 8) + " " + Right(j.user(), 8) + " " +
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
      {"help", no_argument, nullptr, 'h'},         {"me", no_argument, nullptr, 'M'},
      {"long", no_argument, nullptr, 'l'},         {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  bool long_format = false;
  bool long_view = false;      // -l/--long: squeue's long columns, under the time of the listing
  bool expand_arrays = false;  // -r/--array: one row per job array task
  std::vector<JobRef> refs;    // -j, with array tasks (7_3) filtered here
  StateFilter states;          // -t
  for (int c; (c = getopt_long(argc, argv, ":u:t:p:j:o:O:aHhrl", opts, nullptr)) != -1;) {
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
      case 't': {
        auto parsed = ParseStateFilter(optarg);
        if (!parsed.ok()) return Usage("queue", parsed.status().message());
        states = std::move(*parsed);
        break;
      }
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
      case 'M':  // --me
        req.add_users(CurrentUserName());
        break;
      case 'l':
        long_view = true;
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
            "Usage: %s [-u USERS | --me] [-t STATES] [-p PARTITIONS] [-j IDS] [--all] "
            "[--start | --priority] [-r] [-l] [%s] [-o FORMAT] [--json]\n"
            "  -o/--format FORMAT  squeue's fields: %%[.][WIDTH]LETTER, letters i A j u t T D C M "
            "l P R r N Q V S b a F K q v\n",
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
  if (states.all) {
    req.set_include_finished(true);
  } else if (states.ServerSide()) {
    for (v1::JobState s : states.states) req.add_states(s);
  } else if (states.named) {
    // COMPLETING, or only states no job is in: the controller's default (pending, running,
    // cleaning up), with the finished ones when a finished state was named, filtered here.
    for (v1::JobState s : states.states) {
      if (s != v1::PENDING && s != v1::RUNNING && s != v1::SUSPENDED)
        req.set_include_finished(true);
    }
  }
  auto wanted = [&](const v1::JobInfo& j) { return RefsMatch(refs, j) && states.Matches(j); };
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
      if (!wanted(j)) return;
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
    auto* rows = jobs->mutable_jobs();
    rows->erase(std::remove_if(rows->begin(), rows->end(),
                               [&](const v1::JobInfo& j) { return !states.Matches(j); }),
                rows->end());
    std::fputs((start_view ? StartView(*jobs, header) : PriorityView(*jobs, header)).c_str(),
               stdout);
    return kExitOk;
  }
  // squeue's default format, unless -o/-O gave one.
  auto items = format.empty()
                   ? ParseSqueueFormat(long_view ? kSqueueLongFormat : kSqueueDefaultFormat)
               : long_format ? ParseSqueueLongFormat(format)
                             : ParseSqueueFormat(format);
  if (!items.ok()) return Usage("queue", items.status().message());
  const int64_t now = SystemClock::Get()->NowMs();
  // Rows are rendered as they stream in; like squeue, pending jobs come first. A job array's
  // pending tasks (consecutive in id order) make one row unless -r asks for one each.
  std::string pending, others;
  pending.reserve(1 << 20);  // no regrowth copies for the usual queue
  if (header && long_view) {
    // squeue -l starts with the time of the listing, as ctime writes it.
    const std::time_t t = static_cast<std::time_t>(now / 1000);
    std::tm tm{};
    localtime_r(&t, &tm);
    char when[64];
    std::strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y\n", &tm);
    pending += when;
  }
  if (header) RenderSqueue(*items, nullptr, {}, now, pending);
  v1::JobInfo group;  // the first pending task of the array being collapsed
  std::vector<uint32_t> group_tasks;
  auto flush_group = [&] {
    if (group_tasks.empty()) return;
    RenderSqueue(*items, &group, CollapsedRowId(group, group_tasks), now, pending);
    group_tasks.clear();
  };
  Status listed = controller->ListJobsEach(req, [&](const v1::JobInfo& j) {
    if (!wanted(j)) return;
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

}  // namespace muster::cli
