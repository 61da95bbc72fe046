// `muster local up|down`: a whole cluster on this machine for trying Muster out and for system
// tests: one controller and N agents on loopback with fake H100s (NVSwitch fixture) under two leaf
// switches. Daemons are started in the background; their pids are kept in DIR/run/*.pid and only
// those processes are ever stopped.
#pragma once

#include <cstdio>
#include <string>

#include "muster/common/status.h"

namespace muster::client {

struct LocalClusterOptions {
  std::string dir;  // default: DefaultLocalDir()
  uint32_t nodes = 4;
  uint32_t gpus_per_node = 8;
  uint32_t cpus_per_node = 16;
  uint64_t memory_mb = 64000;
  std::string bin_dir;  // where musterctld/musterd are; default: next to this program
  int wait_s = 60;      // how long to wait for every node to be up
  bool tls = true;      // mutual TLS between the daemons (certificates in DIR/tls)
  // A hot standby: an etcd of the cluster's own (DIR/etcd, loopback) and two controllers, ctl-a
  // (started first, so it leads) and ctl-b, each with its own socket and state directory.
  bool standby = false;
  // --mail-prog: the controller's mail program (controller.mail_prog; empty: no mail). A
  // cluster made with another one is made anew (its state with it).
  std::string mail_prog;
};

std::string DefaultLocalDir();

// Starts whatever is not running yet (so it also restarts a crashed controller) and waits until
// the controller answers and every node is up. Returns the config path (for MUSTER_CONF).
// FAILED_PRECONDITION when a cluster of another shape runs in dir; DEADLINE_EXCEEDED (with the
// daemons' log files named) when it does not come up in time.
Result<std::string> LocalUp(const LocalClusterOptions& options, FILE* progress);

// Stops the agents, then the controllers, then etcd (SIGTERM, SIGKILL after 10 s), by the pids
// recorded in dir/run. purge: also delete dir (only when it holds a muster.toml written by
// LocalUp).
Status LocalDown(const std::string& dir, bool purge, FILE* progress);

}  // namespace muster::client
