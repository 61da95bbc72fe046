// `muster reconfigure` and `scontrol reconfigure`: the controller reads its config file again.
// What changed is applied at once (partitions, nodes, limits, accounts, QoS, scheduling); keys
// that only a start sets up are named and kept; a file the controller refuses changes nothing.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli.h"

namespace muster::cli {

int Reconfigure(bool quiet) {
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("reconfigure", controller.status());
  auto r = controller->Reconfigure();
  if (!r.ok()) return Fail("reconfigure", r.status());
  if (!quiet) {
    std::printf("reconfigured from %s: epoch %llu, %s\n", r->source().c_str(),
                static_cast<unsigned long long>(r->epoch()),
                r->changes().empty() ? "nothing changed" : "changes:");
    for (const std::string& c : r->changes()) std::printf("  %s\n", c.c_str());
  }
  for (const std::string& k : r->restart_only()) {
    std::fprintf(stderr,
                 "muster reconfigure: %s changed; it takes effect when musterctld restarts\n",
                 k.c_str());
  }
  return kExitOk;
}

int CmdReconfigure(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf(
          "Usage: muster reconfigure\n"
          "The controller reads its config file again (admins; scontrol reconfigure, SIGHUP and\n"
          "`systemctl reload musterctld` do the same). Partitions, nodes, node features and\n"
          "GRES, limits, accounts, QoS, licenses and the scheduling keys take effect at once;\n"
          "agents register again and report what they run, running jobs go on. A change that\n"
          "would take away what an active job names or holds (its partition, its node, the\n"
          "GPUs it holds) is refused and the running configuration kept. [controller], tls,\n"
          "node_auth, munge and cluster_name take effect at the next start.\n");
      return kExitOk;
    }
    return Usage("reconfigure", std::string("unexpected argument ") + argv[i]);
  }
  return Reconfigure(/*quiet=*/false);
}

}  // namespace muster::cli
