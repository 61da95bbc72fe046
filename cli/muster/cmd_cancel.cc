// muster cancel (scancel): cancel jobs, or send them a signal, by id or by selection.
#include <getopt.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cli.h"
#include "muster/common/hostlist.h"
#include "muster/common/job_limits.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

// scancel -i: asks on the terminal whether to act on `j`; yes only for an answer that starts
// with y or Y (n, N or the end of input: no).
bool Confirm(const v1::JobInfo& j, bool signal) {
  for (;;) {
    std::printf("%s job_id=%s name=%s partition=%s [y/n]? ", signal ? "Signal" : "Cancel",
                JobIdText(j).c_str(), Printable(j.name()).c_str(),
                Printable(j.partition()).c_str());
    std::fflush(stdout);
    char line[256];
    if (!std::fgets(line, sizeof line, stdin)) {
      std::printf("\n");
      return false;
    }
    if (line[0] == 'y' || line[0] == 'Y') return true;
    if (line[0] == 'n' || line[0] == 'N') return false;
  }
}

}  // namespace

int CmdCancel(int argc, char** argv) {
  const struct option opts[] = {{"signal", required_argument, nullptr, 's'},
                                {"batch", no_argument, nullptr, 'b'},
                                {"full", no_argument, nullptr, 'f'},
                                {"user", required_argument, nullptr, 'u'},
                                {"name", required_argument, nullptr, 'n'},
                                {"jobname", required_argument, nullptr, 'n'},
                                {"state", required_argument, nullptr, 't'},
                                {"partition", required_argument, nullptr, 'p'},
                                {"nodelist", required_argument, nullptr, 'w'},
                                {"quiet", no_argument, nullptr, 'Q'},
                                {"help", no_argument, nullptr, 'h'},
                                {"usage", no_argument, nullptr, 'h'},
                                {"account", required_argument, nullptr, 'A'},
                                {"qos", required_argument, nullptr, 'q'},
                                {"reservation", required_argument, nullptr, 'R'},
                                {"me", no_argument, nullptr, 'm'},
                                {"wckey", required_argument, nullptr, 'W'},
                                {"hurry", no_argument, nullptr, 'H'},
                                {"ctld", no_argument, nullptr, 'C'},
                                {"verbose", no_argument, nullptr, 'v'},
                                {"clusters", required_argument, nullptr, 'c'},
                                {"sibling", required_argument, nullptr, 'S'},
                                {"interactive", no_argument, nullptr, 'i'},
                                {nullptr, 0, nullptr, 0}};
  v1::CancelJobRequest req;
  std::vector<std::string> users, names, partitions, nodelist, accounts, qos, reservations;
  bool wckey = false;  // --wckey: Muster's jobs have none, so it selects no job
  std::vector<v1::JobState> states;
  bool quiet = false, interactive = false;
  std::string clusters;
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":s:bfu:n:t:p:w:QhA:q:R:HviM:", opts, nullptr)) != -1;) {
    const std::string val = optarg ? optarg : "";
    switch (c) {
      case 's': {
        int sig = ParseSignalName(val);
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
      case 'A':
        for (const auto& a : Split(val, ',', true)) accounts.push_back(a);
        break;
      case 'q':
        for (const auto& q : Split(val, ',', true)) qos.push_back(q);
        break;
      case 'R':
        for (const auto& r : Split(val, ',', true)) reservations.push_back(r);
        break;
      case 'm':  // --me
        users.push_back(CurrentUserName());
        break;
      case 'W':
        wckey = true;
        break;
      case 'H':  // --hurry: no burst buffer stage-out to skip
      case 'C':  // --ctld: every request goes to the controller anyway
      case 'v':
        break;
      case 'M':
      case 'c':
        clusters = val;
        break;
      case 'S':
        return Usage("cancel",
                     "--sibling: Muster has no federation, so no sibling job to remove from it");
      case 'i':
        interactive = true;
        break;
      case 'h':
        std::printf(
            "Usage: %s [OPTIONS] [JOBID...]\n"
            "  -s, --signal=SIG     send SIG (USR1, 10, ...) to the jobs' steps instead of "
            "cancelling\n"
            "  -b, --batch          ... to the batch script only;  -f, --full: to every process\n"
            "  -u, --user=U  --me  -n, --name=NAME  -t, --state=S  -p, --partition=P\n"
            "  -w, --nodelist=N  -A, --account=A  -q, --qos=Q  -R, --reservation=R  --wckey=W\n"
            "                       select jobs (with ids: those of them that match)\n"
            "  -i, --interactive    ask before each job    -M, --clusters=NAME: this cluster\n"
            "  -Q, --quiet          no error for a job that is not there\n",
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
                         !partitions.empty() || !nodelist.empty() || !accounts.empty() ||
                         !qos.empty() || !reservations.empty() || wckey;
  bool tasks_named = false;  // 7_3: resolved to the task's own job id below
  for (const JobRef& r : refs) tasks_named |= !r.tasks.empty();
  if (refs.empty() && !selecting) return Usage("cancel", "no job id given");
  auto controller = ConnectController(clusters);
  if (!controller.ok()) return Fail("cancel", controller.status());
  bool declined = false;  // -i: a job was not confirmed
  if (selecting || tasks_named || interactive) {
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
    auto in = [](const std::vector<std::string>& wanted, const std::string& v) {
      return wanted.empty() || std::find(wanted.begin(), wanted.end(), v) != wanted.end();
    };
    std::set<std::string> want_nodes(nodelist.begin(), nodelist.end());
    for (const auto& j : found->jobs()) {
      if (!RefsMatch(refs, j)) continue;
      if (!want_names.empty() && !want_names.count(j.name())) continue;
      if (wckey || !in(accounts, j.account()) || !in(qos, j.qos()) ||
          !in(reservations, j.reservation())) {
        continue;
      }
      if (!want_nodes.empty()) {
        bool on = false;
        for (const auto& n : j.nodes()) on |= want_nodes.count(n) > 0;
        if (!on) continue;
      }
      if (j.state() != v1::PENDING && j.state() != v1::RUNNING && j.state() != v1::SUSPENDED)
        continue;
      if (interactive && !Confirm(j, req.signal() != 0)) {
        declined = true;
        continue;
      }
      req.add_single_job_ids(j.id());
    }
    if (req.single_job_ids_size() == 0) {
      // Nothing matched: scancel is silent, but names a task that does not exist.
      if (!selecting && !declined && FrontEnd() == "scancel" && !quiet) {
        std::fprintf(stderr,
                     "scancel: error: Kill job error on job id %s: Invalid job id specified\n",
                     argv[optind]);
      }
      return kExitOk;
    }
  } else {
    for (const JobRef& r : refs) req.add_job_ids(r.id);
  }
  // The controller takes at most kMaxJobIdsPerRequest ids at a time (scancel -u of a user with
  // 50,000 jobs is sent in parts).
  v1::CancelJobResponse all;
  const size_t total = static_cast<size_t>(req.job_ids_size() + req.single_job_ids_size());
  for (size_t from = 0; from < total; from += kMaxJobIdsPerRequest) {
    v1::CancelJobRequest part = req;
    part.clear_job_ids();
    part.clear_single_job_ids();
    for (size_t i = from; i < std::min(total, from + kMaxJobIdsPerRequest); ++i) {
      const int n = req.job_ids_size();
      if (i < static_cast<size_t>(n)) {
        part.add_job_ids(req.job_ids(static_cast<int>(i)));
      } else {
        part.add_single_job_ids(req.single_job_ids(static_cast<int>(i) - n));
      }
    }
    auto resp = controller->CancelJob(part);
    if (!resp.ok()) return Fail("cancel", resp.status());
    for (auto& r : *resp->mutable_results()) *all.add_results() = std::move(r);
  }
  int rc = kExitOk;
  for (const auto& r : all.results()) {
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
