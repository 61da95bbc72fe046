// Private to muster_core: each node's resources over time, the availability profile backfill
// plans against. Free now, plus what running jobs release when their time limits end, minus
// what reservations hold from their start. Per node the lists are short (the jobs on it), so
// every question is a walk over a handful of events.
#pragma once

#include <vector>

#include "cluster_index.h"

namespace muster::core {

class Profile {
 public:
  // Releases that are already due (a job over its limit, being killed) are taken to happen just
  // after `now`: the resources are not free yet.
  Profile(const ClusterIndex& index, const std::vector<RunningUse>& running, TimeMs now);

  // A job started in this pass frees its nodes at `end`.
  void AddStart(const Placement& p, JobId job, TimeMs end);
  // Sets `need` aside on node n during [start, end) for `job`.
  void AddHold(NodeIndex n, const Need& need, TimeMs start, TimeMs end, JobId job);

  // Positions of nodes that carry a hold.
  const NodeSet& Held() const { return held_; }
  // Can node n give `need` during all of [t, end)? When not because of a hold, *blocker (if
  // given) names the holding job.
  bool FitsDuring(NodeIndex n, const Need& need, TimeMs t, TimeMs end, JobId* blocker) const;
  // The earliest t >= from with FitsDuring(n, need, t, t + duration), or kNever.
  TimeMs EarliestStart(NodeIndex n, const Need& need, TimeMs from, TimeMs duration) const;
  // A job whose release on node n happens at t (0 when none): to say what a wait is for.
  JobId ReleasedAt(NodeIndex n, TimeMs t) const;

  static TimeMs EndOf(TimeMs start, TimeMs duration) {
    if (start == kNever || duration <= 0 || start > kNever - duration) return kNever;
    return start + duration;
  }

 private:
  struct Amount {
    int64_t cpus = 0, gpus = 0, mem = 0;
  };
  struct Event {
    TimeMs t;
    Amount a;
    JobId job;
  };
  struct Hold {
    TimeMs start, end;
    Amount a;
    JobId job;
  };
  Amount AmountOf(NodeIndex n, const Need& need) const;
  Amount AvailAt(NodeIndex n, TimeMs t) const;

  const ClusterIndex& index_;
  TimeMs now_;
  std::vector<std::vector<Event>> releases_;  // by node, ascending time
  std::vector<std::vector<Hold>> holds_;      // by node
  NodeSet held_;
};

}  // namespace muster::core
