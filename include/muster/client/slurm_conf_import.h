// `muster import-slurm-conf`: a site's slurm.conf (with its gres.conf and topology.conf) as an
// equivalent muster.toml: nodes, partitions, GRES (whole GPUs, MIG slices, shards, other GRES),
// the topology tree, scheduling weights and limits, prolog/epilog and health checks, licenses.
// Every setting it cannot carry over is named with its file and line, and why.
#pragma once

#include <string>
#include <vector>

#include "muster/common/status.h"

namespace muster::client {

struct SlurmConfFiles {
  std::string slurm_conf;  // the text; required
  std::string slurm_conf_name = "slurm.conf";
  std::string gres_conf;  // empty: none given
  std::string gres_conf_name = "gres.conf";
  std::string topology_conf;  // empty: none given
  std::string topology_conf_name = "topology.conf";
};

struct SlurmConfImport {
  std::string toml;  // a muster.toml that ParseConfig accepts
  // One line per setting left behind: "slurm.conf:12: Weight=10: not carried: ...".
  std::vector<std::string> not_carried;
};

// INVALID_ARGUMENT, with the file and line, for text Slurm itself would refuse (a line that is not
// KEY=VALUE words, a partition naming an unknown node, a bad hostlist or time).
Result<SlurmConfImport> ImportSlurmConf(const SlurmConfFiles& files);

}  // namespace muster::client
