#include <getopt.h>

#include "muster/common/config.h"
#include "muster/rpc/controller_server.h"
#include "muster/store/state_store.h"

namespace muster::rpc {

std::string ControllerUsage() {
  return std::string("Usage: musterctld [--config FILE] [--log-level LEVEL] [--name NAME]\n") +
         "       --name NAME   which [[controllers]] entry this controller is (default: the\n"
         "                     host's name)\n" +
         "       musterctld --check-state DIR   verify a state directory (read-only) and exit:\n"
         "                                      0 sound, 1 problems found, 2 unreadable\n" +
         "Config: --config, else $MUSTER_CONF, else " + kDefaultConfigPath + "\n";
}

Result<ControllerCommandLine> ParseControllerCommandLine(int argc, char** argv) {
  ControllerCommandLine cl;
  const struct option opts[] = {{"config", required_argument, nullptr, 'c'},
                                {"log-level", required_argument, nullptr, 'l'},
                                {"version", no_argument, nullptr, 'V'},
                                {"help", no_argument, nullptr, 'h'},
                                {"check-state", required_argument, nullptr, 's'},
                                {"name", required_argument, nullptr, 'n'},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;  // getopt's state is global: start over
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":c:l:Vhs:n:", opts, nullptr)) != -1;) {
    switch (c) {
      case 'c':
        cl.config_path = optarg;
        break;
      case 'l':
        cl.log_level = optarg;
        break;
      case 'V':
        cl.version = true;
        break;
      case 'h':
        cl.help = true;
        break;
      case 's':
        cl.check_state = optarg;
        break;
      case 'n':
        cl.name = optarg;
        break;
      case ':':
        return InvalidArgument(std::string("option ") + argv[optind - 1] + " needs a value");
      default:
        return InvalidArgument(std::string("unknown option ") + argv[optind - 1]);
    }
  }
  if (optind < argc) return InvalidArgument(std::string("unexpected argument ") + argv[optind]);
  return cl;
}

int CheckStateCommand(const std::string& dir, std::FILE* out) {
  auto check = store::CheckStateDir(dir);
  if (!check.ok()) {
    std::fprintf(out, "%s: %s\n", dir.c_str(), check.status().ToString().c_str());
    return 2;
  }
  std::fprintf(out, "state directory %s\n", dir.c_str());
  for (const auto& [family, n] : check->records) {
    std::fprintf(out, "  %-14s %llu record(s)\n", family.c_str(),
                 static_cast<unsigned long long>(n));
  }
  if (check->quarantined > 0) {
    std::fprintf(out, "%llu record(s) quarantined by earlier recoveries (family quarantine)\n",
                 static_cast<unsigned long long>(check->quarantined));
  }
  for (const std::string& p : check->problems) std::fprintf(out, "problem: %s\n", p.c_str());
  std::fprintf(out, "%s\n",
               check->problems.empty()
                   ? "sound"
                   : (std::to_string(check->problems.size()) + " problem(s)").c_str());
  return check->problems.empty() ? 0 : 1;
}

}  // namespace muster::rpc
