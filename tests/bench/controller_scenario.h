// Controller-sized scenarios shared by the controller benchmarks: the 12,500-node cluster's
// config, what sbatch sends for a Philly-sized job, and a store whose commits are buffered.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "muster/controller/engine.h"
#include "muster/core/types.h"
#include "muster/store/state_store.h"

namespace muster::bench {

// A fat tree of 8-GPU nodes, 32 per leaf and 16 leaves per spine, in one partition "gpu".
std::string ClusterConfig(uint32_t nodes);

// What sbatch sends: a short script and the exported environment (~60 variables, ~2 KB).
v1::JobSpec Spec(const core::JobRequest& r, uint32_t k);

// Commits buffered (not synced): what these benchmarks measure is memory and CPU, not fsync.
class BufferedStore : public store::StateStore {
 public:
  explicit BufferedStore(std::unique_ptr<store::StateStore> inner) : inner_(std::move(inner)) {}
  Status Commit(const store::Mutation& m, store::Durability) override {
    return inner_->Commit(m, store::Durability::kBuffered);
  }
  Result<store::LoadedState> LoadAll() override { return inner_->LoadAll(); }
  Result<std::vector<v1::JobRecord>> ReadHistory(size_t limit) override {
    return inner_->ReadHistory(limit);
  }
  Result<v1::JobPayload> ReadJobPayload(uint64_t id) override { return inner_->ReadJobPayload(id); }
  Status ScanAudit(
      const std::string& from,
      const std::function<bool(const std::string&, const v1::AuditEntry&)>& fn) override {
    return inner_->ScanAudit(from, fn);
  }
  Status ScanHistory(uint64_t from_id,
                     const std::function<bool(const v1::JobRecord&)>& fn) override {
    return inner_->ScanHistory(from_id, fn);
  }

 private:
  std::unique_ptr<store::StateStore> inner_;
};

// Registers every configured node (as its agent would) and attaches its session.
void RegisterAllNodes(controller::Engine& e, const Config& config, uint32_t nodes,
                      core::TimeMs now);

}  // namespace muster::bench
