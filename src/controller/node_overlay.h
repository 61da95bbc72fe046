// Node features, weights and GRES set live (`muster node update|reset`, scontrol update
// NodeName= Features=/Weight=/Gres=) are kept in each node's record in the state store and laid
// over the config file's node at every start and reconfiguration, until an admin resets them.
// Pure: no store, no I/O.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/v1/common.pb.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {

using NodeSettingsMap = std::map<std::string, v1::NodeSettings>;  // by node name

// A node's GRES in Slurm's form, as a live change gives it: "gpu:h100:8,nvme:2", "gpu:0",
// "" for none. Whole GPUs ("gpu[:TYPE]:COUNT", TYPE defaulting to the file's) and other GRES
// ("NAME[:TYPE][:COUNT]", COUNT defaulting to 1) replace the node's; its MIG slices and shards
// per GPU stay the file's. INVALID_ARGUMENT for bad text (shards asked for included).
Status ApplyLiveGres(const std::string& text, NodeConfig& node);

// `config` (the file's, partitions laid over) with each node's live settings applied. A stored
// GRES text that does not apply is left out, named in `problems`; settings of nodes the file no
// longer defines are ignored.
void OverlayNodeSettings(Config& config, const NodeSettingsMap& settings,
                         std::vector<std::string>* problems);

// What an admin's SET or RESET makes of the live settings (`current`). The nodes are a hostlist
// of `config`'s (ALL: every node). INVALID_ARGUMENT for a bad setting or nothing to change,
// NOT_FOUND for a node the config does not define.
struct NodeSettingsChange {
  std::vector<std::string> nodes;  // the nodes named
  NodeSettingsMap next;            // every node's settings after the change
  std::string summary;             // "node[1-2]: weight 10, features a,b", for the audit log
};
Result<NodeSettingsChange> PlanNodeSettingsChange(const v1::UpdateNodeRequest& req,
                                                  const Config& config,
                                                  const NodeSettingsMap& current,
                                                  const std::string& user, TimeMs now);

// What a SET or RESET asked for, for the audit log when it is refused ("weight 10; gres gpu:4",
// "reset features").
std::string NodeSettingsRequestText(const v1::UpdateNodeRequest& req);

// Which settings a node has set live: "features", "weight", "gres" (for `muster nodes`).
std::vector<std::string> LiveSettingNames(const v1::NodeSettings& s);
bool HasLiveSettings(const v1::NodeSettings& s);

}  // namespace muster::controller
