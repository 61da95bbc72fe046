// Why a job is not running, or why it ended: one list, named as Slurm names them. Code compares
// the enum; records, views and the CLI carry the name (ReasonName), so the names are the edge.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace muster::core {

enum class JobReason : uint8_t {
  kNone,
  // Waiting: the scheduler's verdicts.
  kPriority,                  // what it needs is free, or will be, for a job ahead of it
  kResources,                 // not enough free now
  kBadConstraints,            // no node can ever satisfy the request as given
  kPartitionNodeLimit,        // more nodes than the partition has
  kPartitionTimeLimit,        // a longer time limit than the partition allows
  kReqNodeNotAvail,           // required nodes (or too many candidates) are down or drained
  kJobArrayTaskLimit,         // its array already runs as many tasks as its %N allows
  kDependency,                // --dependency: waiting for other jobs
  kDependencyNeverSatisfied,  // --dependency: it cannot be satisfied any more
  kBeginTime,                 // --begin: not before its begin time
  kDeadLine,                  // --deadline: it could not end before its deadline
  kReservation,               // --reservation: waiting for its reservation to begin
  kReservationDeleted,        // --reservation: the reservation ended or was deleted
  kLicenses,                  // -L/--licenses: not as many of a license are free as it needs
  // Limits of the job's account (association) or QoS; the detail names the numbers.
  kAssocGrpJobsLimit,
  kAssocGrpNodeLimit,
  kAssocGrpGRES,
  kAssocMaxJobsLimit,
  kAssocMaxWallDurationPerJobLimit,
  kAssocMaxGRESPerJob,
  kAssocMaxNodePerJobLimit,
  kQOSGrpJobsLimit,
  kQOSGrpNodeLimit,
  kQOSGrpGRES,
  kQOSMaxJobsPerUserLimit,
  kQOSMaxGRESPerUser,
  kQOSMaxWallDurationPerJobLimit,
  kQOSMaxGRESPerJob,
  kQOSMaxNodePerJobLimit,
  // GPU quotas (Muster's own): at its account's max, or nothing left to borrow in its cohort.
  kQuotaMax,
  kQuotaBorrow,
  // Held.
  kJobHeldUser,
  kJobHeldAdmin,
  // Requeued, or ended.
  kNodeFail,
  kTimeLimit,
  kSignal,
  kNonZeroExitCode,
  kJobLaunchFailure,
  kProlog,
  kGpuFail,
  kJobRequeued,
  kPreempted,  // ended or requeued to make room for a job of a higher QoS
};

// Slurm's name: "None", "Resources", "JobHeldUser", ...
const char* ReasonName(JobReason reason);
// The reason a name stands for; nullopt for a name not in the list.
std::optional<JobReason> ParseReason(std::string_view name);

}  // namespace muster::core
