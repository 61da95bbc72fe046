#include "muster/core/reason.h"

#include <array>

namespace muster::core {
namespace {

// In enum order.
constexpr std::array kNames = {
    "None",
    "Priority",
    "Resources",
    "BadConstraints",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "ReqNodeNotAvail",
    "JobArrayTaskLimit",
    "Dependency",
    "DependencyNeverSatisfied",
    "BeginTime",
    "DeadLine",
    "Reservation",
    "ReservationDeleted",
    "Licenses",
    "AssocGrpJobsLimit",
    "AssocGrpNodeLimit",
    "AssocGrpGRES",
    "AssocMaxJobsLimit",
    "AssocMaxWallDurationPerJobLimit",
    "AssocMaxGRESPerJob",
    "AssocMaxNodePerJobLimit",
    "QOSGrpJobsLimit",
    "QOSGrpNodeLimit",
    "QOSGrpGRES",
    "QOSMaxJobsPerUserLimit",
    "QOSMaxGRESPerUser",
    "QOSMaxWallDurationPerJobLimit",
    "QOSMaxGRESPerJob",
    "QOSMaxNodePerJobLimit",
    "QuotaMax",
    "QuotaBorrow",
    "JobHeldUser",
    "JobHeldAdmin",
    "NodeFail",
    "TimeLimit",
    "Signal",
    "NonZeroExitCode",
    "JobLaunchFailure",
    "Prolog",
    "GpuFail",
    "JobRequeued",
    "Preempted",
};
static_assert(kNames.size() == static_cast<size_t>(JobReason::kPreempted) + 1,
              "every JobReason has a name");

}  // namespace

const char* ReasonName(JobReason reason) { return kNames[static_cast<size_t>(reason)]; }

std::optional<JobReason> ParseReason(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return static_cast<JobReason>(i);
  }
  return std::nullopt;
}

}  // namespace muster::core
