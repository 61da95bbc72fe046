// What clients see of jobs: squeue's rows, scontrol show job, sacct's records (live and
// archived), and the controller's summary. Read-only over the job manager.
//
// Strand-confined, but for ScanAccounting.
#pragma once

#include <cstdint>

#include "engine_context.h"
#include "job_manager.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/controller/cluster_metrics.h"
#include "muster/controller/engine.h"
#include "muster/core/types.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {

// What a job holds (its allocation, once it has one) or asks for.
struct JobTotals {
  uint32_t nodes = 0;
  uint32_t tasks = 0;
  uint32_t cpus = 0;
  uint32_t gpus = 0;
  uint64_t mem_mb = 0;
};
// From the allocation when the record has one; else from `request` when given, else from the
// record's normalised spec (archived records have no request).
JobTotals TotalsOf(const v1::JobRecord& rec, const core::JobRequest* request = nullptr);
JobTotals TotalsOf(const core::JobRequest& request);

class JobViews {
 public:
  JobViews(const EngineContext& ctx, const JobManager& jobs);

  // scontrol show job: everything the record says, with the last pass's forecast and factors.
  v1::JobInfo ToJobInfo(const JobEntry& job) const;
  // The same for job `id`, a task waiting in `carrier`'s record.
  v1::JobInfo WaitingTaskInfo(const JobEntry& carrier, uint64_t id) const;
  // NOT_FOUND for a job not (or no longer) in memory.
  Result<v1::GetJobResponse> GetJob(const v1::GetJobRequest& req) const;
  // The most rows one page of a listing holds, whatever the visitor's byte budget: what one
  // request may cost the strand.
  static constexpr size_t kMaxListPageRows = 20'000;
  // The bytes of rows one accounting page holds (sacct; at least one row).
  static constexpr size_t kAccountingPageBytes = 1 << 20;
  // squeue: the matching jobs in id order (see Engine::VisitJobs).
  uint64_t VisitJobs(const v1::ListJobsRequest& req, const JobRowVisitor& visit) const;
  // sacct, in two parts (see Engine::AccountingQuery).
  Engine::AccountingQuery PrepareAccounting(const v1::ListAccountingRequest& req, TimeMs now) const;
  static Result<v1::ListAccountingResponse> ScanAccounting(const Engine::AccountingQuery& query);
  // Counts for `muster info`.
  void FillControllerInfo(v1::ControllerInfoResponse* info) const;
  // The jobs in memory by state, partition and account (ClusterMetrics::jobs).
  void CountJobs(ClusterMetrics* m) const;

  // An admin-set priority, else the multifactor one of the last pass.
  static int64_t EffectivePriority(const JobEntry& job);
  static void FillPriorityFactors(const JobEntry& job, v1::PriorityFactors* out);

 private:
  // squeue's brief row, the part that changes as the job runs (the rest is cached per job).
  void BriefStateFields(const JobEntry& job, v1::JobInfo* info) const;

  const EngineContext& ctx_;
  const JobManager& jobs_;
};

}  // namespace muster::controller
