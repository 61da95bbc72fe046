// Controller-sized scenarios shared by the controller benchmarks: the 12,500-node cluster's
// config, what sbatch sends for a Philly-sized job, and a store whose commits are buffered.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "muster/controller/engine.h"
#include "muster/core/types.h"
#include "muster/store/forwarding_store.h"

namespace muster::bench {

// A fat tree of 8-GPU nodes, 32 per leaf and 16 leaves per spine, in one partition "gpu".
std::string ClusterConfig(uint32_t nodes);

// What sbatch sends: a short script and the exported environment (~60 variables, ~2 KB).
v1::JobSpec Spec(const core::JobRequest& r, uint32_t k);

// Commits buffered (not synced): what these benchmarks measure is memory and CPU, not fsync.
class BufferedStore : public store::ForwardingStore {
 public:
  explicit BufferedStore(std::unique_ptr<store::StateStore> inner)
      : store::ForwardingStore(inner.get()), owned_(std::move(inner)) {}
  Status Commit(const store::Mutation& m, store::Durability) override {
    return inner()->Commit(m, store::Durability::kBuffered);
  }

 private:
  std::unique_ptr<store::StateStore> owned_;
};

// Registers every configured node (as its agent would) and attaches its session.
void RegisterAllNodes(controller::Engine& e, const Config& config, uint32_t nodes,
                      core::TimeMs now);

}  // namespace muster::bench
