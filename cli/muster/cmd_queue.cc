// muster queue (squeue): the queue in squeue's formats, filters and sort orders, its steps
// (-s), --start and --priority views, and JSON in Muster's schema or, as squeue, in Slurm's.
#include <getopt.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <set>
#include <string>
#include <vector>

#include "cli.h"
#include "job_json.h"
#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "output.h"
#include "squeue_format.h"

namespace muster::cli {
namespace {

// squeue --start: pending jobs by expected start, with these columns.
constexpr char kSqueueStartFormat[] = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";

// Long options that have no short letter.
enum : int {
  kOptJson = 256,
  kOptNoheader,
  kOptStart,
  kOptPriority,
  kOptMe,
  kOptArrayUnique,
  kOptFederation,
  kOptLocal,
  kOptSibling,
  kOptHide,
  kOptNoconvert,
  kOptUsage,
  kOptYaml,
  kOptHelp,
};

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

// The time of a listing, as squeue prints it above -l, -i and -v listings (ctime's form).
std::string ListingTime(int64_t now_ms) {
  const std::time_t t = static_cast<std::time_t>(now_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char when[64];
  std::strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y\n", &tm);
  return when;
}

void PrintQueueUsage(const std::string& prog, bool squeue) {
  std::printf(
      "Usage: %s [-A account] [-a] [%s] [-i seconds] [-j jobs] [-L licenses] [-l] [--me]\n"
      "       [-M cluster] [-n names] [-o format | -O fields] [-p partitions] [-q qos]\n"
      "       [-R reservation] [-r | --array-unique] [-S sort] [-s [steps]] [--start]\n"
      "       [-t states] [-u users] [-w nodes] [-v] [--json | --yaml] [--noconvert]\n",
      prog.c_str(), squeue ? "-h" : "--noheader");
}

// squeue -i runs until SIGINT or SIGTERM, which end it after the listing it is printing (even
// where a shell started it with SIGINT ignored, as it starts background jobs).
volatile std::sig_atomic_t g_stop = 0;
void OnStopSignal(int) { g_stop = 1; }

void SleepUnlessStopped(uint64_t seconds) {
  for (uint64_t slices = seconds * 5; slices > 0 && !g_stop; --slices) {
    struct timespec slice = {0, 200'000'000};
    nanosleep(&slice, nullptr);
  }
}

bool InIgnoringCase(const std::vector<std::string>& wanted, const std::string& v) {
  return std::any_of(wanted.begin(), wanted.end(),
                     [&](const std::string& w) { return EqualsIgnoreCase(w, v); });
}

}  // namespace

int CmdQueue(int argc, char** argv) {
  v1::ListJobsRequest req;
  bool json = false, header = true, start_view = false, priority_view = false;
  std::string format;
  // As squeue, -h means --noheader (muster queue keeps -h for help), and -a (every partition)
  // changes nothing: muster queue's --all also lists the jobs finished lately.
  const bool squeue = FrontEnd() == "squeue";
  const std::string prog = ProgramName("queue");
  const struct option opts[] = {{"user", required_argument, nullptr, 'u'},
                                {"users", required_argument, nullptr, 'u'},
                                {"format", required_argument, nullptr, 'o'},
                                {"Format", required_argument, nullptr, 'O'},
                                {"states", required_argument, nullptr, 't'},
                                {"partition", required_argument, nullptr, 'p'},
                                {"partitions", required_argument, nullptr, 'p'},
                                {"jobs", required_argument, nullptr, 'j'},
                                {"all", no_argument, nullptr, 'a'},
                                {"array", no_argument, nullptr, 'r'},
                                {"array-unique", no_argument, nullptr, kOptArrayUnique},
                                {"long", no_argument, nullptr, 'l'},
                                {"account", required_argument, nullptr, 'A'},
                                {"accounts", required_argument, nullptr, 'A'},
                                {"name", required_argument, nullptr, 'n'},
                                {"nodelist", required_argument, nullptr, 'w'},
                                {"nodes", required_argument, nullptr, 'w'},
                                {"qos", required_argument, nullptr, 'q'},
                                {"reservation", required_argument, nullptr, 'R'},
                                {"licenses", required_argument, nullptr, 'L'},
                                {"sort", required_argument, nullptr, 'S'},
                                {"iterate", required_argument, nullptr, 'i'},
                                {"steps", optional_argument, nullptr, 's'},
                                {"clusters", required_argument, nullptr, 'M'},
                                {"cluster", required_argument, nullptr, 'M'},
                                {"verbose", no_argument, nullptr, 'v'},
                                {"version", no_argument, nullptr, 'V'},
                                {"json", no_argument, nullptr, kOptJson},
                                {"yaml", no_argument, nullptr, kOptYaml},
                                {"noheader", no_argument, nullptr, kOptNoheader},
                                {"start", no_argument, nullptr, kOptStart},
                                {"priority", no_argument, nullptr, kOptPriority},
                                {"me", no_argument, nullptr, kOptMe},
                                {"federation", no_argument, nullptr, kOptFederation},
                                {"local", no_argument, nullptr, kOptLocal},
                                {"sibling", no_argument, nullptr, kOptSibling},
                                {"hide", no_argument, nullptr, kOptHide},
                                {"noconvert", no_argument, nullptr, kOptNoconvert},
                                {"usage", no_argument, nullptr, kOptUsage},
                                {"help", no_argument, nullptr, kOptHelp},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  bool long_format = false;
  bool long_view = false;      // -l/--long: squeue's long columns, under the time of the listing
  bool expand_arrays = false;  // -r/--array, --array-unique: one row per job array task
  bool verbose = false;        // -v: the time of the listing first, as squeue -v
  bool noconvert = false;
  bool steps = false;  // -s/--steps: the running jobs' steps instead of the jobs
  std::string step_list, sort, clusters;
  bool sort_given = false;
  uint64_t iterate_s = 0;    // -i: list again every this many seconds, until stopped
  std::vector<JobRef> refs;  // -j, with array tasks (7_3) filtered here
  StateFilter states;        // -t
  std::vector<std::string> names, accounts, qos, reservations, nodes;  // filtered here
  std::vector<std::string> licenses;  // -L: jobs asking for any of these
  for (int c; (c = getopt_long(argc, argv, ":u:t:p:j:o:O:aHhrlA:n:w:q:R:L:S:i:s::M:vVP", opts,
                               nullptr)) != -1;) {
    if (c == 'h') c = squeue ? kOptNoheader : kOptHelp;
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
        // Names or, as Slurm's, numeric uids (looked up here: the controller matches names).
        for (const auto& u : Split(optarg, ',', true)) {
          const struct passwd* pw =
              ParseUint(u) ? ::getpwuid(static_cast<uid_t>(*ParseUint(u))) : nullptr;
          req.add_users(pw ? std::string(pw->pw_name) : u);
        }
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
      case kOptArrayUnique:  // one row per pending task: what -r does to pending arrays
        expand_arrays = true;
        break;
      case 'A':
        for (const auto& a : Split(optarg, ',', true)) accounts.push_back(a);
        break;
      case 'n':
        for (const auto& n : Split(optarg, ',', true)) names.push_back(n);
        break;
      case 'q':
        for (const auto& q : Split(optarg, ',', true)) qos.push_back(q);
        break;
      case 'R':
        for (const auto& r : Split(optarg, ',', true)) reservations.push_back(r);
        break;
      case 'L':
        for (const auto& l : Split(optarg, ',', true)) licenses.push_back(l.substr(0, l.find(':')));
        break;
      case 'w': {
        auto expanded = ExpandHostlist(optarg);
        if (!expanded.ok()) {
          return Usage("queue", "-w/--nodelist: " + expanded.status().message());
        }
        for (std::string& n : *expanded) {
          if (n == "localhost") {  // as squeue: this host's name
            char host[256] = {};
            gethostname(host, sizeof host - 1);
            n = Split(host, '.', true).empty() ? host : Split(host, '.', true)[0];
          }
          nodes.push_back(n);
        }
        break;
      }
      case 'S':
        sort = optarg;
        sort_given = true;
        break;
      case 'i': {
        auto n = ParseUint(optarg);
        if (!n || *n == 0 || *n > 86400) {
          return Usage("queue", "-i/--iterate: '" + std::string(optarg) +
                                    "' is not a number of seconds (1 to 86400)");
        }
        iterate_s = *n;
        break;
      }
      case 's':
        steps = true;
        if (optarg) step_list = optarg;
        break;
      case 'M':
        clusters = optarg;
        break;
      case 'v':
        verbose = true;
        break;
      case 'V':
        std::printf("slurm %s\nmuster %s\n", kSlurmCompatVersion, kVersion);
        return kExitOk;
      case kOptMe:
        req.add_users(CurrentUserName());
        break;
      case 'l':
        long_view = true;
        break;
      case 'a':
        if (!squeue) req.set_include_finished(true);
        break;
      case 'P':  // pending jobs once per partition: a job here has one partition in the list
      case kOptFederation:
      case kOptLocal:
      case kOptSibling:  // no federation: this cluster's jobs are all there are
      case kOptHide:     // no hidden partitions
        break;
      case kOptNoconvert:
        noconvert = true;
        break;
      case kOptYaml:  // the --json document: YAML 1.2 reads JSON as it is
      case kOptJson:
        json = true;
        break;
      case 'H':
      case kOptNoheader:
        header = false;
        break;
      case kOptStart:
        start_view = true;
        break;
      case kOptPriority:
        if (!squeue) priority_view = true;
        break;
      case kOptUsage:
        PrintQueueUsage(prog, squeue);
        return kExitOk;
      case kOptHelp:
        PrintQueueUsage(prog, squeue);
        std::printf(
            "Pending and running jobs%s.\n"
            "  -A, --account=LIST     -n, --name=LIST  -q, --qos=LIST  -R, --reservation=NAME\n"
            "  -p, --partition=LIST   -t, --states=LIST  -u, --user=LIST  --me  -j, --jobs=IDS\n"
            "  -w, --nodelist=HOSTS   only the jobs with these; -L, --licenses=L,L those asking "
            "for\n"
            "                         any of these licenses\n"
            "  -o, --format=FORMAT    squeue's %%[.][WIDTH]LETTER fields, letters %s\n"
            "  -O, --Format=FIELDS    squeue's field names, Name[:[.]WIDTH]\n"
            "  -S, --sort=KEYS        the letters to order by, -KEY descending (e.g. -t,i)\n"
            "  -s, --steps[=LIST]     the running steps (JOBID.STEPID) instead of the jobs\n"
            "  -i, --iterate=SECONDS  list again every SECONDS until interrupted\n"
            "  -r, --array            one row per job array task (--array-unique: the same)\n"
            "  -l, --long  -v  %s  --noconvert  --json  --yaml\n"
            "  --start     pending jobs and their expected start times\n",
            squeue ? "" : " (with --all also those finished recently)", kSqueueLetters,
            squeue ? "-h/--noheader" : "--noheader");
        if (!squeue) {
          std::printf("  --priority  pending jobs' priorities and normalised factors (sprio -n)\n");
        }
        return kExitOk;
      case ':':
        return Usage("queue", "option '" + std::string(argv[optind - 1]) + "' needs a value");
      default:
        return Usage("queue",
                     "unknown or incomplete option '" + std::string(argv[optind - 1]) + "'");
    }
  }
  // As squeue: -s (its value optional) takes its list from the next word.
  if (steps && step_list.empty() && optind < argc) step_list = argv[optind++];
  if (optind < argc)
    return Usage("queue", "unexpected argument '" + std::string(argv[optind]) + "'");
  std::vector<StepRef> step_refs;
  if (!step_list.empty()) {
    auto parsed = ParseStepRefs(step_list);
    if (!parsed.ok()) return Usage("queue", parsed.status().message());
    step_refs = std::move(*parsed);
    for (const StepRef& r : step_refs) req.add_job_ids(r.job);
  }
  if (start_view && !steps) {
    // As squeue --start: these columns, by expected start, pending jobs; each unless given.
    if (format.empty()) {
      format = kSqueueStartFormat;
      long_format = false;
    }
    if (!sort_given) sort = "S";
    if (!states.named) {
      auto pd = ParseStateFilter("PD");
      if (pd.ok()) states = std::move(*pd);
    }
  }
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
  // squeue's default format, unless -o/-O gave one.
  const char* default_format = steps       ? kSqueueStepFormat
                               : long_view ? kSqueueLongFormat
                                           : kSqueueDefaultFormat;
  auto items = format.empty() ? ParseSqueueFormat(default_format, steps)
               : long_format  ? ParseSqueueLongFormat(format, steps)
                              : ParseSqueueFormat(format, steps);
  if (!items.ok()) return Usage("queue", items.status().message());
  // -S: squeue's keys for jobs (an unknown one is an error); for steps, as squeue, the keys
  // that do not apply to steps order nothing.
  std::string step_inert;
  for (char c = 'A'; c <= 'z'; ++c) {
    if (std::isalpha(static_cast<unsigned char>(c)) &&
        std::string_view(kSqueueStepSortLetters).find(c) == std::string_view::npos) {
      step_inert += c;
    }
  }
  auto sort_keys =
      steps ? ParseSortKeys(sort, std::string(kSqueueStepSortLetters) + step_inert, step_inert)
            : ParseSortKeys(sort, kSqueueSortLetters, kSqueueInertSortLetters);
  if (!sort_keys.ok()) return Usage("queue", sort_keys.status().message());
  if (steps && !sort_given) sort_keys = std::vector<SortKey>{{'P', false}, {'i', false}};
  bool full_sort = false;
  for (const SortKey& k : *sort_keys) full_sort |= k.letter == 'm' || k.letter == 'U';

  const std::set<std::string> want_nodes(nodes.begin(), nodes.end());
  auto on_node = [&](const std::string& n) { return want_nodes.count(n) > 0; };
  auto wanted = [&](const v1::JobInfo& j) {
    if (!RefsMatch(refs, j) || !states.Matches(j)) return false;
    if (!licenses.empty() && std::none_of(licenses.begin(), licenses.end(), [&](const auto& l) {
          for (const std::string& held : Split(j.licenses(), ',', true)) {
            if (held.substr(0, held.find(':')) == l) return true;
          }
          return false;
        })) {
      return false;
    }
    // The controller sends the jobs named with -j even once they ended; squeue, as Slurm's,
    // lists none of those without -t.
    if (squeue && !states.named && !states.all && !InSqueueDefaultStates(j)) return false;
    if (!names.empty() && !InIgnoringCase(names, j.name())) return false;
    if (!accounts.empty() && !InIgnoringCase(accounts, j.account())) return false;
    if (!qos.empty() && !InIgnoringCase(qos, j.qos().empty() ? "normal" : j.qos())) return false;
    if (!reservations.empty() && std::find(reservations.begin(), reservations.end(),
                                           j.reservation()) == reservations.end()) {
      return false;
    }
    return want_nodes.empty() || std::any_of(j.nodes().begin(), j.nodes().end(), on_node);
  };
  auto controller = ConnectController(clusters);
  if (!controller.ok()) return Fail("queue", controller.status());
  SqueueContext ctx;
  ctx.noconvert = noconvert;
  const bool cluster_field = std::any_of(
      items->begin(), items->end(), [](const FormatItem& f) { return f.letter == kFieldCluster; });
  if ((squeue && json) || !clusters.empty() || cluster_field) {
    if (auto config = LoadConfig(ResolveConfigPath("")); config.ok()) {
      ctx.cluster = config->cluster_name;
    }
  }
  req.set_brief(!json && !priority_view && !steps && !full_sort && !NeedsFullListing(*items));
  if (json) {
    // Streamed: each job is written as it is parsed, in pieces of about 64 KiB. As squeue, in
    // the shape (and with the field names) of Slurm's own --json; as muster queue, Muster's.
    JsonWriter w;
    if (squeue) {
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
        SlurmJobJson(w, j, ctx.cluster);
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
  if (priority_view) {
    auto jobs = controller->ListJobs(req);
    if (!jobs.ok()) return Fail("queue", jobs.status());
    auto* rows = jobs->mutable_jobs();
    rows->erase(std::remove_if(rows->begin(), rows->end(),
                               [&](const v1::JobInfo& j) { return !wanted(j); }),
                rows->end());
    std::fputs(PriorityView(*jobs, header).c_str(), stdout);
    return kExitOk;
  }

  // The running jobs' steps (-s), in squeue's step rows.
  auto list_steps = [&](std::string& out) -> Status {
    std::vector<v1::JobInfo> jobs;
    Status listed = controller->ListJobsEach(req, [&](const v1::JobInfo& j) {
      if ((j.state() == v1::RUNNING || j.state() == v1::SUSPENDED) && RefsMatch(refs, j))
        jobs.push_back(j);
    });
    if (!listed.ok()) return listed;
    std::vector<StepRow> rows;
    for (const v1::JobInfo& j : jobs) {
      std::vector<StepRow> of_job;
      if (!j.interactive()) of_job.push_back({&j, nullptr});
      for (const v1::StepRecord& s : j.steps()) {
        if (s.state() == v1::RUNNING) of_job.push_back({&j, &s});
      }
      for (const StepRow& r : of_job) {
        const bool on =
            want_nodes.empty() ||
            (r.step ? std::any_of(r.step->nodes().begin(), r.step->nodes().end(),
                                  [&](const v1::NodeAllocation& na) { return on_node(na.node()); })
                    : j.nodes_size() > 0 && on_node(j.nodes(0)));
        if (on && StepRefsMatch(step_refs, r)) rows.push_back(r);
      }
    }
    SortRows<StepRow>(rows, *sort_keys, [&](char letter, const StepRow& r) {
      return SqueueStepSortValue(letter, r, ctx.now_ms);
    });
    auto line = [&](const StepRow* r) {
      RenderLine(
          *items,
          [&](char letter) {
            return r ? SqueueStepField(letter, *r, ctx.now_ms) : SqueueStepHeader(letter);
          },
          /*trim=*/false, out);
    };
    if (header) line(nullptr);
    for (const StepRow& r : rows) line(&r);
    return Status::Ok();
  };

  // The jobs. Without -S rows are rendered as they stream in, pending jobs first; with it they
  // are gathered and ordered. A job array's pending tasks (consecutive in id order) make one
  // row unless -r asks for one each.
  struct JobRow {
    v1::JobInfo job;
    RowId id;
  };
  auto list_jobs = [&](std::string& out) -> Status {
    std::string others;
    std::vector<JobRow> pending_rows, other_rows;
    const bool sorting = !sort_keys->empty();
    if (header) RenderSqueue(*items, nullptr, {}, ctx, out);
    auto emit = [&](const v1::JobInfo& j, RowId id) {
      const bool pending = j.state() == v1::PENDING;
      if (sorting) {
        (pending ? pending_rows : other_rows).push_back({j, std::move(id)});
      } else {
        RenderSqueue(*items, &j, id, ctx, pending ? out : others);
      }
    };
    v1::JobInfo group;  // the first pending task of the array being collapsed
    std::vector<uint32_t> group_tasks;
    auto flush_group = [&] {
      if (group_tasks.empty()) return;
      emit(group, CollapsedRowId(group, group_tasks));
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
      emit(j, RowIdOf(j));
    });
    flush_group();
    if (!listed.ok()) return listed;
    if (!sorting) {
      out += others;
      return Status::Ok();
    }
    std::vector<JobRow> rows = std::move(pending_rows);
    rows.insert(rows.end(), std::make_move_iterator(other_rows.begin()),
                std::make_move_iterator(other_rows.end()));
    SortRows<JobRow>(rows, *sort_keys, [&](char letter, const JobRow& r) {
      return SqueueSortValue(letter, r.job, ctx.now_ms);
    });
    for (const JobRow& r : rows) RenderSqueue(*items, &r.job, r.id, ctx, out);
    return Status::Ok();
  };

  if (iterate_s > 0) {
    struct sigaction stop = {};
    stop.sa_handler = OnStopSignal;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, nullptr);
    sigaction(SIGTERM, &stop, nullptr);
  }
  std::string out;
  out.reserve(1 << 20);  // no regrowth copies for the usual queue
  for (;;) {
    ctx.now_ms = SystemClock::Get()->NowMs();
    out.clear();
    // As squeue: the time of the listing above -l, -i and -v ones; the cluster's name with -M.
    if (header && (long_view || iterate_s > 0 || verbose)) out += ListingTime(ctx.now_ms);
    if (header && !clusters.empty()) out += "CLUSTER: " + ctx.cluster + "\n";
    Status listed = steps ? list_steps(out) : list_jobs(out);
    if (g_stop) return kExitOk;
    if (!listed.ok() && iterate_s == 0) return Fail("queue", listed);
    if (!listed.ok()) Fail("queue", listed);  // squeue -i goes on after a failed listing
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (iterate_s == 0) return kExitOk;
    // As squeue -i: a blank line, then the next listing.
    std::fputc('\n', stdout);
    std::fflush(stdout);
    SleepUnlessStopped(iterate_s);
    if (g_stop) return kExitOk;
  }
}

}  // namespace muster::cli
