// "Why is my job not running, and when will it?" (muster explain, scontrol show job's Explain=):
// the core judges every node of the job's partitions; this adds the priority rank, the running
// jobs holding the busy nodes, the reservations ahead, and what would change the answer.
//
// Strand-confined.
#pragma once

#include "job_manager.h"
#include "muster/common/clock.h"
#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"
#include "scheduler_loop.h"

namespace muster::controller {

class JobExplainer {
 public:
  JobExplainer(const JobManager& jobs, const SchedulerLoop& scheduler);

  // NOT_FOUND for a job not (or no longer) in memory.
  Result<v1::ExplainJobResponse> Explain(const v1::ExplainJobRequest& req, TimeMs now) const;

 private:
  const JobManager& jobs_;
  const SchedulerLoop& scheduler_;
};

}  // namespace muster::controller
