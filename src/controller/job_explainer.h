// "Why is my job not running, and when will it?" (muster explain, scontrol show job's Explain=):
// the core judges every node of the job's partitions; this adds the priority rank, the running
// jobs holding the busy nodes, the reservations ahead, the limits and GPU quotas it is over (with
// the running jobs whose end frees them), and what would change the answer.
//
// Strand-confined.
#pragma once

#include "cluster_views.h"
#include "job_manager.h"
#include "limit_tracker.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"
#include "quota_book.h"
#include "scheduler_loop.h"

namespace muster::controller {

class JobExplainer {
 public:
  JobExplainer(const JobManager& jobs, const SchedulerLoop& scheduler, const ClusterViews& views,
               LimitTracker& limits, const QuotaBook& quotas)
      : jobs_(jobs), scheduler_(scheduler), views_(views), limits_(limits), quotas_(quotas) {}

  // NOT_FOUND for a job not (or no longer) in memory.
  Result<v1::ExplainJobResponse> Explain(const v1::ExplainJobRequest& req, TimeMs now) const;

 private:
  // The limits and quotas the pending job is over, each with what would free it.
  void ExplainLimits(const JobEntry& job, v1::JobExplanation* x) const;

  const JobManager& jobs_;
  const SchedulerLoop& scheduler_;
  const ClusterViews& views_;
  LimitTracker& limits_;
  const QuotaBook& quotas_;
};

}  // namespace muster::controller
