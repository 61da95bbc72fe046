#include "muster/agent/agent_options.h"

#include <getopt.h>

namespace muster::agent {

std::string AgentUsage() {
  return "Usage: musterd [--config FILE] [--name NODE] [--gpu-fixture FILE] [--spool DIR]\n"
         "               [--topology-xml HWLOC_XML] [--gpu-faults FILE] [--probe]\n"
         "               [--boot-id-file FILE]\n"
         "               [--step-address HOST:PORT]\n"
         "               [--controller HOST:PORT[,HOST:PORT...]]\n"
         "               [--log-level LEVEL] [--log-file FILE]\n";
}

Result<AgentCommandLine> ParseAgentCommandLine(int argc, char** argv) {
  AgentCommandLine cl;
  AgentOptions& o = cl.options;
  const struct option opts[] = {{"config", required_argument, nullptr, 'c'},
                                {"name", required_argument, nullptr, 'n'},
                                {"gpu-fixture", required_argument, nullptr, 'g'},
                                {"spool", required_argument, nullptr, 's'},
                                {"topology-xml", required_argument, nullptr, 'x'},
                                {"gpu-faults", required_argument, nullptr, 'F'},
                                {"boot-id-file", required_argument, nullptr, 'B'},
                                {"probe", no_argument, nullptr, 'P'},
                                {"step-address", required_argument, nullptr, 'a'},
                                {"controller", required_argument, nullptr, 'C'},
                                {"log-level", required_argument, nullptr, 'l'},
                                {"log-file", required_argument, nullptr, 'L'},
                                {"version", no_argument, nullptr, 'V'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;  // getopt's state is global: start over (tests parse several command lines)
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":c:n:g:s:x:F:B:Pa:C:l:L:Vh", opts, nullptr)) != -1;) {
    switch (c) {
      case 'c':
        cl.config_path = optarg;
        break;
      case 'n':
        o.node_name = optarg;
        break;
      case 'g':
        o.gpu_fixture = optarg;
        break;
      case 's':
        o.spool_dir = optarg;
        break;
      case 'x':
        o.topology_xml = optarg;
        break;
      case 'F':
        o.gpu_faults = optarg;
        break;
      case 'B':
        o.boot_id_file = optarg;
        break;
      case 'P':
        cl.probe = true;
        break;
      case 'a':
        o.step_address = optarg;
        break;
      case 'C':
        o.controller_address = optarg;
        break;
      case 'l':
        cl.log_level = optarg;
        break;
      case 'L':
        cl.log_file = optarg;
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
  if (optind < argc) {
    return InvalidArgument(std::string("unexpected argument ") + argv[optind]);
  }
  return cl;
}

}  // namespace muster::agent
