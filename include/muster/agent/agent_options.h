// What a musterd is told: its configuration, its identity and where it keeps its state, the
// hardware fixtures of a test or local cluster, and the seams that tests replace.
#pragma once

#include <memory>
#include <string>

#include "muster/agent/controller_link.h"
#include "muster/agent/launcher.h"
#include "muster/common/config.h"
#include "muster/common/status.h"

namespace muster::agent {

struct AgentOptions {
  Config config;
  std::string config_path;   // exported to jobs as MUSTER_CONF
  std::string node_name;     // default: the host name
  std::string gpu_fixture;   // fake GPUs from this file instead of NVML
  std::string topology_xml;  // CPU/PCI layout from this hwloc XML instead of the machine
  std::string gpu_faults;    // fixture mode: injected GPU faults (default spool/gpu-faults)
  // This host's boot id (a reboot changes it). Tests and fixtures: a file a stand-in reboot
  // program rewrites.
  std::string boot_id_file = "/proc/sys/kernel/random/boot_id";
  std::string spool_dir;  // default: config.agent.spool_dir/<node>
  // default: config.agent.job_state_dir/<node>, or spool_dir when that is empty
  std::string job_state_dir;
  std::string step_address;  // default: config.agent.step_address
  // Where the controller may be, tried in turn ("host:port[,host:port...]"); default: every
  // [[controllers]] entry's agent_address, else config.controller.agent_address.
  std::string controller_address;
  // How long a step connection (srun, muster run) may take to send its request, from connect:
  // a few seconds (a request is at most 4 MiB), so that unproven connections do not linger.
  int step_request_deadline_ms = 5'000;
  // muster-stepd, which runs each step in a process of its own so that steps outlive a restart
  // of the agent. Empty: next to musterd, else /usr/libexec/muster/muster-stepd; "none" (or not
  // found): steps run inside the agent and end with it.
  std::string step_supervisor;
  // muster-keeper, the program each batch script runs under. Empty: next to musterd, else
  // /usr/libexec/muster/muster-keeper; "none" (or not found): a copy of the agent keeps it.
  std::string keeper_program;
  // Tests only: the program run as every user's login shell for --get-user-env instead of the
  // shell of their passwd entry (a fake shell that prints a known environment). Empty: theirs.
  std::string login_shell_for_tests;
  // Seams (tests): how processes start, and how the controller is reached. Empty: fork/exec and
  // the gRPC link.
  std::shared_ptr<Launcher> launcher;
  ControllerLinkFactory controller_link;
};

// musterd's command line: the options, plus what only the daemon's main uses.
struct AgentCommandLine {
  AgentOptions options;  // config not loaded yet: main loads config_path
  std::string config_path;
  std::string log_level;
  std::string log_file;
  bool probe = false;  // --probe: report the hardware and the [[nodes]] entry for it
  bool help = false;
  bool version = false;
};

// Parses musterd's arguments (argv[0] is the program). INVALID_ARGUMENT, naming the option, for
// an unknown option or a missing value.
Result<AgentCommandLine> ParseAgentCommandLine(int argc, char** argv);
// The usage text for --help.
std::string AgentUsage();

}  // namespace muster::agent
