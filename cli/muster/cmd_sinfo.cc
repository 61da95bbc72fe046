// sinfo: partitions and nodes in sinfo's layouts (`muster nodes` keeps Muster's own view). The
// command: its options, which nodes it asks for and keeps, -i and -T; the layouts and rows
// themselves are sinfo_format.h's.
#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli.h"
#include "format_spec.h"
#include "muster/common/config.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "output.h"
#include "sinfo_format.h"

namespace muster::cli {
namespace {

// Whether `n` is in the state -t names (lower case; checked by ParseStates). As Slurm's: idle is
// an idle node without flags (not drained, not reserved), the other base states ignore flags.
bool InState(const v1::NodeInfo& n, const std::string& s) {
  if (s == "alloc" || s == "allocated") return n.state() == v1::NODE_ALLOCATED;
  if (s == "mix" || s == "mixed") return n.state() == v1::NODE_MIXED;
  if (s == "idle") {
    return (n.state() == v1::NODE_IDLE || n.state() == v1::NODE_NOT_RESPONDING) && !n.drain() &&
           n.reservation().empty();
  }
  if (s == "down") return n.state() == v1::NODE_DOWN;
  if (s == "drain") return n.drain();
  if (s == "drained" || s == "draining") return SinfoLongState(n) == s;
  if (s == "no_respond") return n.state() == v1::NODE_NOT_RESPONDING;
  if (s == "resv" || s == "reserved") return !n.reservation().empty();
  if (s == "maint") return n.maint();
  if (s == "unk" || s == "unknown") return n.state() == v1::NODE_UNKNOWN;
  return false;  // a state Muster's nodes are never in (cloud, future, power_down, ...)
}

// -t/--states: STATE[,STATE] (any of them) or STATE&STATE (all of them), in any case; "all".
struct StateSpec {
  std::vector<std::string> states;
  bool all_of = false;
};
Result<StateSpec> ParseStates(const std::string& list) {
  static const std::set<std::string> kKnown = {"alloc",         "allocated",
                                               "cloud",         "comp",
                                               "completing",    "down",
                                               "drain",         "drained",
                                               "draining",      "fail",
                                               "future",        "futr",
                                               "idle",          "maint",
                                               "mix",           "mixed",
                                               "no_respond",    "npc",
                                               "perfctrs",      "planned",
                                               "power_down",    "powering_down",
                                               "powered_down",  "powering_up",
                                               "reboot_issued", "reboot_requested",
                                               "resv",          "reserved",
                                               "unk",           "unknown"};
  StateSpec spec;
  if (ToLower(list) == "all") return spec;  // every state: no filter
  spec.all_of = list.find('&') != std::string::npos;
  for (const std::string& s : Split(ToLower(list), spec.all_of ? '&' : ',', true)) {
    if (!kKnown.count(s)) return InvalidArgument("-t/--states: no node state '" + s + "'");
    spec.states.push_back(s);
  }
  if (spec.states.empty()) return InvalidArgument("-t/--states needs a node state");
  return spec;
}

// "Sun Nov 22 09:25:17 2026": the line above the header with -l and -i.
std::string DateLine() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a %b %e %H:%M:%S %Y", &tm);
  return buf;
}

// sinfo -T: the reservations, in sinfo's own layout.
int ReservationReport(client::ControllerClient& controller, bool header) {
  v1::ListReservationsResponse resp;
  if (Status st =
          controller.Call(v1::METHOD_LIST_RESERVATIONS, v1::ListReservationsRequest(), &resp);
      !st.ok()) {
    return Fail("sinfo", st);
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::string out =
      header ? "RESV_NAME     STATE           START_TIME             END_TIME     DURATION  "
               "NODELIST\n"
             : "";
  auto pad = [](const std::string& s, size_t width, bool right) {
    const std::string fill(s.size() < width ? width - s.size() : 0, ' ');
    return right ? fill + s : s + fill;
  };
  for (const auto& r : resp.reservations()) {
    const bool active = r.start_ms() <= now && now < r.end_ms();
    std::string line = pad(r.name(), 10, false) + " " +
                       pad(active ? "ACTIVE" : "INACTIVE", 8, true) + "  " +
                       pad(FormatTimestamp(r.start_ms()), 19, true) + "  " +
                       pad(FormatTimestamp(r.end_ms()), 19, true) + "  " +
                       pad(FormatHms(r.end_ms() - r.start_ms()), 11, true) + "  " +
                       CompressHostlist({r.nodes().begin(), r.nodes().end()});
    AppendPrintable(out, line);
    out += '\n';
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

constexpr const char* kSinfoUsage =
    "Usage: sinfo [-adelNrsTv] [-i SECONDS] [-t STATES] [-p PARTITIONS] [-n NODES] [-S FIELDS]\n"
    "             [-o FORMAT | -O FIELDS] [-M CLUSTER] [--json]\n";

}  // namespace

int CmdSinfo(int argc, char** argv) {
  enum {
    kJson = 1000,
    kYaml,
    kHide,
    kFederation,
    kLocal,
    kNoconvert,
    kUsage,
  };
  const struct option opts[] = {{"Node", no_argument, nullptr, 'N'},
                                {"noheader", no_argument, nullptr, 'h'},
                                {"format", required_argument, nullptr, 'o'},
                                {"Format", required_argument, nullptr, 'O'},
                                {"partition", required_argument, nullptr, 'p'},
                                {"nodes", required_argument, nullptr, 'n'},
                                {"states", required_argument, nullptr, 't'},
                                {"list-reasons", no_argument, nullptr, 'R'},
                                {"long", no_argument, nullptr, 'l'},
                                {"json", no_argument, nullptr, kJson},
                                {"yaml", no_argument, nullptr, kYaml},
                                {"summarize", no_argument, nullptr, 's'},
                                {"responding", no_argument, nullptr, 'r'},
                                {"dead", no_argument, nullptr, 'd'},
                                {"exact", no_argument, nullptr, 'e'},
                                {"all", no_argument, nullptr, 'a'},
                                {"hide", no_argument, nullptr, kHide},
                                {"iterate", required_argument, nullptr, 'i'},
                                {"sort", required_argument, nullptr, 'S'},
                                {"reservation", no_argument, nullptr, 'T'},
                                {"clusters", required_argument, nullptr, 'M'},
                                {"federation", no_argument, nullptr, kFederation},
                                {"local", no_argument, nullptr, kLocal},
                                {"noconvert", no_argument, nullptr, kNoconvert},
                                {"verbose", no_argument, nullptr, 'v'},
                                {"version", no_argument, nullptr, 'V'},
                                {"usage", no_argument, nullptr, kUsage},
                                {"help", no_argument, nullptr, 'H'},
                                {nullptr, 0, nullptr, 0}};
  bool node_view = false, header = true, reasons = false, json = false, long_form = false;
  bool summarize = false, responding = false, dead = false, exact = false, reservations = false;
  std::string format, long_format, clusters;
  int iterate_s = 0;
  std::vector<std::string> sort;
  std::set<std::string> parts, names;
  StateSpec states;
  optind = 0;
  opterr = 0;
  for (int c;
       (c = getopt_long(argc, argv, ":Nho:O:p:n:t:Rlsrdeai:S:TM:vV", opts, nullptr)) != -1;) {
    const std::string val = optarg ? optarg : "";
    switch (c) {
      case 'N':
        node_view = true;
        break;
      case 'h':
        header = false;
        break;
      case 'o':
        format = val;
        break;
      case 'O':
        long_format = val;
        break;
      case 'p':
        for (const auto& p : Split(val, ',', true)) parts.insert(p);
        break;
      case 'n': {
        auto expanded = ExpandHostlist(val);
        if (!expanded.ok()) return Usage("sinfo", expanded.status().message());
        names.insert(expanded->begin(), expanded->end());
        break;
      }
      case 't': {
        auto parsed = ParseStates(val);
        if (!parsed.ok()) return Usage("sinfo", parsed.status().message());
        states = *parsed;
        break;
      }
      case 'R':
        reasons = true;
        break;
      case 'l':
        long_form = true;
        break;
      case 's':
        summarize = true;
        break;
      case 'r':
        responding = true;
        break;
      case 'd':
        dead = true;
        break;
      case 'e':
        exact = true;
        break;
      case 'i': {
        auto n = ParseUint(val);
        if (!n || *n == 0 || *n > 86'400) {
          return Usage("sinfo",
                       "-i/--iterate needs a number of seconds (1 to 86400), not '" + val + "'");
        }
        iterate_s = static_cast<int>(*n);
        break;
      }
      case 'S': {
        auto keys = ParseSinfoSort(val);
        if (!keys.ok()) return Usage("sinfo", keys.status().message());
        sort = *keys;
        break;
      }
      case 'T':
        reservations = true;
        break;
      case 'M':
        clusters = val;
        break;
      case 'a':          // every partition is always listed: none is hidden
      case kHide:        // no partition is hidden, so none is left out
      case kFederation:  // one cluster, no federation
      case kLocal:       // ...so it is always the local one
      case kNoconvert:   // memory is always printed in megabytes
      case 'v':          // nothing is logged on the way
        break;
      case kJson:
        json = true;
        break;
      case kYaml:
        return Usage("sinfo", "--yaml is not supported: --json gives the same nodes as JSON");
      case 'V':
        std::printf("slurm %s\nmuster %s\n", kSlurmCompatVersion, kVersion);
        return kExitOk;
      case kUsage:
        std::fputs(kSinfoUsage, stdout);
        return kExitOk;
      case 'H':
        std::printf(
            "%s"
            "  -N, --Node          a line per node       -s, --summarize   a line per partition\n"
            "  -l, --long          more columns          -e, --exact       group only equal nodes\n"
            "  -R, --list-reasons  drained and down nodes, why, who and when\n"
            "  -T, --reservation   the reservations\n"
            "  -r, --responding / -d, --dead          nodes that answer / that do not\n"
            "  -t, --states=S[,S]  nodes in those states (S&S: in all of them)\n"
            "  -p, --partition=P   -n, --nodes=NODES   only these\n"
            "  -o, --format=FMT    sinfo's %%LETTER fields (%%all: every one)\n"
            "  -O, --Format=F,...  the same by name (Partition, NodeList, StateLong, ...)\n"
            "  -S, --sort=[+-]F,.. order by fields (#P: as configured)\n"
            "  -i, --iterate=SECS  again every SECS seconds\n"
            "  -h, --noheader      -M, --clusters=NAME   --json\n",
            kSinfoUsage);
        return kExitOk;
      case ':':
        return Usage("sinfo", std::string("option ") + argv[optind - 1] + " needs a value");
      default:
        return Usage("sinfo", std::string("option ") + argv[optind - 1] + " is not supported");
    }
  }
  if (optind < argc) return Usage("sinfo", std::string("unexpected argument ") + argv[optind]);
  // The layout, checked before anything is asked of the cluster. As sinfo's: -o, else -O, else
  // the view's own ("#" is the widest partition or node list, set once the rows are known).
  const bool widest = format.empty() && long_format.empty();
  const std::string layout = widest ? SinfoDefaultFormat({.reasons = reasons,
                                                          .summarize = summarize,
                                                          .node_view = node_view,
                                                          .long_form = long_form})
                                    : format;
  auto with_widths = [&](const std::vector<SinfoRow>& rows) {
    return widest ? SinfoFitWidths(layout, rows) : layout;
  };
  auto items =
      !layout.empty() ? ParseSinfoFormat(with_widths({})) : ParseSinfoLongFormat(long_format);
  if (!items.ok()) return Usage("sinfo", items.status().message());

  auto config = LoadConfig(ResolveConfigPath(""));
  if (!config.ok()) return Fail("sinfo", config.status());
  if (Status st = CheckClusters(clusters, config->cluster_name); !st.ok()) return Fail("sinfo", st);
  if (json) {
    // Muster's node view carries everything sinfo --json would (schema: docs/user-guide.md).
    std::vector<std::string> args = {"nodes", "--json"};
    std::vector<char*> a;
    for (auto& s : args) a.push_back(s.data());
    return CmdNodes(static_cast<int>(a.size()), a.data());
  }
  auto controller = client::ControllerClient::ConnectTo(*config);
  if (!controller.ok()) return Fail("sinfo", controller.status());
  std::map<std::string, std::string> features;  // node -> its features (the controller's)
  for (const NodeConfig& nc : config->nodes) features[nc.name] = Join(nc.features, ",");
  std::set<char> shown;
  for (const FormatItem& i : *items) shown.insert(i.letter);

  for (bool first = true;; first = false) {
    std::string out;
    if (iterate_s && !first) out += "\n";
    if (header && (iterate_s || long_form)) out += DateLine() + "\n";
    if (reservations) {
      std::fputs(out.c_str(), stdout);
      if (int rc = ReservationReport(*controller, header); rc != kExitOk) return rc;
    } else {
      auto resp = controller->ListNodes(v1::ListNodesRequest());
      if (!resp.ok()) return Fail("sinfo", resp.status());
      // The partitions as the controller has them (changed live, or by a reconfiguration that
      // this host's copy of the file has not seen).
      if (Status st = UseControllerPartitions(*controller, &*config); !st.ok()) {
        return Fail("sinfo", st);
      }
      std::map<std::string, const v1::NodeInfo*> by_name;
      for (const auto& n : resp->nodes()) {
        by_name[n.name()] = &n;
        if (n.has_features()) features[n.name()] = n.features();  // as set live
      }
      auto wanted = [&](const v1::NodeInfo& n) {
        if (!names.empty() && !names.count(n.name())) return false;
        if ((responding && !SinfoNodeResponding(n)) || (dead && SinfoNodeResponding(n))) {
          return false;
        }
        if (states.states.empty()) return true;
        for (const std::string& s : states.states) {
          if (InState(n, s) != states.all_of) return !states.all_of;
        }
        return states.all_of;
      };
      std::vector<SinfoRow> rows;
      auto place = [&](const PartitionConfig* part, const v1::NodeInfo& n,
                       std::map<std::string, size_t>& group, const std::string& key) {
        auto [g, fresh] = group.try_emplace(key, rows.size());
        if (fresh) rows.push_back({part, {}, features[n.name()]});
        rows[g->second].nodes.push_back(&n);
      };
      if (reasons) {
        // -R: drained and down nodes grouped by reason (and state with -l), each node once.
        std::map<std::string, size_t> group;
        for (const auto& [name, n] : by_name) {
          if (!wanted(*n) || (!n->drain() && n->state() != v1::NODE_DOWN)) continue;
          if (!parts.empty() &&
              std::none_of(n->partitions().begin(), n->partitions().end(),
                           [&](const std::string& p) { return parts.count(p); })) {
            continue;
          }
          place(nullptr, *n, group, SinfoReasonGroupKey(*n, shown));
        }
      } else {
        for (const PartitionConfig& p : config->partitions) {
          if (!parts.empty() && !parts.count(p.name)) continue;
          std::map<std::string, size_t> group;  // what the row prints -> row
          for (const auto& name : p.nodes) {
            auto it = by_name.find(name);
            if (it == by_name.end() || !wanted(*it->second)) continue;
            place(&p, *it->second, group,
                  node_view ? name : SinfoGroupKey(*it->second, features[name], shown, exact));
          }
        }
      }
      // Rows in partition order (the configuration's); by node name with -N, as sinfo's; or
      // by -S.
      std::vector<std::string> keys = sort;
      if (keys.empty() && node_view) keys = {"+N"};
      SortSinfoRows(rows, keys, *config);
      auto chosen = items;
      if (widest) {
        chosen = ParseSinfoFormat(with_widths(rows));
        if (!chosen.ok()) return Usage("sinfo", chosen.status().message());
      }
      RenderSinfo(*chosen, rows, header, config->cluster_name, out);
      std::fputs(out.c_str(), stdout);
    }
    if (!iterate_s) return kExitOk;
    std::fflush(stdout);
    sleep(static_cast<unsigned>(iterate_s));
  }
}

}  // namespace muster::cli
