// muster nodes, muster node drain|resume|confirm-down|reboot|cancel-reboot, muster info
// (muster node update|reset: cmd_node_settings.cc).
#include <cstdio>
#include <optional>

#include "cli.h"
#include "muster/common/duration.h"
#include "muster/common/ibnetdiscover.h"
#include "muster/common/strings.h"
#include "options.h"
#include "output.h"

namespace muster::cli {
namespace {

// sinfo's lower-case state names, with Slurm's suffixes for drain.
std::string NodeStateText(const v1::NodeInfo& n) {
  std::string base;
  switch (n.state()) {
    case v1::NODE_IDLE:
      base = "idle";
      break;
    case v1::NODE_MIXED:
      base = "mixed";
      break;
    case v1::NODE_ALLOCATED:
      base = "allocated";
      break;
    case v1::NODE_NOT_RESPONDING:
      base = "not_responding";
      break;
    case v1::NODE_DOWN:
      base = "down";
      break;
    default:
      base = "unknown";
      break;
  }
  // Slurm's suffixes: @ a reboot waits, ^ it was issued.
  const std::string reboot = n.reboot() == "issued" ? "^" : n.reboot().empty() ? "" : "@";
  if (n.drain()) {
    bool busy = n.state() == v1::NODE_MIXED || n.state() == v1::NODE_ALLOCATED;
    if (n.state() == v1::NODE_DOWN) return "down+drain" + reboot;
    return (busy ? "draining" : "drained") + reboot;
  }
  if (!n.reservation().empty()) base += n.maint() ? "+maint" : "+reserved";
  return base + reboot;
}

const char* LinkName(v1::GpuLinkType t) {
  switch (t) {
    case v1::GPU_LINK_NVLINK:
      return "nvlink";
    case v1::GPU_LINK_NVSWITCH:
      return "nvswitch";
    case v1::GPU_LINK_PCIE_SWITCH:
      return "pcie_switch";
    case v1::GPU_LINK_PCIE_HOST:
      return "pcie_host";
    case v1::GPU_LINK_SYSTEM:
      return "system";
    default:
      return "unknown";
  }
}

}  // namespace

int CmdNodes(int argc, char** argv) {
  bool json = false;
  // A word is refused in its place, so the first bad one is named.
  if (std::optional<int> rc = ReadJsonOption("nodes", "unknown argument", argc, argv,
                                             "Usage: muster nodes [--json]\n", &json)) {
    return *rc;
  }
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("nodes", controller.status());
  auto resp = controller->ListNodes(v1::ListNodesRequest());
  if (!resp.ok()) return Fail("nodes", resp.status());
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("nodes").BeginArray();
    for (const auto& n : resp->nodes()) {
      w.BeginObject().Field("name", n.name()).Field("state", NodeStateText(n));
      if (!n.reservation().empty()) w.Field("reservation", n.reservation());
      w.Field("drain", n.drain()).Field("reason", n.reason()).Field("reason_user", n.reason_user());
      w.Field("drained_by", n.drained_by()).Field("isolation", n.isolation());
      w.Field("reboot", n.reboot());
      w.Key("partitions").BeginArray();
      for (const auto& p : n.partitions()) w.String(p);
      w.EndArray();
      w.Field("cpus", n.cpus()).Field("cpus_allocated", n.cpus_allocated());
      w.Field("memory_mb", n.memory_mb()).Field("memory_allocated_mb", n.memory_allocated_mb());
      w.Field("gpus", n.gpus()).Field("gpus_allocated", n.gpus_allocated());
      w.Field("gpu_type", n.gpu_type()).Field("topology", n.topology());
      w.Field("gres", n.gres()).Field("gres_used", n.gres_used());
      w.Key("features").BeginArray();
      for (const std::string& f : Split(n.features(), ',', /*skip_empty=*/true)) w.String(f);
      w.EndArray();
      w.Field("weight", n.has_features() ? n.weight() : 1u);
      w.Key("live").BeginArray();  // settings set live (muster node update)
      for (const auto& l : n.live()) w.String(l);
      w.EndArray();
      w.Field("topology_source", n.topology_source()).Field("packages", n.packages());
      w.Field("cores", n.cores()).Field("threads", n.threads());
      w.Key("numa_nodes").BeginArray();
      for (const auto& numa : n.numa_nodes()) {
        w.BeginObject().Field("os_index", numa.os_index()).Key("cpus").BeginArray();
        for (uint32_t c : numa.cpus()) w.Uint(c);
        w.EndArray().EndObject();
      }
      w.EndArray();
      w.Key("hcas").BeginArray();
      for (const auto& h : n.hcas()) {
        w.BeginObject().Field("name", h.name()).Field("pci_bus_id", h.pci_bus_id());
        w.Field("numa_node", h.numa_node()).Field("node_guid", h.node_guid());
        w.Key("ports").BeginArray();
        for (const auto& p : h.ports()) {
          w.BeginObject().Field("port", p.port()).Field("state", p.state());
          w.Field("rate_gbps", p.rate_gbps()).Field("link_layer", p.link_layer()).EndObject();
        }
        w.EndArray().EndObject();
      }
      w.EndArray();
      w.Key("pci_gpus").BeginArray();
      for (const auto& g : n.pci_gpus()) {
        w.BeginObject().Field("pci_bus_id", g.pci_bus_id()).Field("numa_node", g.numa_node());
        w.Key("os_devices").BeginArray();
        for (const auto& d : g.os_devices()) w.String(d);
        w.EndArray().EndObject();
      }
      w.EndArray();
      w.Field("last_heartbeat", n.last_heartbeat_ms() / 1000)
          .Field("step_address", n.agent_address());
      w.Key("jobs").BeginArray();
      for (uint64_t id : n.job_ids()) w.Uint(id);
      w.EndArray();
      w.Key("gpu_devices").BeginArray();
      for (const auto& g : n.gpu_devices()) {
        w.BeginObject().Field("index", g.index()).Field("uuid", g.uuid()).Field("model", g.model());
        w.Field("type", g.type())
            .Field("memory_mb", g.memory_mb())
            .Field("numa_node", g.numa_node())
            .Field("socket", g.has_socket() ? int64_t{g.socket()} : int64_t{-1});
        w.Field("pci_bus_id", g.pci_bus_id()).Field("minor", g.minor_number());
        w.Field("cpu_affinity", g.cpu_affinity()).Field("health", g.health());
        w.Field("mig", g.mig_enabled()).Key("mig_devices").BeginArray();
        for (const auto& m : g.mig_devices()) {
          w.BeginObject().Field("index", m.index()).Field("uuid", m.uuid());
          w.Field("profile", m.profile()).Field("memory_mb", m.memory_mb()).EndObject();
        }
        w.EndArray();
        if (!g.fabric_state().empty()) {
          w.Key("fabric").BeginObject().Field("state", g.fabric_state());
          w.Field("cluster_uuid", g.fabric_cluster_uuid()).Field("clique_id", g.fabric_clique_id());
          w.EndObject();
        }
        w.Key("links").BeginArray();
        for (const auto& l : g.links()) {
          w.BeginObject()
              .Field("peer", l.peer_index())
              .Field("type", std::string(LinkName(l.type())));
          w.Field("count", l.count()).EndObject();
        }
        w.EndArray().EndObject();
      }
      w.EndArray();
      w.EndObject();
    }
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::printf("%-12s %-14s %10s %14s %8s %-6s %-14s %-10s %s\n", "NODE", "STATE", "CPUS(A/T)",
              "MEM_MB(A/T)", "GPUS(A/T)", "TYPE", "TOPOLOGY", "PARTITION", "REASON");
  for (const auto& n : resp->nodes()) {
    std::string cpus = std::to_string(n.cpus_allocated()) + "/" + std::to_string(n.cpus());
    std::string mem = std::to_string(n.memory_allocated_mb()) + "/" + std::to_string(n.memory_mb());
    std::string gpus = std::to_string(n.gpus_allocated()) + "/" + std::to_string(n.gpus());
    std::printf("%-12s %-14s %10s %14s %8s %-6s %-14s %-10s %s\n", n.name().c_str(),
                NodeStateText(n).c_str(), cpus.c_str(), mem.c_str(), gpus.c_str(),
                n.gpu_type().empty() ? "-" : n.gpu_type().c_str(), n.topology().c_str(),
                Join({n.partitions().begin(), n.partitions().end()}, ",").c_str(),
                n.reason().c_str());
    // GRES beyond whole GPUs on a line of their own, as sinfo -O Gres,GresUsed would.
    if (!n.gres().empty()) {
      std::printf("%-12s GRES=%s USED=%s\n", "", n.gres().c_str(), n.gres_used().c_str());
    }
  }
  return kExitOk;
}

int CmdNode(int argc, char** argv) {
  if (argc < 3)
    return Usage("node",
                 "expected 'muster node drain NODES --reason TEXT', 'muster node resume NODES', "
                 "'muster node confirm-down NODES', 'muster node reboot NODES [--asap] "
                 "[--next-state resume|down] [--reason TEXT]', 'muster node cancel-reboot "
                 "NODES', 'muster node update NODES [--features LIST] [--weight N] [--gres "
                 "SPEC]' or 'muster node reset NODES [--features] [--weight] [--gres]'");
  std::string action = argv[1];
  if (action == "update" || action == "reset") return CmdNodeSettings(argc, argv);
  v1::UpdateNodeRequest req;
  if (action == "drain") {
    req.set_action(v1::UpdateNodeRequest::DRAIN);
  } else if (action == "resume") {
    req.set_action(v1::UpdateNodeRequest::RESUME);
  } else if (action == "confirm-down") {
    req.set_action(v1::UpdateNodeRequest::CONFIRM_DOWN);
  } else if (action == "reboot") {
    req.set_action(v1::UpdateNodeRequest::REBOOT);
  } else if (action == "cancel-reboot") {
    req.set_action(v1::UpdateNodeRequest::CANCEL_REBOOT);
  } else {
    return Usage("node", "unknown action '" + action +
                             "' (drain, resume, confirm-down, reboot, cancel-reboot, update "
                             "or reset)");
  }
  const bool reboot = req.action() == v1::UpdateNodeRequest::REBOOT;
  std::vector<std::string> names;
  const struct option opts[] = {{"reason", required_argument, nullptr, 'r'},
                                {"asap", no_argument, nullptr, 'a'},
                                {"next-state", required_argument, nullptr, 'n'},
                                {nullptr, 0, nullptr, 0}};
  OptionReader in(argc - 1, argv + 1, "", opts);  // from the action on
  // Node names come in order, options after them still count.
  for (int c; (c = in.Next()) != -1;) {
    if (c == 'r') {
      req.set_reason(optarg);
    } else if (reboot && c == 'a') {
      req.set_asap(true);
    } else if (reboot && c == 'n') {
      const std::string next = ToLower(optarg);
      if (next != "resume" && next != "down") {
        return Usage("node",
                     "--next-state takes resume or down, not '" + std::string(optarg) + "'");
      }
      req.set_next_state(next);
    } else if (c == OptionReader::kWord) {
      names.push_back(in.Word());
    } else {  // not an option of node's, or --reason with nothing after it
      return Usage("node", "unknown option '" + in.Word() + "'");
    }
  }
  if (names.empty()) return Usage("node", "no node names given");
  if (req.action() == v1::UpdateNodeRequest::DRAIN && Trim(req.reason()).empty()) {
    return Usage("node", "a reason is required to drain a node (--reason TEXT)");
  }
  req.set_nodes(Join(names, ","));
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("node", controller.status());
  auto resp = controller->UpdateNode(req);
  if (!resp.ok()) return Fail("node " + action, resp.status());
  return kExitOk;
}

int CmdInfo(int argc, char**) {
  if (argc > 1) return Usage("info", "takes no arguments");
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("info", controller.status());
  auto r = controller->ControllerInfo();
  if (!r.ok()) return Fail("info", r.status());
  std::printf(
      "cluster=%s version=%s epoch=%llu started=%s nodes=%u pending=%u running=%u "
      "next_job_id=%llu\n",
      r->cluster_name().c_str(), r->version().c_str(), static_cast<unsigned long long>(r->epoch()),
      FormatTimestamp(r->start_time_ms()).c_str(), r->nodes(), r->jobs_pending(), r->jobs_running(),
      static_cast<unsigned long long>(r->next_job_id()));
  return kExitOk;
}

// `muster topology ibnetdiscover FILE|-`: the admin's way from the fabric to node topology.
int CmdTopology(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) != "ibnetdiscover") {
    return Usage("topology",
                 "Usage: muster topology ibnetdiscover FILE   (FILE: `ibnetdiscover` output, or - "
                 "for stdin)");
  }
  std::string path = argv[2];
  FILE* in = path == "-" ? stdin : std::fopen(path.c_str(), "r");
  if (!in) {
    std::fprintf(stderr, "muster topology: cannot read %s\n", path.c_str());
    return kExitFailed;
  }
  std::string text;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, in)) > 0;) text.append(buf, n);
  if (in != stdin) std::fclose(in);
  auto fabric = ParseIbnetdiscover(text);
  if (!fabric.ok()) {
    std::fprintf(stderr, "muster topology: %s: %s\n", path.c_str(),
                 fabric.status().message().c_str());
    return kExitFailed;
  }
  std::fputs(IbTopologyConfig(*fabric).c_str(), stdout);
  return kExitOk;
}

}  // namespace muster::cli
