// `muster diag` and sdiag: what the controller spends its time on. For each kind of work (an
// API method, an agent message, a scheduling pass) the count and the time from arrival to done,
// queueing included. The layout is Muster's own (Slurm's sdiag lists other counters).
#include <getopt.h>

#include <algorithm>
#include <cstdio>

#include "cli.h"
#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

void PrintDiagHelp(const std::string& prog) {
  std::printf(
      "Usage: %s [-a] [-r] [-i|-t|-T] [-M CLUSTER] [--json]\n"
      "What the controller spends its time on, per API method, agent message and scheduling\n"
      "pass: count, and mean, p50, p99 and max time from arrival to done (microseconds); and\n"
      "who stores the most job scripts and environments (admins and operators see the top\n"
      "ten users, anyone else their own use).\n"
      "  -a, --all             everything (the default)\n"
      "  -r, --reset           start the counts again (admins)\n"
      "  -i, --sort-by-id      the table by kind (the default)\n"
      "  -t, --sort-by-time    ... by total time, the most first\n"
      "  -T, --sort-by-time2   ... by mean time, the longest first\n"
      "  -M, --cluster=NAME    this cluster's name (Muster serves one)\n"
      "  --json                as JSON\n",
      prog.c_str());
}

void PrintJson(const v1::DiagnosticsResponse& d) {
  JsonWriter w;
  w.BeginObject();
  w.Key("now_ms").Int(d.now_ms()).Key("start_time_ms").Int(d.start_time_ms());
  w.Key("since_ms").Int(d.since_ms()).Key("epoch").Uint(d.epoch());
  w.Key("nodes").Uint(d.nodes()).Key("nodes_responding").Uint(d.nodes_responding());
  w.Key("jobs_pending").Uint(d.jobs_pending()).Key("jobs_running").Uint(d.jobs_running());
  w.Key("records_quarantined").Uint(d.records_quarantined());
  w.Key("store_space_problem").String(d.store_space_problem());
  w.Key("replicating").Bool(d.replicating()).Key("standbys_in_sync").BeginArray();
  for (const std::string& s : d.standbys_in_sync()) w.String(s);
  w.EndArray();
  w.Key("last_change").Uint(d.last_change()).Key("standbys").BeginArray();
  for (const auto& s : d.standbys()) {
    w.BeginObject().Key("name").String(s.name()).Key("in_sync").Bool(s.in_sync());
    w.Key("acked_change").Uint(s.acked_change()).Key("last_ack_ms").Int(s.last_ack_ms());
    w.EndObject();
  }
  w.EndArray();
  w.Key("store_bytes_total").Uint(d.store_bytes_total()).Key("store_users").BeginArray();
  for (const auto& u : d.store_users()) {
    w.BeginObject().Key("user").String(u.user()).Key("bytes").Uint(u.bytes());
    w.Key("submissions").Uint(u.submissions()).EndObject();
  }
  w.EndArray();
  const v1::SchedulerStats& s = d.scheduler();
  w.Key("scheduler").BeginObject().Key("passes").Uint(s.passes());
  w.Key("jobs_started").Uint(s.jobs_started()).Key("jobs_backfilled").Uint(s.jobs_backfilled());
  w.Key("forecasts").Uint(s.forecasts()).Key("last_considered").Uint(s.last_considered());
  w.Key("last_reservations").Uint(s.last_reservations());
  w.Key("preemptions").Uint(s.preemptions()).EndObject();
  w.Key("timings").BeginArray();
  for (const auto& t : d.timings()) {
    w.BeginObject().Key("kind").String(t.kind()).Key("count").Uint(t.count());
    w.Key("mean_us").Double(t.mean_us()).Key("p50_us").Double(t.p50_us());
    w.Key("p99_us").Double(t.p99_us()).Key("max_us").Double(t.max_us()).EndObject();
  }
  w.EndArray().EndObject();
  std::printf("%s\n", w.str().c_str());
}

void PrintText(const v1::DiagnosticsResponse& d) {
  std::printf("Controller time   %s\n", FormatTimestamp(d.now_ms()).c_str());
  std::printf("Started           %s (epoch %llu)\n", FormatTimestamp(d.start_time_ms()).c_str(),
              static_cast<unsigned long long>(d.epoch()));
  std::printf("Counts since      %s\n", FormatTimestamp(d.since_ms()).c_str());
  std::printf("Nodes             %u (%u with an agent session)\n", d.nodes(), d.nodes_responding());
  std::printf("Jobs              %u pending, %u running\n", d.jobs_pending(), d.jobs_running());
  std::printf("Quarantined       %u record(s) at this start's recovery\n", d.records_quarantined());
  std::printf("State store       %s\n",
              d.store_space_problem().empty() ? "room to write" : d.store_space_problem().c_str());
  if (d.replicating()) {
    std::string names;
    for (const std::string& s : d.standbys_in_sync()) names += (names.empty() ? "" : ", ") + s;
    std::printf("Standbys in sync  %s\n",
                names.empty() ? "none (no other controller may take over now)" : names.c_str());
    for (const auto& s : d.standbys()) {
      const uint64_t behind =
          d.last_change() > s.acked_change() ? d.last_change() - s.acked_change() : 0;
      std::printf("  %-15s %s, has change %llu (%llu behind), last acknowledged %.1f s ago\n",
                  Printable(s.name()).c_str(), s.in_sync() ? "in sync" : "not in sync",
                  static_cast<unsigned long long>(s.acked_change()),
                  static_cast<unsigned long long>(behind),
                  static_cast<double>(d.now_ms() - s.last_ack_ms()) / 1000.0);
    }
  }
  // Scripts and environments of jobs not yet archived: who fills the store.
  auto size = [](uint64_t bytes) {
    char buf[32];
    if (bytes < (1u << 20)) {
      std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
    } else {
      std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    }
    return std::string(buf);
  };
  std::printf("Stored scripts    %s in all\n", size(d.store_bytes_total()).c_str());
  for (const auto& u : d.store_users()) {
    std::printf("  %-15s %12s in %llu submission(s)\n", Printable(u.user()).c_str(),
                size(u.bytes()).c_str(), static_cast<unsigned long long>(u.submissions()));
  }
  // sdiag's "Backfilling stats", in Muster's words; the passes' times are in the table below.
  const v1::SchedulerStats& s = d.scheduler();
  auto n = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf(
      "Scheduler         %llu passes since the start, %llu jobs started, %llu of them "
      "backfilled, %llu preempted\n",
      n(s.passes()), n(s.jobs_started()), n(s.jobs_backfilled()), n(s.preemptions()));
  std::printf("Last pass         %u pending jobs looked at, %u reservations (backfill depth)\n",
              s.last_considered(), s.last_reservations());
  std::printf("\n");
  std::printf("%-28s %10s %10s %10s %10s %12s\n", "KIND", "COUNT", "MEAN_US", "P50_US", "P99_US",
              "MAX_US");
  for (const auto& t : d.timings()) {
    std::printf("%-28s %10llu %10.0f %10.0f %10.0f %12.0f\n", t.kind().c_str(),
                static_cast<unsigned long long>(t.count()), t.mean_us(), t.p50_us(), t.p99_us(),
                t.max_us());
  }
}

// sdiag's -i (by kind, the default), -t (total time, the most first) and -T (mean time, the
// longest first).
void SortTimings(char order, google::protobuf::RepeatedPtrField<v1::ServiceTiming>* timings) {
  auto time = [order](const v1::ServiceTiming& t) {
    return order == 't' ? t.mean_us() * static_cast<double>(t.count()) : t.mean_us();
  };
  std::stable_sort(timings->begin(), timings->end(),
                   [&](const v1::ServiceTiming& a, const v1::ServiceTiming& b) {
                     return order == 'i' ? a.kind() < b.kind() : time(a) > time(b);
                   });
}

}  // namespace

int CmdDiag(int argc, char** argv) {
  const std::string prog = ProgramName("diag");
  bool reset = false, json = false;
  char order = 'i';  // the table's: by kind, by total time (t) or by mean time (T)
  std::string clusters;
  const struct option opts[] = {{"reset", no_argument, nullptr, 'r'},
                                {"all", no_argument, nullptr, 'a'},
                                {"sort-by-id", no_argument, nullptr, 'i'},
                                {"sort-by-time", no_argument, nullptr, 't'},
                                {"sort-by-time2", no_argument, nullptr, 'T'},
                                {"cluster", required_argument, nullptr, 'M'},
                                {"clusters", required_argument, nullptr, 'M'},
                                {"json", no_argument, nullptr, 'J'},
                                {"help", no_argument, nullptr, 'H'},
                                {"usage", no_argument, nullptr, 'H'},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":raitTM:", opts, nullptr)) != -1;) {
    switch (c) {
      case 'r':
        reset = true;
        break;
      case 'a':  // everything is what sdiag shows anyway
        break;
      case 'i':
      case 't':
      case 'T':
        order = static_cast<char>(c);
        break;
      case 'M':
        clusters = optarg;
        break;
      case 'J':
        json = true;
        break;
      case 'H':
        PrintDiagHelp(prog);
        return kExitOk;
      case ':':
        return Usage("diag", std::string("option ") + argv[optind - 1] + " needs a value");
      default:
        return Usage("diag", std::string("option ") + argv[optind - 1] + " is not supported");
    }
  }
  if (optind < argc) return Usage("diag", std::string("unexpected argument ") + argv[optind]);
  auto controller = ConnectController(clusters);
  if (!controller.ok()) return Fail("diag", controller.status());
  auto d = controller->Diagnostics(reset);
  if (!d.ok()) return Fail("diag", d.status());
  SortTimings(order, d->mutable_timings());
  if (json) {
    PrintJson(*d);
  } else {
    PrintText(*d);
    if (reset) std::printf("\nCounts reset.\n");
  }
  return kExitOk;
}

}  // namespace muster::cli
