#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "cli.h"
#include "muster/common/config.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"

namespace muster::cli {

Result<client::ControllerClient> ConnectController() {
  std::string path = ResolveConfigPath("");
  MUSTER_ASSIGN_OR_RETURN(Config c, LoadConfig(path));
  return client::ControllerClient::ConnectTo(c);
}

Status CheckClusters(const std::string& clusters, const std::string& cluster_name) {
  if (clusters.empty()) return Status::Ok();
  for (const std::string& name : Split(clusters, ',', true)) {
    if (name != cluster_name && name != "all") {
      return InvalidArgument("-M/--clusters: no cluster '" + name + "' (this is '" + cluster_name +
                             "'; Muster serves one cluster)");
    }
  }
  return Status::Ok();
}

namespace {

// The cluster's config, read once per command: a submission needs its defaults and the
// controller's address, and reading the file is most of what a front end spends before it
// connects. Read again only when MUSTER_CONF names another file.
const Result<Config>& ClusterConfig() {
  static std::string path;
  static std::optional<Result<Config>> config;
  const std::string now = ResolveConfigPath("");
  if (!config || now != path) {
    path = now;
    config = LoadConfig(now);
  }
  return *config;
}

}  // namespace

void ApplyClusterDefaults(client::SubmitContext* ctx) {
  const Result<Config>& c = ClusterConfig();
  if (!c.ok()) return;
  ctx->propagate_default = c->scheduling.propagate_resource_limits;
  ctx->propagate_except = c->scheduling.propagate_resource_limits_except;
}

Result<client::ControllerClient> ConnectController(const std::string& clusters) {
  const Result<Config>& c = ClusterConfig();
  if (!c.ok()) return c.status();
  MUSTER_RETURN_IF_ERROR(CheckClusters(clusters, c->cluster_name));
  return client::ControllerClient::ConnectTo(*c);
}

namespace {
// Set when `muster` runs under a Slurm command's name: messages then look like that command's.
std::string g_front_end;
}  // namespace

const std::string& FrontEnd() { return g_front_end; }

std::string ProgramName(const std::string& cmd) {
  return g_front_end.empty() ? "muster " + cmd : g_front_end;
}

int Fail(const std::string& cmd, const Status& s) {
  if (!g_front_end.empty()) {
    std::fprintf(stderr, "%s: error: %s\n", g_front_end.c_str(), s.message().c_str());
  } else {
    std::fprintf(stderr, "muster %s: %s\n", cmd.c_str(), s.message().c_str());
  }
  return kExitFailed;
}

int Usage(const std::string& cmd, const std::string& message) {
  const std::string prog = ProgramName(cmd);
  std::fprintf(stderr, "%s: %s%s\nTry '%s --help'.\n", prog.c_str(),
               g_front_end.empty() ? "" : "error: ", message.c_str(), prog.c_str());
  return kExitUsage;
}

// The Slurm commands `muster` answers to when a link by that name points at it.
const std::vector<std::string>& FrontEnds() {
  static const std::vector<std::string> names = {
      "sbatch",   "srun",     "salloc", "squeue", "sinfo",   "sacct", "scancel",
      "scontrol", "sacctmgr", "sshare", "sprio",  "sreport", "sdiag"};
  return names;
}

namespace {

void PrintHelp() {
  std::printf(R"(muster %s: GPU cluster batch scheduler.

Usage: muster COMMAND [OPTIONS]

Jobs:
  submit [OPTIONS] [SCRIPT [ARGS]]   submit a batch job (sbatch options and #SBATCH lines)
  queue [OPTIONS]                    list pending and running jobs
  job show ID [--json]               one job in detail
  cancel ID...                       cancel jobs
  run [OPTIONS] COMMAND [ARGS]       a job step: inside a job on its nodes; outside one in an
                                     allocation of its own (srun)
  alloc [OPTIONS] [COMMAND]          get an allocation and run COMMAND (a shell) in it (salloc)
  acct [OPTIONS]                     finished and live jobs with their steps (sacct)
  control show|update|create|delete|hold|release|requeue ...   scontrol's commands
  explain JOB [--json]               why a job waits, and what would let it start

Nodes:
  nodes [--json]                     list nodes
  node drain NODES --reason TEXT     stop placing work on nodes (operators, admins)
  node resume NODES                  undo a drain (operators, admins)
  node confirm-down NODES            lost nodes are off for good: jobs requeued from them may
                                     start elsewhere (admins)
  node reboot NODES|ALL [--asap] [--next-state resume|down] [--reason TEXT]
                                     reboot once their jobs end (admins; --asap: drain first)
  node cancel-reboot NODES           drop a reboot not yet issued (admins)
  node update NODES [--features L] [--weight N] [--gres G]
                                     features, weight and GRES set live (admins)
  node reset NODES [--features] [--weight] [--gres]   back to the config file's (admins)
  partition list|create|update|delete|reset   partitions, changed live beside the config
                                     file (admins; scontrol create|update|delete partition)
  audit [--since TIME] [--user U]    what admins and operators did (admins, operators)

Accounts:
  account add|modify|remove|list     the account tree jobs charge (-A); changes: admins
  user add|modify|remove|list        users' accounts and default account; changes: admins
  qos add|modify|remove|list         QoS: priority, limits, preemption (KEY=VALUE as sacctmgr's)
  quota                              GPU quotas: guaranteed, max, in use, borrowed, lent
  share [-a] [-l] [-A ACCOUNTS]      the fair-share tree: shares, usage, factors (sshare)
  report usage [--start T] [--by ...] GPU- and CPU-hours by account, user and GPU type
  reservation create|update|delete|list|show   advance and maintenance reservations
                                     (changes: admins)

Cluster:
  info                               controller version, epoch and counts
  web                                a one-time address that logs your browser in to the web
                                     view (when the controller serves one)
  diag [-r] [--json]                 what the controller spends its time on (sdiag)
  reconfigure                        the controller reads muster.toml again: partitions, nodes,
                                     limits, accounts, QoS, scheduling (admins)
  local up [--nodes N] [--gpus-per-node G] [--dir DIR] [--no-tls]
                                     start a local test cluster (fake GPUs) and wait for it
  local down [--dir DIR] [--purge]   stop it
  certs [--dir DIR] [--node NAME] [--renew]
                                     the CA and the daemons' TLS certificates
  topology ibnetdiscover FILE        [[nodes]] topology entries from an ibnetdiscover dump
  import-slurm-conf SLURM_CONF [GRES_CONF] [TOPOLOGY_CONF] [-o FILE]
                                     a muster.toml from a site's Slurm configuration, naming
                                     every setting it cannot carry over
  compat install|remove DIR          links named like Slurm's commands (sbatch, srun, salloc,
                                     squeue, sinfo, sacct, scancel, scontrol,
                                     sacctmgr, sshare, sprio, sreport, sdiag)

The cluster is found through $MUSTER_CONF (default /etc/muster/muster.toml).
'muster COMMAND --help' shows a command's options.
)",
              kVersion);
}

}  // namespace

int Main(int argc, char** argv) {
  const char* slash = std::strrchr(argv[0], '/');
  const std::string self = slash ? slash + 1 : argv[0];
  const bool front_end =
      std::find(FrontEnds().begin(), FrontEnds().end(), self) != FrontEnds().end();
  if (front_end && argc > 1 &&
      (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "-V") == 0)) {
    // Slurm's line first, for tools that parse it; then Muster's own.
    std::printf("slurm %s\nmuster %s\n", kSlurmCompatVersion, kVersion);
    return kExitOk;
  }
  if (self == "sbatch") {
    g_front_end = self;
    return CmdSubmit(argc, argv);
  }
  if (self == "squeue") {
    g_front_end = self;
    return CmdQueue(argc, argv);
  }
  if (self == "scancel") {
    g_front_end = self;
    return CmdCancel(argc, argv);
  }
  if (self == "srun") {
    g_front_end = self;
    return CmdRun(argc, argv);
  }
  if (self == "salloc") {
    g_front_end = self;
    return CmdAlloc(argc, argv);
  }
  if (self == "sacct") {
    g_front_end = self;
    return CmdAcct(argc, argv);
  }
  if (self == "sinfo") {
    g_front_end = self;
    return CmdSinfo(argc, argv);
  }
  if (self == "scontrol") {
    g_front_end = self;
    return CmdControl(argc, argv);
  }
  if (self == "sacctmgr") {
    g_front_end = self;
    return CmdSacctmgr(argc, argv);
  }
  if (self == "sshare") {
    g_front_end = self;
    return CmdShare(argc, argv);
  }
  if (self == "sprio") {
    g_front_end = self;
    return CmdSprio(argc, argv);
  }
  if (self == "sreport") {
    g_front_end = self;
    return CmdSreport(argc, argv);
  }
  if (self == "sdiag") {
    g_front_end = self;
    return CmdDiag(argc, argv);
  }
  if (argc < 2) {
    PrintHelp();
    return kExitUsage;
  }
  std::string cmd = argv[1];
  int sub_argc = argc - 1;
  char** sub_argv = argv + 1;
  if (cmd == "submit") return CmdSubmit(sub_argc, sub_argv);
  if (cmd == "queue") return CmdQueue(sub_argc, sub_argv);
  if (cmd == "cancel") return CmdCancel(sub_argc, sub_argv);
  if (cmd == "job") return CmdJob(sub_argc, sub_argv);
  if (cmd == "nodes") return CmdNodes(sub_argc, sub_argv);
  if (cmd == "node") return CmdNode(sub_argc, sub_argv);
  if (cmd == "run") return CmdRun(sub_argc, sub_argv);
  if (cmd == "alloc") return CmdAlloc(sub_argc, sub_argv);
  if (cmd == "acct") return CmdAcct(sub_argc, sub_argv);
  if (cmd == "control") return CmdControl(sub_argc, sub_argv);
  if (cmd == "explain") return CmdExplain(sub_argc, sub_argv);
  if (cmd == "info") return CmdInfo(sub_argc, sub_argv);
  if (cmd == "diag") return CmdDiag(sub_argc, sub_argv);
  if (cmd == "reconfigure") return CmdReconfigure(sub_argc, sub_argv);
  if (cmd == "import-slurm-conf") return CmdImportSlurmConf(sub_argc, sub_argv);
  if (cmd == "local") return CmdLocal(sub_argc, sub_argv);
  if (cmd == "certs") return CmdCerts(sub_argc, sub_argv);
  if (cmd == "audit") return CmdAudit(sub_argc, sub_argv);
  if (cmd == "account") return CmdAccount(sub_argc, sub_argv);
  if (cmd == "qos") return CmdQos(sub_argc, sub_argv);
  if (cmd == "quota") return CmdQuota(sub_argc, sub_argv);
  if (cmd == "user") return CmdUser(sub_argc, sub_argv);
  if (cmd == "share") return CmdShare(sub_argc, sub_argv);
  if (cmd == "report") return CmdReport(sub_argc, sub_argv);
  if (cmd == "reservation") return CmdReservation(sub_argc, sub_argv);
  if (cmd == "partition") return CmdPartition(sub_argc, sub_argv);
  if (cmd == "web") return CmdWeb(sub_argc, sub_argv);
  if (cmd == "topology") return CmdTopology(sub_argc, sub_argv);
  if (cmd == "compat") return CmdCompat(sub_argc, sub_argv);
  if (cmd == "version" || cmd == "--version" || cmd == "-V") {
    std::printf("muster %s\n", kVersion);
    return kExitOk;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    PrintHelp();
    return kExitOk;
  }
  std::fprintf(stderr, "muster: unknown command '%s'\nTry 'muster --help'.\n", cmd.c_str());
  return kExitUsage;
}

}  // namespace muster::cli
