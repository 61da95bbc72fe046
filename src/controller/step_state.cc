#include "step_state.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "name_list.h"

namespace muster::controller {
namespace {

// The last node reported: the step's final state from what its nodes said. A task that failed by
// itself makes the step FAILED even when the others were then killed (srun -K); killed alone is
// CANCELLED.
v1::JobState FinalState(const v1::StepRecord& s) {
  if (s.node_lost()) return v1::NODE_FAIL;
  if (s.exit_code() != 0) return v1::FAILED;
  if (s.killed()) return v1::CANCELLED;
  if (s.exit_signal() != 0) return v1::FAILED;
  return v1::COMPLETED;
}

}  // namespace

void BeginStep(v1::StepRecord& step, TimeMs now) {
  step.set_state(v1::RUNNING);
  step.set_start_time_ms(now);
}

bool StepEndedOnNode(v1::JobRecord& job, const std::string& node, const v1::StepEnded& e,
                     TimeMs now) {
  for (v1::StepRecord& s : *job.mutable_steps()) {
    if (s.id() != e.step_id()) continue;
    if (s.state() != v1::RUNNING || !Contains(s.running_nodes(), node)) return false;
    Remove(s.mutable_running_nodes(), node);
    s.set_exit_code(std::max(s.exit_code(), e.exit_code()));
    if (e.signal() && !s.exit_signal()) s.set_exit_signal(e.signal());
    if (e.killed()) s.set_killed(true);
    if (s.running_nodes().empty()) {
      s.set_end_time_ms(now);
      s.set_state(FinalState(s));
      spdlog::info("step end job={} step={} state={} exit={}:{}", job.id(), s.id(),
                   v1::JobState_Name(s.state()), s.exit_code(), s.exit_signal());
    }
    return true;
  }
  return false;
}

bool StepsEndedOnNode(v1::JobRecord& job, const std::string& node, bool lost, TimeMs now,
                      const std::set<uint32_t>& still_running) {
  bool changed = false;
  for (v1::StepRecord& s : *job.mutable_steps()) {
    if (s.state() != v1::RUNNING || !Contains(s.running_nodes(), node)) continue;
    if (still_running.count(s.id())) continue;
    Remove(s.mutable_running_nodes(), node);
    s.set_killed(true);
    if (lost) s.set_node_lost(true);
    if (s.running_nodes().empty()) {
      s.set_state(s.node_lost() ? v1::NODE_FAIL : v1::CANCELLED);
      s.set_end_time_ms(now);
    }
    changed = true;
  }
  return changed;
}

void EndRunningSteps(v1::JobRecord& job, v1::JobState state, TimeMs now) {
  for (v1::StepRecord& s : *job.mutable_steps()) {
    if (s.state() != v1::RUNNING) continue;
    s.set_state(state);
    s.set_end_time_ms(now);
    s.clear_running_nodes();
  }
}

}  // namespace muster::controller
