// Engine: partitions changed live. A change is planned against the partitions as they stand
// (the file's with the stored records laid over them), checked as a reconfiguration is (nothing
// an active job names or holds may go), and stored; ControllerRunner::ChangePartition then
// replaces the engine with one recovered under the new records.
#include <algorithm>

#include "audit_log.h"
#include "engine_context.h"
#include "muster/common/strings.h"
#include "muster/controller/access.h"
#include "muster/controller/engine.h"
#include "partition_overlay.h"

namespace muster::controller {

Result<Engine::PartitionPlan> Engine::PlanPartitionChange(const Caller& caller,
                                                          const v1::UpdatePartitionRequest& req,
                                                          TimeMs now) const {
  MUSTER_RETURN_IF_ERROR(Authorize(caller, Action::kManagePartitions));
  MUSTER_ASSIGN_OR_RETURN(PartitionChange change,
                          controller::PlanPartitionChange(req, file_config_, ctx_->config(),
                                                          partition_records_, caller.user, now));
  PartitionPlan plan;
  plan.name = change.name;
  plan.record = std::move(change.record);
  plan.summary = std::move(change.summary);
  plan.records = partition_records_;
  auto& rs = plan.records;
  rs.erase(std::remove_if(rs.begin(), rs.end(),
                          [&](const v1::PartitionRecord& r) { return r.name() == plan.name; }),
           rs.end());
  if (plan.record) rs.push_back(*plan.record);
  // What the engine would run under (the change was checked against the partitions as they
  // stand; laid over the file with the others it must hold too).
  Overlaid next = OverlayPartitions(file_config_, rs);
  for (const std::string& p : next.problems) {
    if (p.find("'" + plan.name + "'") != std::string::npos) return InvalidArgument(p);
  }
  MUSTER_RETURN_IF_ERROR(CheckReconfiguration(next.config));
  return plan;
}

Status Engine::CommitPartitionChange(const PartitionPlan& plan) {
  store::Mutation m;
  if (plan.record) {
    m.PutPartition(*plan.record);
  } else {
    m.DeletePartition(plan.name);
  }
  MUSTER_RETURN_IF_ERROR(ctx_->Commit(m));
  partition_records_ = plan.records;
  return Status::Ok();
}

void Engine::AuditPartitionChange(const Caller& caller, const v1::UpdatePartitionRequest& req,
                                  const std::string& summary, const Status& result, TimeMs now) {
  const std::string action =
      "partition " + ToLower(v1::UpdatePartitionRequest::Action_Name(req.action()));
  audit_->Record(caller, action, "partition " + req.name().substr(0, 64),
                 summary.empty() ? "nodes=" + req.nodes().substr(0, 1024) : summary,
                 result.code() != StatusCode::kPermissionDenied, result, now);
}

Result<v1::ListPartitionsResponse> Engine::ListPartitions(const Caller&) const {
  // Partitions are everyone's to see, as sinfo shows them.
  v1::ListPartitionsResponse resp;
  const Config& c = ctx_->config();
  for (const PartitionConfig& p : c.partitions) {
    v1::PartitionInfo* info = resp.add_partitions();
    info->set_name(p.name);
    for (const std::string& n : p.nodes) info->add_nodes(n);
    info->set_is_default(p.is_default);
    info->set_max_time_ms(p.max_time_ms);
    info->set_default_time_ms(p.default_time_ms);
    info->set_priority_tier(p.priority_tier);
    info->set_preempt_mode(p.preempt_mode);
    info->set_grace_time_ms(p.grace_time_ms);
    for (const auto& u : p.allowed_uids) info->add_allowed_uids(u);
    for (const auto& u : p.denied_uids) info->add_denied_uids(u);
    info->set_origin(PartitionOrigin(p.name, file_config_, partition_records_));
    uint32_t cpus = 0, gpus = 0;
    uint64_t memory = 0;
    for (const std::string& n : p.nodes) {
      if (const NodeConfig* node = c.FindNode(n)) {
        cpus += node->cpus;
        gpus += node->gpus;
        memory += node->memory_mb;
      }
    }
    info->set_total_cpus(cpus);
    info->set_total_gpus(gpus);
    info->set_total_memory_mb(memory);
  }
  for (const std::string& p : recovery_problems_) {
    if (p.rfind("the live definition of partition", 0) == 0) resp.add_problems(p);
  }
  return resp;
}

}  // namespace muster::controller
