// What clients see of nodes: sinfo's and scontrol show node's view, from the node manager (state,
// drain, inventory) and the ledger (what is allocated).
//
// Strand-confined.
#pragma once

#include "engine_context.h"
#include "muster/common/status.h"
#include "muster/controller/cluster_metrics.h"
#include "muster/v1/controller.pb.h"
#include "node_manager.h"
#include "resource_ledger.h"

namespace muster::controller {

class NodeViews {
 public:
  NodeViews(const EngineContext& ctx, const NodeManager& nodes, const ResourceLedger& ledger);

  v1::NodeInfo ToNodeInfo(const NodeEntry& node) const;
  Result<v1::ListNodesResponse> ListNodes(const v1::ListNodesRequest& req) const;
  // The base state (DRAIN is a flag on top): DOWN, UNKNOWN (never registered), NOT_RESPONDING,
  // IDLE, MIXED or ALLOCATED.
  v1::NodeState StateOf(const NodeEntry& node) const;
  // Nodes by state and GPUs by state, type and partition (ClusterMetrics).
  void CountResources(ClusterMetrics* m) const;

 private:
  const EngineContext& ctx_;
  const NodeManager& nodes_;
  const ResourceLedger& ledger_;
};

}  // namespace muster::controller
