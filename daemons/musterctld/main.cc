// musterctld: the controller daemon. Options -> config -> ControllerServer -> wait for a signal.
#include <getopt.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>

#include "muster/common/config.h"
#include "muster/common/signals.h"
#include "muster/common/version.h"
#include "muster/logging/logging.h"
#include "muster/rpc/controller_server.h"

int main(int argc, char** argv) {
  std::string config_path, log_level;
  const struct option opts[] = {{"config", required_argument, nullptr, 'c'},
                                {"log-level", required_argument, nullptr, 'l'},
                                {"version", no_argument, nullptr, 'V'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "c:l:Vh", opts, nullptr)) != -1;) {
    switch (c) {
      case 'c':
        config_path = optarg;
        break;
      case 'l':
        log_level = optarg;
        break;
      case 'V':
        std::printf("musterctld %s\n", muster::kVersion);
        return 0;
      case 'h':
        std::printf(
            "Usage: musterctld [--config FILE] [--log-level LEVEL]\n"
            "Config: --config, else $MUSTER_CONF, else %s\n",
            muster::kDefaultConfigPath);
        return 0;
      default:
        return 2;
    }
  }
  auto config = muster::LoadConfig(muster::ResolveConfigPath(config_path));
  if (!config.ok()) {
    std::fprintf(stderr, "musterctld: %s\n", config.status().message().c_str());
    return 1;
  }
  const auto& cc = config->controller;
  auto log =
      muster::InitLogging("musterctld", log_level.empty() ? cc.log_level : log_level, cc.log_file);
  if (!log.ok()) {
    std::fprintf(stderr, "musterctld: %s\n", log.message().c_str());
    return 1;
  }
  spdlog::info("musterctld {} starting with {}", muster::kVersion, config->source);
  muster::BlockTerminationSignals();
  auto server = muster::rpc::ControllerServer::Create({*config});
  muster::Status st = server.ok() ? (*server)->Start() : server.status();
  if (!st.ok()) {
    spdlog::critical("cannot start: {}", st.ToString());
    return 1;
  }
  int sig = muster::WaitForTerminationSignal();
  spdlog::info("signal {}: shutting down", sig);
  (*server)->Shutdown();
  return 0;
}
