#include <getopt.h>

#include "muster/common/config.h"
#include "muster/rpc/controller_server.h"

namespace muster::rpc {

std::string ControllerUsage() {
  return std::string("Usage: musterctld [--config FILE] [--log-level LEVEL]\n") +
         "Config: --config, else $MUSTER_CONF, else " + kDefaultConfigPath + "\n";
}

Result<ControllerCommandLine> ParseControllerCommandLine(int argc, char** argv) {
  ControllerCommandLine cl;
  const struct option opts[] = {{"config", required_argument, nullptr, 'c'},
                                {"log-level", required_argument, nullptr, 'l'},
                                {"version", no_argument, nullptr, 'V'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;  // getopt's state is global: start over
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":c:l:Vh", opts, nullptr)) != -1;) {
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
      case ':':
        return InvalidArgument(std::string("option ") + argv[optind - 1] + " needs a value");
      default:
        return InvalidArgument(std::string("unknown option ") + argv[optind - 1]);
    }
  }
  if (optind < argc) return InvalidArgument(std::string("unexpected argument ") + argv[optind]);
  return cl;
}

}  // namespace muster::rpc
