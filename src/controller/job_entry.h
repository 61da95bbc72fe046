// What the controller keeps per job: its durable record and what memory derives from it.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "active_tasks.h"
#include "muster/common/clock.h"
#include "muster/core/priority.h"
#include "muster/core/types.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

class JobManager;

struct JobEntry {
  // The durable part, read-only: JobManager is its one writer (every change persisted first,
  // then applied with what memory derives from it). Only JobManager makes entries, and an
  // entry is never assigned over (which would swap its record in behind JobManager's back).
  const v1::JobRecord& rec() const { return rec_; }
  JobEntry(JobEntry&&) = default;
  JobEntry(const JobEntry&) = delete;
  JobEntry& operator=(const JobEntry&) = delete;
  JobEntry& operator=(JobEntry&&) = delete;

  core::JobRequest request;             // derived from rec.spec
  std::set<std::string> started_nodes;  // nodes that acknowledged the launch (this run)
  // From the last scheduling pass (memory only; recomputed by every pass).
  TimeMs expected_start_ms = core::kNever;
  bool had_reservation = false;
  bool preempting = false;  // its preemption victims are leaving (preemptor.h)
  core::PriorityFactors priority;
  // Interactive allocations: whether a client connection holds it, and since when none does.
  bool client_attached = false;
  TimeMs orphan_since_ms = 0;
  // squeue's row, the part the spec alone decides, encoded once (squeue reads 10,000 rows at a
  // time; see job_views.cc).
  std::string brief_spec_fields;
  // A carrier's array task list (array_tasks.h), shared by the carriers of one array.
  std::shared_ptr<const std::vector<uint32_t>> array_tasks;
  // The jobs this entry counts for in JobManager's pending counts (itself and its waiting tasks).
  uint64_t counted_pending = 0;
  // What it counts for in JobManager's active tasks (itself and its waiting tasks, while pending
  // or running).
  ActiveTasks::Counted counted_active;

  uint64_t id() const { return rec_.id(); }

 private:
  friend class JobManager;
  // An entry for a record entering memory (submitted, recovered or split off a carrier);
  // `request`, when given, is its request already derived (the tasks of a job array share
  // one), `tasks` a carrier's array task list already parsed.
  explicit JobEntry(v1::JobRecord rec, const core::JobRequest* request = nullptr,
                    std::shared_ptr<const std::vector<uint32_t>> tasks = nullptr);
  v1::JobRecord rec_;
};

// After its spec changed (scontrol update): the request and squeue's row derived again.
void RefreshSpecFields(JobEntry& e);

// The GPU type a job asks for as views show it: "h100", "h100|a100" for alternatives, "" for any.
std::string GpuTypeWords(const v1::JobSpec& spec);

// Pending, running, or still cleaning up somewhere.
bool IsActive(const v1::JobRecord& rec);

// The state views show: SUSPENDED for a running job stopped by suspend preemption.
v1::JobState ShownState(const v1::JobRecord& rec);

// When a running job reaches its time limit, the time it spent suspended added; core::kNever
// without a limit or while suspended (it is not running down its limit then).
TimeMs LimitEnd(const v1::JobRecord& rec);

}  // namespace muster::controller
