// Private to muster_core: the structured form of Place()'s answer, used by the scheduler.
#pragma once

#include <string>

#include "muster/core/scheduler.h"

namespace muster::core {

struct PlaceOutcome {
  bool ok = false;
  Placement placement;  // when ok
  StatusCode code = StatusCode::kOk;
  std::string reason;  // Slurm-style reason name when !ok (Resources, ReqNodeNotAvail, ...)
  std::string detail;  // a sentence for people

  static PlaceOutcome Success(Placement p) { return {true, std::move(p), StatusCode::kOk, "", ""}; }
  static PlaceOutcome Fail(StatusCode c, std::string reason, std::string detail) {
    return {false, {}, c, std::move(reason), std::move(detail)};
  }
};

PlaceOutcome TryPlace(const JobRequest& request, const ClusterView& view, PlaceMode mode);

}  // namespace muster::core
