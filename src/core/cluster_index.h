// Private to muster_core: the indexes one pass (or one Place call) works on. Nodes get a
// position in topology order, so every topology domain is a contiguous range of positions and
// candidate sets are bitsets over positions. Free GPU counts are kept in buckets (one bitset per
// count), so "nodes with at least g free GPUs" is a union of a few bitsets, never a node scan.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "muster/core/node_set.h"
#include "muster/core/types.h"

namespace muster::core {

// What one node must give one slot of a request.
struct Need {
  uint32_t cpus = 0;
  uint32_t gpus = 0;
  uint64_t mem_mb = 0;
  bool exclusive = false;  // the whole node, idle
  std::vector<GresRequest> gres;
  // --gpus-per-socket: `gpus_per_socket` free GPUs on each of `gpu_sockets` sockets (0: any GPUs).
  uint32_t gpus_per_socket = 0;
  uint32_t gpu_sockets = 0;
};

// The node's GRES pools a request item may take from (name and, when given, type match).
bool GresMatches(const GresView& pool, const GresRequest& want);
// Units of `want` the node has in all (capacity) or free now.
uint32_t GresUnits(const NodeView& n, const GresRequest& want, bool free_only);

Need NeedOf(const JobRequest& r);

// How many sockets of node `n` have at least `per_socket` GPUs (free ones only with
// `free_only`); GPUs of an unknown socket count for none.
uint32_t SocketsWithGpus(const NodeView& n, uint32_t per_socket, bool free_only);
// Does the node have the slot's GPUs free on enough sockets (always, without --gpus-per-socket)?
inline bool GpuSocketsFree(const NodeView& n, const Need& need) {
  return need.gpus_per_socket == 0 ||
         SocketsWithGpus(n, need.gpus_per_socket, true) >= need.gpu_sockets;
}

// Where a gang may be placed, from --switches and --topology.
struct GangLimits {
  uint32_t max_leaves = 0;  // 0: any
  uint32_t max_height = 0;  // 0: any; 1: one leaf; 2: one block (spine)
  bool nvlink = false;      // inside one multi-node NVLink domain

  static GangLimits Of(const JobRequest& r);
  bool any() const { return max_leaves || max_height || nvlink; }
};
uint32_t MaxSlotCpus(const JobRequest& r);
bool TypeMatches(const NodeView& n, const JobRequest& r);
bool HasFeatures(const NodeView& n, const JobRequest& r);  // the request's --constraint
std::string FeatureText(const JobRequest& r);              // "a&b|c"
// The request's CPU shape (-B, --ntasks-per-core, ...) on node `n`: "" when the node has it,
// else why not, in words that are the same for every node it applies to ("has fewer than 2
// sockets"). A node whose topology is unknown has it only with `unknown_fits` (the question "could
// it ever": its agent may yet report one that fits).
std::string CpuShapeMismatch(const NodeView& n, const JobRequest& r, bool unknown_fits = false);
inline bool HasCpuShape(const NodeView& n, const JobRequest& r, bool unknown_fits = false) {
  return !r.AsksForCpuShape() || CpuShapeMismatch(n, r, unknown_fits).empty();
}
// "at least 2 sockets, at most 1 task per core"; "" when the request asks for no CPU shape.
std::string CpuShapeText(const JobRequest& r);

class ClusterIndex {
 public:
  struct Domain {
    std::string name;                       // the path, "spine1/leaf3"; "" for the whole cluster
    int32_t parent = -1;                    // -1 for the cluster
    uint32_t height = 1;                    // 1: nodes directly below; the cluster is the highest
    uint32_t end = 0;                       // descendants are the domains (id, end): preorder
    uint32_t node_begin = 0, node_end = 0;  // positions of the nodes directly below
  };

  // Indexes `view`, which must outlive this object; Take() updates its free maps.
  explicit ClusterIndex(ClusterView* view);

  const ClusterView& view() const { return *view_; }
  uint32_t size() const { return static_cast<uint32_t>(node_at_.size()); }
  NodeIndex NodeAt(uint32_t pos) const { return node_at_[pos]; }
  uint32_t PosOf(NodeIndex n) const { return pos_of_[n]; }
  const std::vector<Domain>& domains() const { return domains_; }
  uint32_t LeafOf(uint32_t pos) const { return leaf_of_[pos]; }
  // The name of the domain directly above a node ("" when none).
  const std::string& LeafName(NodeIndex n) const { return domains_[leaf_of_[pos_of_[n]]].name; }

  uint32_t FreeCpus(NodeIndex n) const { return free_cpus_[n]; }
  uint32_t FreeGpus(NodeIndex n) const { return free_gpus_[n]; }
  uint64_t FreeMem(NodeIndex n) const { return view_->nodes[n].memory_free_mb; }
  bool Idle(NodeIndex n) const;
  // The node has GRES pools (kept apart so hot loops need not touch the NodeView).
  bool HasGres(NodeIndex n) const { return has_gres_[n] != 0; }

  // Could the node hold the slot if it were empty and up? With `unknown_shape_fits`, a node
  // whose CPU topology is unknown is taken to have the request's CPU shape.
  bool FitsCapacity(NodeIndex n, const JobRequest& r, const Need& need,
                    bool unknown_shape_fits = false) const;
  // Does the node have the slot free now (reservations aside)? Up-ness is not checked.
  bool FitsNow(NodeIndex n, const Need& need) const;

  const NodeSet& Partition(size_t i) const { return partition_sets_[i]; }
  const NodeSet& Up() const { return up_; }
  const NodeSet& IdleSet() const { return idle_; }
  uint32_t MaxGpus() const { return static_cast<uint32_t>(gpu_bucket_.size()) - 1; }
  // Positions with exactly k free GPUs (k <= MaxGpus()).
  const NodeSet& GpuBucket(uint32_t k) const { return gpu_bucket_[k]; }
  // Slurm's Weight: the positions whose weight is at most the k-th lowest of the nodes' distinct
  // weights (k < WeightTiers()). One tier when every node weighs the same: placement need not
  // look at weights then (WeightAtMost is not built).
  uint32_t WeightTiers() const {
    return weight_tiers_.empty() ? 1 : static_cast<uint32_t>(weight_tiers_.size());
  }
  const NodeSet& WeightAtMost(uint32_t k) const { return weight_tiers_[k]; }

  // Positions of the partition's nodes that could ever hold the slot (capacity, GPU type,
  // features, not excluded); with `up_only`, only those that are schedulable now.
  NodeSet CapacitySet(size_t partition, const JobRequest& r, const Need& need, bool up_only,
                      bool unknown_shape_fits = false) const;
  // out = base & (nodes that have the slot free now).
  void FreeNowSet(const NodeSet& base, const Need& need, NodeSet* out) const;

  // Chooses `count` nodes among the positions in `cand`: the lowest topology tier that holds
  // them all, then the domain needing the fewest leaves, then the best fit (least left over), then
  // best-fit nodes (fewest free GPUs, then CPUs). Returns node indices ascending; empty when
  // `cand` is too small.
  std::vector<NodeIndex> ChooseGang(const NodeSet& cand, uint32_t count,
                                    const GangLimits& limits = {}) const;
  // The same choice for a gang that must include every position of `forced` (a subset of
  // `cand`, e.g. --nodelist): the lowest domain holding the forced nodes and enough others, the
  // forced nodes' own leaves filled first. Empty when no such gang exists within the limits.
  std::vector<NodeIndex> ChooseGangWith(const NodeSet& cand, uint32_t count,
                                        const GangLimits& limits, const NodeSet& forced) const;
  // Placement other than by topology (muster-sim's baselines); `seed` for kRandom.
  void SetPlacement(PlacementMode mode, uint64_t seed) {
    placement_ = mode;
    draws_ = seed;
  }
  // Number of distinct leaves (domains directly above nodes) the nodes span.
  uint32_t LeavesSpanned(const std::vector<NodeIndex>& nodes) const;

  // Picks CPUs, memory and GPUs by index on `nodes` (which must have the slot free now).
  Placement Build(const JobRequest& r, const std::string& partition,
                  const std::vector<NodeIndex>& nodes) const;
  // Marks a placement's resources used, in the view and in the indexes.
  void Take(const Placement& p);

  // The node's position by name, or -1.
  int64_t FindNode(const std::string& name) const;

 private:
  void Rebucket(NodeIndex n, uint32_t old_gpus);
  uint32_t LeavesNeeded(uint32_t domain, uint32_t count) const;
  void FillFromDomain(uint32_t domain, uint32_t count, const NodeSet& cand,
                      std::vector<NodeIndex>* out) const;
  void TakeBestNodes(uint32_t leaf, uint32_t count, const NodeSet& cand,
                     std::vector<NodeIndex>* out) const;

  ClusterView* view_;
  std::vector<NodeIndex> node_at_;
  std::vector<uint32_t> pos_of_;
  std::vector<Domain> domains_;
  std::vector<std::vector<uint32_t>> by_height_;  // height -> domain ids
  std::vector<uint32_t> leaf_of_;                 // position -> domain directly above
  std::vector<uint32_t> free_cpus_, free_gpus_;   // by node index
  std::vector<uint8_t> has_gres_;                 // by node index
  std::vector<NodeSet> partition_sets_;
  std::vector<NodeSet> gpu_bucket_;
  NodeSet up_, idle_;
  std::vector<NodeSet> weight_tiers_;  // cumulative, lightest first; empty: one weight
  std::vector<int32_t> nvlink_of_;     // position -> NVLink domain id, -1: none
  mutable std::map<std::string, uint32_t> by_name_;  // filled on first FindNode
  // Scratch for ChooseGang (this object is used by one thread at a time).
  mutable std::vector<uint32_t> direct_, total_;
  PlacementMode placement_ = PlacementMode::kTopology;
  mutable uint64_t draws_ = 0;  // kRandom's generator state
};

}  // namespace muster::core
