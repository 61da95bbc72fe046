#include "local_job.h"

namespace muster::agent {

const char* PhaseName(JobPhase p) {
  switch (p) {
    case JobPhase::kProlog:
      return "prolog";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kSuspended:
      return "suspended";
    case JobPhase::kTimedOut:
      return "timed out";
    case JobPhase::kCancelledInProlog:
      return "cancelled in its prolog";
    case JobPhase::kEnding:
      return "ending";
    case JobPhase::kEpilog:
      return "epilog";
  }
  return "?";
}

bool PhaseMoveAllowed(JobPhase from, JobPhase to) {
  using P = JobPhase;
  switch (from) {
    case P::kProlog:
      return to == P::kRunning || to == P::kCancelledInProlog;
    case P::kRunning:
      return to == P::kSuspended || to == P::kTimedOut || to == P::kEnding;
    case P::kSuspended:
      // Its limit clock is stopped: it cannot time out before it is resumed.
      return to == P::kRunning || to == P::kEnding;
    case P::kTimedOut:
      return to == P::kEnding;
    case P::kCancelledInProlog:
      return to == P::kEnding;
    case P::kEnding:
      return to == P::kEpilog;
    case P::kEpilog:
      return false;
  }
  return false;
}

bool LocalJob::MoveTo(JobPhase to) {
  if (!PhaseMoveAllowed(phase_, to)) return false;
  phase_ = to;
  return true;
}

}  // namespace muster::agent
