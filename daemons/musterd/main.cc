// musterd: the node agent. Options -> config -> Agent -> wait for a signal.
#include <getopt.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>

#include "muster/agent/agent.h"
#include "muster/common/config.h"
#include "muster/common/signals.h"
#include "muster/common/version.h"
#include "muster/logging/logging.h"

int main(int argc, char** argv) {
  std::string config_path, log_level, log_file;
  bool probe = false;
  muster::agent::AgentOptions o;
  const struct option opts[] = {{"config", required_argument, nullptr, 'c'},
                                {"name", required_argument, nullptr, 'n'},
                                {"gpu-fixture", required_argument, nullptr, 'g'},
                                {"spool", required_argument, nullptr, 's'},
                                {"topology-xml", required_argument, nullptr, 'x'},
                                {"gpu-faults", required_argument, nullptr, 'F'},
                                {"probe", no_argument, nullptr, 'P'},
                                {"step-address", required_argument, nullptr, 'a'},
                                {"controller", required_argument, nullptr, 'C'},
                                {"log-level", required_argument, nullptr, 'l'},
                                {"log-file", required_argument, nullptr, 'L'},
                                {"version", no_argument, nullptr, 'V'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "c:n:g:s:x:F:Pa:C:l:L:Vh", opts, nullptr)) != -1;) {
    switch (c) {
      case 'c':
        config_path = optarg;
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
      case 'P':
        probe = true;
        break;
      case 'a':
        o.step_address = optarg;
        break;
      case 'C':
        o.controller_address = optarg;
        break;
      case 'l':
        log_level = optarg;
        break;
      case 'L':
        log_file = optarg;
        break;
      case 'V':
        std::printf("musterd %s\n", muster::kVersion);
        return 0;
      case 'h':
        std::printf(
            "Usage: musterd [--config FILE] [--name NODE] [--gpu-fixture FILE] [--spool DIR]\n"
            "               [--topology-xml HWLOC_XML] [--gpu-faults FILE] [--probe]\n"
            "               [--step-address HOST:PORT]\n"
            "               [--controller HOST:PORT]\n"
            "               [--log-level LEVEL] [--log-file FILE]\n");
        return 0;
      default:
        return 2;
    }
  }
  o.config_path = muster::ResolveConfigPath(config_path);
  auto config = muster::LoadConfig(o.config_path);
  if (probe) {
    // Discovery needs no configuration: `musterd --probe` is how a new node's entry is written.
    if (config.ok()) o.config = *config;
    muster::InitLogging("musterd", "warn", "").IgnoreError();
    auto report = muster::agent::Agent::Probe(std::move(o));
    if (!report.ok()) {
      std::fprintf(stderr, "musterd: %s\n", report.status().message().c_str());
      return 1;
    }
    std::fputs(report->c_str(), stdout);
    return 0;
  }
  if (!config.ok()) {
    std::fprintf(stderr, "musterd: %s\n", config.status().message().c_str());
    return 1;
  }
  o.config = *config;
  auto log = muster::InitLogging("musterd", log_level.empty() ? config->agent.log_level : log_level,
                                 log_file);
  if (!log.ok()) {
    std::fprintf(stderr, "musterd: %s\n", log.message().c_str());
    return 1;
  }
  muster::BlockTerminationSignals();
  const bool kill_jobs = o.config.agent.kill_jobs_on_stop;
  auto agent = muster::agent::Agent::Create(std::move(o));
  muster::Status st = agent.ok() ? (*agent)->Start() : agent.status();
  if (!st.ok()) {
    spdlog::critical("cannot start: {}", st.ToString());
    return 1;
  }
  int sig = muster::WaitForTerminationSignal();
  spdlog::info("signal {}: stopping ({})", sig,
               kill_jobs ? "ending the jobs here: kill_jobs_on_stop" : "jobs keep running");
  if (kill_jobs) {
    (*agent)->Shutdown();
  } else {
    (*agent)->Detach();
  }
  return 0;
}
