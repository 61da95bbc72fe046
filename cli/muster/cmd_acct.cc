// muster acct (sacct): finished and live jobs with their steps, from the controller's records.
// The command: its options, the selections the controller does not make, its help. What it
// prints is sacct_fields.h's table or sacct_json.h's document.
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <optional>
#include <set>

#include "cli.h"
#include "muster/common/config.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "output.h"
#include "sacct_fields.h"
#include "sacct_json.h"
#include "sacct_time.h"

namespace muster::cli {
namespace {

int64_t NowMs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// The selections the controller does not make, applied to each job it returns.
struct Filters {
  std::vector<std::string> accounts, names, qos, reasons;  // -A, --name, -q, -R
  std::set<std::string> nodes;                             // -N, expanded
  bool wckeys = false;  // -W: no job here has a wckey, so none matches
  std::optional<std::pair<uint64_t, uint64_t>> nnodes, ncpus;  // -i, -I
  std::optional<uint64_t> limit_min, limit_max;                // -k, -K, in minutes
  std::set<gid_t> gids;                                        // -g

  bool Matches(const v1::JobInfo& j) const {
    auto any_of = [](const std::vector<std::string>& list, const std::string& v, bool exact) {
      return list.empty() || std::any_of(list.begin(), list.end(), [&](const std::string& x) {
               return exact ? x == v : EqualsIgnoreCase(x, v);
             });
    };
    auto in = [](const std::optional<std::pair<uint64_t, uint64_t>>& r, uint64_t v) {
      return !r || (v >= r->first && v <= r->second);
    };
    if (wckeys || !any_of(accounts, j.account(), false) || !any_of(names, j.name(), true) ||
        !any_of(qos, j.qos(), false) || !any_of(reasons, j.reason(), false) ||
        !in(nnodes, j.num_nodes()) || !in(ncpus, j.cpus_total())) {
      return false;
    }
    if (!nodes.empty() && std::none_of(j.nodes().begin(), j.nodes().end(),
                                       [&](const auto& n) { return nodes.count(n) > 0; })) {
      return false;
    }
    if (limit_min) {
      // As Slurm: -k alone is that limit; with -K, the range.
      const uint64_t m = LimitMinutes(j.time_limit_ms());
      if (limit_max ? (m < *limit_min || m > *limit_max) : m != *limit_min) return false;
    }
    if (!gids.empty()) {
      const auto* pw = PasswdOf(j.user());
      if (!pw || !gids.count(pw->second)) return false;
    }
    return true;
  }
};

// min[-max] (sacct -i, -I); nullopt when malformed.
std::optional<std::pair<uint64_t, uint64_t>> ParseRange(const std::string& v) {
  const size_t dash = v.find('-');
  auto lo = ParseUint(v.substr(0, dash));
  auto hi = dash == std::string::npos ? lo : ParseUint(v.substr(dash + 1));
  if (!lo || !hi || *lo > *hi) return std::nullopt;
  return std::make_pair(*lo, *hi);
}

std::string AcctUsage(const std::string& prog) {
  return "Usage: " + prog + R"( [OPTIONS]
Jobs and their steps from the controller's records: running, pending and finished ones (kept for
scheduling.accounting_retention_days).

Selection (lists are comma-separated):
  -j, --jobs=ID[.STEP],...     these jobs (any time; ID.STEP selects the job)
  -u, --user, --uid=U,...      these users' jobs, by name or uid (default: your own; root: all)
  -a, --allusers               every user's jobs
  -A, --accounts=A,...   -q, --qos=Q,...   -r, --partition=P,...   --name=NAME,...
  -g, --gid, --group=G,...     jobs of users whose primary group is one of these (name or gid)
  -N, --nodelist=NODES         jobs that ran on any of these nodes (a host list)
  -i, --nnodes=MIN[-MAX]       -I, --ncpus=MIN[-MAX]: by node or CPU count
  -k, --timelimit-min=T        jobs with this time limit; with -K, --timelimit-max=T a range
  -R, --reason=R,...           jobs whose reason is one of these
  -s, --state=S,...            CD, F, CA, TO, NF, PD, R, ... (or the full names)
  -S, --starttime=TIME         jobs not over before TIME (default: midnight today; -j: any)
  -E, --endtime=TIME           jobs submitted before TIME (default: now)
  -W, --wckeys=W,...           selects no job (no job has a wckey here)
  -M, --clusters=NAME          this cluster's name or all
Output:
  -o, --format=F[%[-]W],...    fields (-e lists them; ALL for every one)
  -b, --brief                  JobID,State,ExitCode       -l, --long: sacct's long field list
  -X, --allocations            jobs only, not their batch and job steps
  -T, --truncate               start and end times cut to the -S/-E window
  -n, --noheader   -p, --parsable (a '|' after every field)   -P, --parsable2 (between them)
      --delimiter=TEXT         instead of '|' with -p/-P
      --units=K|M|G|T|P        memory in this unit       --noconvert: memory in MiB as recorded
      --use-local-uid          UID from this machine's passwd database
      --json, --yaml           a JSON document (which is also YAML; schema in docs/user-guide.md)
  -e, --helpformat   -h, --help   --usage   -v, --verbose   -V, --version
TIME: HH:MM[:SS][AM|PM], MMDD[YY][-HH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]], MM.DD[.YY][-...],
YYYY-MM-DD[THH:MM[:SS]], today, midnight, noon, fika, teatime, now[{+|-}N[units]].
Accepted with no effect: -D, -L, --local, --federation, --whole-hetjob (one cluster, job ids
are never reused, no heterogeneous jobs). Refused: -c, -f, -C, -F, -x. -B/--batch-script and
--env-vars print each selected job's script or environment (yours, or any as an admin) while
the controller keeps the job.
)";
}

// sacct -B / --env-vars: each selected job's batch script or environment, as sacct prints them,
// while the controller keeps the job (owners and admins only). Exit 1 if one could not be read.
int PrintScripts(client::ControllerClient& controller, const std::vector<v1::JobInfo>& jobs,
                 bool script) {
  int rc = kExitOk;
  for (const v1::JobInfo& j : jobs) {
    const std::string id = j.has_array() ? std::to_string(j.array().array_job_id()) + "_" +
                                               std::to_string(j.array().task_id())
                                         : std::to_string(j.id());
    v1::GetJobRequest req;
    req.set_job_id(j.id());
    req.set_with_script(script);
    req.set_with_environment(!script);
    std::printf("%s %s%s\n%s\n", script ? "Batch Script for" : "Environment used for", id.c_str(),
                script ? "" : " (must be batch to display)", std::string(80, '-').c_str());
    auto got = controller.GetJob(req);
    if (!got.ok()) {
      std::printf("NONE\n\n");
      std::fprintf(stderr, "%s: error: %s\n", ProgramName("acct").c_str(),
                   got.status().message().c_str());
      rc = 1;
      continue;
    }
    std::string text;
    if (script) {
      text = got->script();
    } else {
      for (const std::string& kv : got->environment()) text += kv + "\n";
    }
    if (!text.empty() && text.back() != '\n') text += '\n';
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
  }
  return rc;
}

}  // namespace

int CmdAcct(int argc, char** argv) {
  enum {
    kJson = 1000,
    kYaml,
    kDelimiter,
    kEnvVars,
    kFederation,
    kLocal,
    kName,
    kNoconvert,
    kUnits,
    kUsage,
    kUseLocalUid,
    kWholeHetjob,
  };
  const struct option opts[] = {{"accounts", required_argument, nullptr, 'A'},
                                {"allclusters", no_argument, nullptr, 'L'},
                                {"allocations", no_argument, nullptr, 'X'},
                                {"allusers", no_argument, nullptr, 'a'},
                                {"associations", required_argument, nullptr, 'x'},
                                {"batch-script", no_argument, nullptr, 'B'},
                                {"brief", no_argument, nullptr, 'b'},
                                {"clusters", required_argument, nullptr, 'M'},
                                {"completion", no_argument, nullptr, 'c'},
                                {"constraints", required_argument, nullptr, 'C'},
                                {"delimiter", required_argument, nullptr, kDelimiter},
                                {"duplicates", no_argument, nullptr, 'D'},
                                {"endtime", required_argument, nullptr, 'E'},
                                {"env-vars", no_argument, nullptr, kEnvVars},
                                {"federation", no_argument, nullptr, kFederation},
                                {"file", required_argument, nullptr, 'f'},
                                {"flags", required_argument, nullptr, 'F'},
                                {"format", required_argument, nullptr, 'o'},
                                {"gid", required_argument, nullptr, 'g'},
                                {"group", required_argument, nullptr, 'g'},
                                {"help", no_argument, nullptr, 'h'},
                                {"helpformat", no_argument, nullptr, 'e'},
                                {"jobs", required_argument, nullptr, 'j'},
                                {"json", no_argument, nullptr, kJson},
                                {"local", no_argument, nullptr, kLocal},
                                {"long", no_argument, nullptr, 'l'},
                                {"name", required_argument, nullptr, kName},
                                {"nnodes", required_argument, nullptr, 'i'},
                                {"ncpus", required_argument, nullptr, 'I'},
                                {"noconvert", no_argument, nullptr, kNoconvert},
                                {"nodelist", required_argument, nullptr, 'N'},
                                {"noheader", no_argument, nullptr, 'n'},
                                {"parsable", no_argument, nullptr, 'p'},
                                {"parsable2", no_argument, nullptr, 'P'},
                                {"partition", required_argument, nullptr, 'r'},
                                {"qos", required_argument, nullptr, 'q'},
                                {"reason", required_argument, nullptr, 'R'},
                                {"starttime", required_argument, nullptr, 'S'},
                                {"state", required_argument, nullptr, 's'},
                                {"timelimit-max", required_argument, nullptr, 'K'},
                                {"timelimit-min", required_argument, nullptr, 'k'},
                                {"truncate", no_argument, nullptr, 'T'},
                                {"uid", required_argument, nullptr, 'u'},
                                {"user", required_argument, nullptr, 'u'},
                                {"units", required_argument, nullptr, kUnits},
                                {"usage", no_argument, nullptr, kUsage},
                                {"use-local-uid", no_argument, nullptr, kUseLocalUid},
                                {"verbose", no_argument, nullptr, 'v'},
                                {"version", no_argument, nullptr, 'V'},
                                {"wckeys", required_argument, nullptr, 'W'},
                                {"whole-hetjob", optional_argument, nullptr, kWholeHetjob},
                                {"yaml", no_argument, nullptr, kYaml},
                                {nullptr, 0, nullptr, 0}};
  View view;
  view.now = NowMs();
  const int64_t now = view.now;
  v1::ListAccountingRequest req;
  StateFilter states;        // -s
  std::vector<JobRef> refs;  // -j, with job array tasks (7_3) filtered here
  Filters filters;
  bool all_users = ::getuid() == 0, noheader = false, allocations = false, json = false;
  bool truncate = false, verbose = false;
  bool batch_script = false;  // -B: each job's batch script instead of the table
  bool env_vars = false;      // --env-vars: each job's environment instead of the table
  int parsable = 0;           // 1: -p, 2: -P
  std::string delimiter = "|", clusters;
  std::string format = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
  if (const char* f = std::getenv("SACCT_FORMAT"); f && *f) format = f;
  std::optional<int64_t> start;
  auto refuse = [](const std::string& option, const std::string& why) {
    return Usage("acct", option + " is not supported: " + why);
  };
  optind = 0;
  opterr = 0;
  for (int c;
       (c = getopt_long(argc, argv, ":A:LXax:BbM:cC:DE:f:F:o:g:hej:li:I:N:npPr:q:R:S:s:K:k:Tu:vVW:",
                        opts, nullptr)) != -1;) {
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
        for (const auto& u : Split(val, ',', true)) {
          // A uid stands for its user's name, which is what the controller selects by.
          std::string name = u;
          if (auto uid = ParseUint(u); uid && *uid <= UINT32_MAX) {
            struct passwd pw, *found = nullptr;
            std::vector<char> buf(16384);
            if (::getpwuid_r(static_cast<uid_t>(*uid), &pw, buf.data(), buf.size(), &found) == 0 &&
                found) {
              name = pw.pw_name;
            }
          }
          req.add_users(name);
        }
        all_users = true;
        break;
      case 'a':
        all_users = true;
        break;
      case 'S':
      case 'E': {
        auto t = ParseAcctTime(val, now);
        if (!t.ok()) {
          return Usage("acct", std::string(c == 'S' ? "-S/--starttime: " : "-E/--endtime: ") +
                                   t.status().message());
        }
        if (c == 'S') {
          start = *t;
        } else {
          req.set_end_ms(*t);
        }
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
      case 'A':
        filters.accounts = Split(val, ',', true);
        break;
      case kName:
        filters.names = Split(val, ',', true);
        break;
      case 'q':
        filters.qos = Split(val, ',', true);
        break;
      case 'R':
        filters.reasons = Split(val, ',', true);
        break;
      case 'N': {
        auto names = ExpandHostlist(val);
        if (!names.ok()) return Usage("acct", "-N/--nodelist: " + names.status().message());
        filters.nodes.insert(names->begin(), names->end());
        break;
      }
      case 'i':
      case 'I': {
        auto range = ParseRange(val);
        const char* name = c == 'i' ? "-i/--nnodes" : "-I/--ncpus";
        if (!range)
          return Usage("acct", std::string(name) + ": expected MIN[-MAX], not '" + val + "'");
        (c == 'i' ? filters.nnodes : filters.ncpus) = range;
        break;
      }
      case 'k':
      case 'K': {
        auto limit = ParseTimeLimit(val);
        if (!limit.ok()) {
          return Usage("acct",
                       std::string(c == 'k' ? "-k/--timelimit-min: " : "-K/--timelimit-max: ") +
                           limit.status().message());
        }
        (c == 'k' ? filters.limit_min : filters.limit_max) = LimitMinutes(*limit);
        break;
      }
      case 'g':
        for (const auto& g : Split(val, ',', true)) {
          if (auto gid = ParseUint(g); gid && *gid <= UINT32_MAX) {
            filters.gids.insert(static_cast<gid_t>(*gid));
            continue;
          }
          struct group gr, *found = nullptr;
          std::vector<char> buf(1 << 16);
          if (::getgrnam_r(g.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || !found) {
            return Usage("acct", "-g/--gid: no group '" + g + "'");
          }
          filters.gids.insert(gr.gr_gid);
        }
        all_users = true;  // as sacct: the group selects whose jobs
        break;
      case 'W':
        filters.wckeys = !Split(val, ',', true).empty();
        break;
      case 'M':
        clusters = val;
        break;
      case 'T':
        truncate = true;
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
      case kDelimiter:
        delimiter = val;
        break;
      case 'o':
        format = val;
        break;
      case 'b':
        format = "JobID,State,ExitCode";
        break;
      case 'l':
        format = kLongFormat;
        break;
      case kUnits:
        if (val.size() != 1 ||
            !std::strchr("KMGTP", std::toupper(static_cast<unsigned char>(val[0])))) {
          return Usage("acct", "--units: expected K, M, G, T or P, not '" + val + "'");
        }
        view.units = static_cast<char>(std::toupper(static_cast<unsigned char>(val[0])));
        break;
      case kNoconvert:
        view.noconvert = true;
        break;
      case kUseLocalUid:
        view.local_uid = true;
        break;
      case 'v':
        verbose = true;
        break;
      case 'D':  // job ids are never reused, and a requeued job keeps one record
      case 'L':  // one cluster: all of them is this one
      case kLocal:
      case kFederation:
        break;
      case kWholeHetjob:
        if (!val.empty() && val != "yes" && val != "no") {
          return Usage("acct", "--whole-hetjob: expected yes or no, not '" + val + "'");
        }
        break;  // no heterogeneous jobs here
      case 'B':
        batch_script = true;
        break;
      case kEnvVars:
        env_vars = true;
        break;
      case 'c':
        return refuse("-c/--completion",
                      "there is no job completion log; sacct reads the controller's records");
      case 'f':
        return refuse("-f/--file",
                      "there is no job completion file; sacct reads the controller's records");
      case 'C':
        return refuse("-C/--constraints",
                      "the controller's accounting replies do not carry a job's constraints");
      case 'F':
        return refuse("-F/--flags", "which scheduling pass started a job is not recorded");
      case 'x':
        return refuse("-x/--associations",
                      "associations have no numeric ids here (select with -A and -u)");
      case 'e': {
        // Four to a line in columns, as sacct lists them.
        std::string out;
        size_t n = 0, last = 0;
        for (const Field& f : Fields()) {
          if (!f.value) continue;
          if (n > 0)
            out +=
                n % 4 == 0 ? std::string("\n") : std::string(20 - std::min<size_t>(19, last), ' ');
          out += f.name;
          last = f.name.size();
          ++n;
        }
        out += '\n';
        std::fwrite(out.data(), 1, out.size(), stdout);
        return kExitOk;
      }
      case kJson:
      case kYaml:  // JSON is YAML too (a flow-style document)
        json = true;
        break;
      case 'h':
        std::fputs(AcctUsage(ProgramName("acct")).c_str(), stdout);
        return kExitOk;
      case kUsage:
        std::printf(
            "Usage: %s [-A accts] [-a] [-b] [-E end] [-e] [-g gids] [-j jobs] [-l] [-N nodes]\n"
            "       [-n] [-o fields] [-P|-p] [-q qos] [-r partitions] [-S start] [-s states]\n"
            "       [-T] [-u users] [-X]   (--help describes them)\n",
            ProgramName("acct").c_str());
        return kExitOk;
      case 'V':
        std::printf("slurm %s\nmuster %s\n", kSlurmCompatVersion, kVersion);
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
    req.set_start_ms(start ? *start : *ParseAcctTime("today", now));
  } else if (start) {
    req.set_start_ms(*start);
  }
  const bool needs_steps = std::any_of(columns->begin(), columns->end(), [](const Column& c) {
    return c.field->name == "DerivedExitCode";
  });
  req.set_without_steps(allocations && !json && !needs_steps);
  // What the controller cannot filter by (COMPLETING, states no job is in) is filtered here.
  if (states.ServerSide()) {
    for (v1::JobState s : states.states) req.add_states(s);
  }
  const bool wants_cluster = std::any_of(
      columns->begin(), columns->end(), [](const Column& c) { return c.field->name == "Cluster"; });
  if (wants_cluster) {
    auto config = LoadConfig(ResolveConfigPath(""));
    if (!config.ok()) return Fail("acct", config.status());
    view.cluster = config->cluster_name;
  }
  auto controller = ConnectController(clusters);
  if (!controller.ok()) return Fail("acct", controller.status());
  const int64_t window_start = req.start_ms(), window_end = req.end_ms() > 0 ? req.end_ms() : now;
  if (verbose) {
    std::fprintf(stderr, "%s: jobs not over before %s and submitted before %s\n",
                 ProgramName("acct").c_str(),
                 window_start > 0 ? FormatTimestamp(window_start).c_str() : "the first job",
                 req.end_ms() > 0 ? FormatTimestamp(window_end).c_str() : "now");
  }
  auto resp = controller->ListAccounting(req);
  if (!resp.ok()) return Fail("acct", resp.status());
  std::vector<v1::JobInfo> jobs;
  for (const v1::JobInfo& j : resp->jobs()) {
    if (RefsMatch(refs, j) && states.Matches(j) && filters.Matches(j)) jobs.push_back(j);
  }
  if (batch_script || env_vars) return PrintScripts(*controller, jobs, batch_script);
  if (json) {
    PrintSacctJson(jobs, now);
    return kExitOk;
  }
  std::string out;
  auto line = [&](const std::function<std::string(const Column&)>& cell) {
    for (size_t i = 0; i < columns->size(); ++i) {
      const Column& c = (*columns)[i];
      if (parsable) {
        AppendPrintable(out, cell(c));  // a job's name or path is shown, never obeyed
        if (parsable == 1 || i + 1 < columns->size()) out += delimiter;
      } else {
        out += Fit(Printable(cell(c)), c.width, c.left);
        out += ' ';
      }
    }
    out += '\n';
  };
  if (!noheader) {
    line([](const Column& c) { return c.field->name; });
    if (!parsable) line([](const Column& c) { return std::string(c.width, '-'); });
  }
  for (const v1::JobInfo& j : jobs) {
    for (Row& r : RowsOf(j, allocations)) {
      if (truncate && r.start_ms > 0) {
        // Only the part inside the -S/-E window counts (its elapsed and CPU time too).
        if (r.end_ms <= 0 || r.end_ms > window_end) r.end_ms = window_end;
        r.start_ms = std::min(std::max(r.start_ms, window_start), r.end_ms);
      }
      line([&](const Column& c) { return c.field->value(r, view); });
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

}  // namespace muster::cli
