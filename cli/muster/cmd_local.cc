// muster local up|down: a test cluster on this machine.
#include <getopt.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli.h"
#include "muster/client/local_cluster.h"
#include "muster/common/strings.h"

namespace muster::cli {
namespace {

void PrintLocalHelp() {
  std::printf(
      "Usage: muster local up [--nodes N] [--gpus-per-node G] [--cpus-per-node C] [--dir "
      "DIR] [--no-tls] [--standby] [--mail-prog PATH]\n"
      "       muster local down [--dir DIR] [--purge]\n"
      "DIR defaults to $MUSTER_LOCAL_DIR or ~/.muster/local. The daemons talk mutual TLS\n"
      "with certificates made in DIR/tls, unless a new cluster is made with --no-tls\n"
      "(development only: each agent proves its node with a key from DIR/node-keys, but\n"
      "nothing is encrypted).\n"
      "--standby: two controllers (ctl-a leads, ctl-b stands by) and an etcd of the\n"
      "cluster's own on loopback, TLS with its own certificates in DIR/etcd-tls (needs\n"
      "Debian's etcd-server).\n"
      "--mail-prog PATH: the controller's mail program for --mail-type (Slurm's MailProg;\n"
      "run as PATH -s SUBJECT RECIPIENT with SLURM_JOB_* set). A cluster made with another\n"
      "one is made anew.\n");
}

}  // namespace

int CmdLocal(int argc, char** argv) {
  if (argc < 2) return Usage("local", "expected 'up' or 'down'");
  std::string action = argv[1];
  if (action == "--help" || action == "-h" || action == "help") {
    PrintLocalHelp();
    return kExitOk;
  }
  client::LocalClusterOptions o;
  bool purge = false;
  const struct option opts[] = {{"nodes", required_argument, nullptr, 'n'},
                                {"gpus-per-node", required_argument, nullptr, 'g'},
                                {"cpus-per-node", required_argument, nullptr, 'c'},
                                {"dir", required_argument, nullptr, 'd'},
                                {"purge", no_argument, nullptr, 'P'},
                                {"no-tls", no_argument, nullptr, 'T'},
                                {"standby", no_argument, nullptr, 'S'},
                                {"mail-prog", required_argument, nullptr, 'M'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc - 1, argv + 1, ":n:g:c:d:h", opts, nullptr)) != -1;) {
    auto num = [&]() -> std::optional<uint32_t> {
      auto v = ParseUint(optarg);
      if (!v || *v > 100000) return std::nullopt;
      return static_cast<uint32_t>(*v);
    };
    switch (c) {
      case 'n': {
        auto v = num();
        if (!v) return Usage("local", "bad --nodes");
        o.nodes = *v;
        break;
      }
      case 'g': {
        auto v = num();
        if (!v) return Usage("local", "bad --gpus-per-node");
        o.gpus_per_node = *v;
        break;
      }
      case 'c': {
        auto v = num();
        if (!v || *v == 0) return Usage("local", "bad --cpus-per-node");
        o.cpus_per_node = *v;
        break;
      }
      case 'd':
        o.dir = optarg;
        break;
      case 'P':
        purge = true;
        break;
      case 'T':
        o.tls = false;
        break;
      case 'S':
        o.standby = true;
        break;
      case 'M':
        o.mail_prog = optarg;
        break;
      case 'h':
        PrintLocalHelp();
        return kExitOk;
      default:
        return Usage("local", "unknown or incomplete option");
    }
  }
  if (optind + 1 < argc)
    return Usage("local", "unexpected argument '" + std::string(argv[optind + 1]) + "'");
  if (action == "up") {
    auto conf = client::LocalUp(o, stderr);
    if (!conf.ok()) return Fail("local up", conf.status());
    std::fprintf(stderr, "local cluster up: %u nodes x %u GPUs (h100), config %s\n", o.nodes,
                 o.gpus_per_node, conf->c_str());
    std::printf("export MUSTER_CONF=%s\n", conf->c_str());
    return kExitOk;
  }
  if (action == "down") {
    Status s = client::LocalDown(o.dir, purge, stderr);
    if (!s.ok()) return Fail("local down", s);
    return kExitOk;
  }
  return Usage("local", "unknown action '" + action + "' (up or down)");
}

}  // namespace muster::cli
