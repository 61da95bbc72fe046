// sinfo: partitions and nodes in sinfo's layouts (`muster nodes` keeps Muster's own view).
#include <getopt.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "cli.h"
#include "format_spec.h"
#include "muster/common/config.h"
#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

// sinfo's short (%t) and long (%T) state names.
std::string ShortState(const v1::NodeInfo& n) {
  const bool busy = n.state() == v1::NODE_MIXED || n.state() == v1::NODE_ALLOCATED;
  if (n.drain()) return n.state() == v1::NODE_DOWN ? "down" : busy ? "drng" : "drain";
  switch (n.state()) {
    case v1::NODE_IDLE:
      // An idle node in an active advance reservation (as Slurm's: busy nodes say so instead).
      if (!n.reservation().empty()) return n.maint() ? "maint" : "resv";
      return "idle";
    case v1::NODE_MIXED:
      return "mix";
    case v1::NODE_ALLOCATED:
      return "alloc";
    case v1::NODE_NOT_RESPONDING:
      return "idle*";
    case v1::NODE_DOWN:
      return "down";
    default:
      return "unk";
  }
}

std::string LongState(const v1::NodeInfo& n) {
  const bool busy = n.state() == v1::NODE_MIXED || n.state() == v1::NODE_ALLOCATED;
  if (n.drain()) return n.state() == v1::NODE_DOWN ? "down" : busy ? "draining" : "drained";
  switch (n.state()) {
    case v1::NODE_IDLE:
      if (!n.reservation().empty()) return n.maint() ? "maint" : "reserved";
      return "idle";
    case v1::NODE_MIXED:
      return "mixed";
    case v1::NODE_ALLOCATED:
      return "allocated";
    case v1::NODE_NOT_RESPONDING:
      return "idle*";
    case v1::NODE_DOWN:
      return "down";
    default:
      return "unknown";
  }
}

// One output line: a group of nodes of one partition (one node with -N).
struct Row {
  std::string partition;
  bool is_default = false;
  int64_t max_time_ms = 0;
  std::vector<const v1::NodeInfo*> nodes;
  std::string features;  // of its nodes, from the configuration ("" when none)
};

// A node that answers (Slurm's "responding"): registered and heard from.
bool Responding(const v1::NodeInfo& n) {
  return n.state() != v1::NODE_DOWN && n.state() != v1::NODE_NOT_RESPONDING &&
         n.state() != v1::NODE_UNKNOWN;
}

std::string Field(char letter, const Row& r) {
  const v1::NodeInfo& n = *r.nodes.front();
  uint32_t alloc = 0, total = 0;
  for (const auto* x : r.nodes) {
    alloc += x->cpus_allocated();
    total += x->cpus();
  }
  std::vector<std::string> names;
  for (const auto* x : r.nodes) names.push_back(x->name());
  switch (letter) {
    case 'P':
      return r.partition + (r.is_default ? "*" : "");
    case 'R':
      return r.partition;
    case 'a':
      return "up";
    case 'l':
      return r.max_time_ms > 0 ? FormatDuration(r.max_time_ms) : "infinite";
    case 'D':
      return std::to_string(r.nodes.size());
    case 't':
      return ShortState(n);
    case 'T':
      return LongState(n);
    case 'N':
      return CompressHostlist(names);
    case 'n':
      return CompressHostlist(names);
    case 'c':
      return std::to_string(n.cpus());
    case 'C': {
      uint32_t other = 0;
      for (const auto* x : r.nodes) {
        if (x->drain() || x->state() == v1::NODE_DOWN) other += x->cpus() - x->cpus_allocated();
      }
      return std::to_string(alloc) + "/" + std::to_string(total - alloc - other) + "/" +
             std::to_string(other) + "/" + std::to_string(total);
    }
    case 'G':
      return n.gpus() ? "gpu:" + (n.gpu_type().empty() ? "" : n.gpu_type() + ":") +
                            std::to_string(n.gpus())
                      : "(null)";
    case 'm':
      return std::to_string(n.memory_mb());
    case 'e':
      return std::to_string(n.memory_mb() - n.memory_allocated_mb());
    case 'O':
      return "N/A";
    case 'E':
      return n.reason().empty() ? "none" : n.reason();
    case 'f':
      return r.features.empty() ? "(null)" : r.features;
    case 'F': {
      // Nodes allocated/idle/other/total, as sinfo -s shows them.
      size_t busy = 0, idle = 0, other = 0;
      for (const auto* x : r.nodes) {
        if (x->drain() || !Responding(*x)) {
          ++other;
        } else if (x->state() == v1::NODE_MIXED || x->state() == v1::NODE_ALLOCATED) {
          ++busy;
        } else {
          ++idle;
        }
      }
      return std::to_string(busy) + "/" + std::to_string(idle) + "/" + std::to_string(other) + "/" +
             std::to_string(r.nodes.size());
    }
    default:
      return "";
  }
}

const char* Header(char letter) {
  switch (letter) {
    case 'P':
    case 'R':
      return "PARTITION";
    case 'a':
      return "AVAIL";
    case 'l':
      return "TIMELIMIT";
    case 'D':
      return "NODES";
    case 't':
    case 'T':
      return "STATE";
    case 'N':
      return "NODELIST";
    case 'n':
      return "HOSTNAMES";
    case 'c':
      return "CPUS";
    case 'C':
      return "CPUS(A/I/O/T)";
    case 'G':
      return "GRES";
    case 'm':
      return "MEMORY";
    case 'e':
      return "FREE_MEM";
    case 'O':
      return "CPU_LOAD";
    case 'E':
      return "REASON";
    case 'f':
      return "AVAIL_FEATURES";
    case 'F':
      return "NODES(A/I/O/T)";
    default:
      return "";
  }
}

// The -o letters sinfo supports here.
constexpr char kSinfoLetters[] = "PRalDtTNncCGmeOEfF";

}  // namespace

int CmdSinfo(int argc, char** argv) {
  enum { kJson = 1000 };
  const struct option opts[] = {{"Node", no_argument, nullptr, 'N'},
                                {"noheader", no_argument, nullptr, 'h'},
                                {"format", required_argument, nullptr, 'o'},
                                {"partition", required_argument, nullptr, 'p'},
                                {"nodes", required_argument, nullptr, 'n'},
                                {"states", required_argument, nullptr, 't'},
                                {"list-reasons", no_argument, nullptr, 'R'},
                                {"long", no_argument, nullptr, 'l'},
                                {"json", no_argument, nullptr, kJson},
                                {"summarize", no_argument, nullptr, 's'},
                                {"responding", no_argument, nullptr, 'r'},
                                {"dead", no_argument, nullptr, 'd'},
                                {"exact", no_argument, nullptr, 'e'},
                                {"help", no_argument, nullptr, 'H'},
                                {nullptr, 0, nullptr, 0}};
  bool node_view = false, header = true, reasons = false, json = false;
  bool summarize = false, responding = false, dead = false;
  std::string format;
  std::set<std::string> parts, names, states;
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":Nho:p:n:t:Rlsrde", opts, nullptr)) != -1;) {
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
      case 'p':
        for (const auto& p : Split(val, ',', true)) parts.insert(p);
        break;
      case 'n': {
        auto expanded = ExpandHostlist(val);
        if (!expanded.ok()) return Usage("sinfo", expanded.status().message());
        names.insert(expanded->begin(), expanded->end());
        break;
      }
      case 't':
        for (auto s : Split(val, ',', true)) {
          for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          states.insert(s == "mixed" ? "mix" : s == "allocated" ? "alloc" : s);
        }
        break;
      case 'R':
        reasons = true;
        break;
      case 'l':
        break;  // the long form adds columns Muster has no values for; same view
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
        break;  // rows already group only nodes in the same state
      case kJson:
        json = true;
        break;
      case 'H':
        std::printf(
            "Usage: sinfo [-N] [-s] [-h] [-o FORMAT] [-p PARTITIONS] [-n NODES] [-t STATES] "
            "[-R] [-r | -d] [-e] [--json]\n");
        return kExitOk;
      case ':':
        return Usage("sinfo", std::string("option ") + argv[optind - 1] + " needs a value");
      default:
        return Usage("sinfo", std::string("option ") + argv[optind - 1] + " is not supported");
    }
  }
  if (json) {
    // Muster's node view carries everything sinfo --json would (schema: docs/user-guide.md).
    std::vector<std::string> args = {"nodes", "--json"};
    std::vector<char*> a;
    for (auto& s : args) a.push_back(s.data());
    return CmdNodes(static_cast<int>(a.size()), a.data());
  }
  auto config = LoadConfig(ResolveConfigPath(""));
  if (!config.ok()) return Fail("sinfo", config.status());
  auto controller = client::ControllerClient::ConnectTo(*config);
  if (!controller.ok()) return Fail("sinfo", controller.status());
  auto resp = controller->ListNodes(v1::ListNodesRequest());
  if (!resp.ok()) return Fail("sinfo", resp.status());
  std::map<std::string, const v1::NodeInfo*> by_name;
  for (const auto& n : resp->nodes()) by_name[n.name()] = &n;
  auto wanted = [&](const v1::NodeInfo& n) {
    if (!names.empty() && !names.count(n.name())) return false;
    if ((responding && !Responding(n)) || (dead && Responding(n))) return false;
    if (!states.empty() && !states.count(ShortState(n)) && !states.count(LongState(n))) {
      return false;
    }
    return true;
  };

  if (reasons) {
    // sinfo -R: drained and down nodes with why, grouped by reason.
    std::map<std::string, std::vector<const v1::NodeInfo*>> groups;
    for (const auto& n : resp->nodes()) {
      if (!wanted(n) || (!n.drain() && n.state() != v1::NODE_DOWN)) continue;
      groups[n.reason() + "\x1f" + n.reason_user() + "\x1f" + std::to_string(n.reason_time_ms())]
          .push_back(&n);
    }
    std::string out = header ? "REASON               USER      TIMESTAMP           NODELIST\n" : "";
    for (const auto& [key, nodes] : groups) {
      std::vector<std::string> list;
      for (const auto* n : nodes) list.push_back(n->name());
      const auto* n = nodes.front();
      out += Left(n->reason().empty() ? "none" : n->reason(), 20) + " " +
             Left(n->reason_user().empty() ? "muster" : n->reason_user(), 9) + " " +
             Left(n->reason_time_ms() ? FormatTimestamp(n->reason_time_ms()) : "Unknown", 19) +
             " " + CompressHostlist(list) + "\n";
    }
    std::fputs(out.c_str(), stdout);
    return kExitOk;
  }

  if (format.empty()) {
    format = summarize   ? "%9P %.5a %.10l %.16F  %N"
             : node_view ? "%N %.6D %P %6t"
                         : "%9P %.5a %.10l %.6D %.6t %N";
  }
  auto items = ParseFormatSpec(format, kSinfoLetters);
  if (!items.ok()) return Usage("sinfo", items.status().message());
  const bool shows_features = std::any_of(items->begin(), items->end(),
                                          [](const FormatItem& i) { return i.letter == 'f'; });
  std::map<std::string, std::string> features;  // node -> its features, from the configuration
  for (const NodeConfig& nc : config->nodes) features[nc.name] = Join(nc.features, ",");
  std::vector<Row> rows;
  for (const PartitionConfig& p : config->partitions) {
    if (!parts.empty() && !parts.count(p.name)) continue;
    std::map<std::string, size_t> group;  // state -> row (partition view)
    for (const auto& name : p.nodes) {
      auto it = by_name.find(name);
      if (it == by_name.end() || !wanted(*it->second)) continue;
      // -s: one row per partition; else one per state (and features, when shown), or per node
      // with -N: as sinfo, nodes share a row when what the row prints is the same.
      const std::string key =
          node_view   ? name
          : summarize ? std::string()
                      : ShortState(*it->second) + "\n" + (shows_features ? features[name] : "");
      auto [g, fresh] = group.try_emplace(key, rows.size());
      if (fresh) rows.push_back({p.name, p.is_default, p.max_time_ms, {}, features[name]});
      rows[g->second].nodes.push_back(it->second);
    }
  }
  std::string out;
  if (header)
    RenderLine(
        *items, [](char l) { return std::string(Header(l)); }, true, out);
  for (const Row& r : rows)
    RenderLine(
        *items, [&](char l) { return Field(l, r); }, true, out);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace muster::cli
