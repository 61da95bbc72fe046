// The step state machine: a step is RUNNING until its tasks have ended on every node it ran on,
// then COMPLETED, FAILED, CANCELLED or NODE_FAIL. Every change of a step's state is in
// step_state.cc. Steps live in their job's record; these change the record only (the caller
// persists it).
#pragma once

#include <set>
#include <string>

#include "muster/common/clock.h"
#include "muster/v1/node.pb.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

// A new step starts RUNNING.
void BeginStep(v1::StepRecord& step, TimeMs now);
// The agent on `node` reports the step's tasks there ended. False when the report changes
// nothing (an unknown step, or one no longer running there).
bool StepEndedOnNode(v1::JobRecord& job, const std::string& node, const v1::StepEnded& e,
                     TimeMs now);
// Nothing of the job runs on `node` any more: its running steps are over there (killed, or lost
// with the node), but for those in `still_running` (their supervisors outlived a restart of the
// node's agent). True when a step changed.
bool StepsEndedOnNode(v1::JobRecord& job, const std::string& node, bool lost, TimeMs now,
                      const std::set<uint32_t>& still_running = {});
// The job's run is over: every step still running ends as `state`.
void EndRunningSteps(v1::JobRecord& job, v1::JobState state, TimeMs now);

}  // namespace muster::controller
