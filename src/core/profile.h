// Private to muster_core: each node's resources over time, the availability profile backfill
// plans against. Free now, plus what running jobs release when their time limits end, minus
// what reservations hold from their start. Per node the lists are short (the jobs on it), so
// every question is a walk over a handful of events.
#pragma once

#include <array>
#include <unordered_map>
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
  // given) names the holding job. Holds of `exempt` (a job's own advance reservation) do not
  // count.
  bool FitsDuring(NodeIndex n, const Need& need, TimeMs t, TimeMs end, JobId* blocker,
                  JobId exempt = 0) const;
  // The earliest t >= from with FitsDuring(n, need, t, t + duration, exempt), or kNever.
  TimeMs EarliestStart(NodeIndex n, const Need& need, TimeMs from, TimeMs duration,
                       JobId exempt = 0) const;
  // A job whose release on node n happens at t (0 when none): to say what a wait is for.
  JobId ReleasedAt(NodeIndex n, TimeMs t) const;

  // Nodes alike in everything EarliestStart looks at (capacity, free now, releases, holds by
  // time and amount) share a class, so a forecast asks one node per class: on a cluster of
  // alike nodes most free nodes, and all the nodes of one running gang, are one class. Holds
  // are told apart by time and amount only, so answers with an `exempt` job are not shared.
  // Nodes with GRES pools each have their own class. Classify() sorts the nodes into classes
  // (once, on the pass's first forecast: passes that make none pay nothing); from then on every
  // change keeps them up to date.
  void Classify();
  // Whether the classes are worth asking by: false when Classify() found the nodes in more
  // distinct kinds than half their number (then forecasts ask every node).
  bool Shared() const { return shared_; }
  uint32_t ClassOf(NodeIndex n) const { return class_[n]; }
  uint32_t classes() const { return next_class_; }

  static TimeMs EndOf(TimeMs start, TimeMs duration) {
    if (start == kNever || duration <= 0 || start > kNever - duration) return kNever;
    return start + duration;
  }

 private:
  // Resources on one node. GRES amounts (per pool of the node) live in gres_table_, so that the
  // events of the common node without GRES stay small and plain.
  struct Amount {
    int64_t cpus = 0, gpus = 0, mem = 0;
    int32_t gres = -1;  // index into gres_table_; -1: none
    void Add(const Amount& o, int sign = 1) {
      cpus += sign * o.cpus;
      gpus += sign * o.gpus;
      mem += sign * o.mem;
    }
    bool Covers(const Amount& want) const {
      return cpus >= want.cpus && gpus >= want.gpus && mem >= want.mem;
    }
  };
  using Gres = std::vector<int64_t>;
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
  // A node's availability as a step function: from `t` until the next step's t, `a` is free.
  // Built on first use after a change (most nodes are asked many times per pass, changed
  // rarely), so a forecast walks a node's steps once instead of re-adding its events at every
  // candidate time. Nodes with GRES pools keep the event walk.
  struct Step {
    TimeMs t;
    Amount a;
  };
  const std::vector<Step>& StepsOf(NodeIndex n) const;
  // The step in force at t.
  static size_t StepAt(const std::vector<Step>& steps, TimeMs t);
  // Adds `a` (sign 1) or takes it away (-1) during [from, to) on node n's steps, where they are
  // built (otherwise they are built from the events when next asked).
  void ApplyToSteps(NodeIndex n, TimeMs from, TimeMs to, const Amount& a, int sign);

  // What `need` takes on node n; its GRES part (when the node has pools) in *gres.
  Amount AmountOf(NodeIndex n, const Need& need, Gres* gres) const;
  // Whole GPUs and shards exclude each other: an amount of one also takes the other.
  void Couple(NodeIndex n, Amount* a, Gres* gres) const;
  int32_t Store(Gres g);
  Amount FreeNow(NodeIndex n) const;
  Amount AvailAt(NodeIndex n, TimeMs t, JobId exempt) const;
  Gres GresAvailAt(NodeIndex n, TimeMs t, JobId exempt) const;  // only for nodes with pools
  static bool GresCovers(const Gres& have, const Gres& want);
  // Node n's class after it gains a release ('r') or a hold ('h') of `a` during [from, to):
  // alike nodes that change alike stay alike.
  void Reclass(NodeIndex n, char what, TimeMs from, TimeMs to, const Amount& a);
  void ClassKey(NodeIndex n, std::vector<int64_t>* key) const;

  const ClusterIndex& index_;
  TimeMs now_;
  std::vector<std::vector<Event>> releases_;  // by node, ascending time
  std::vector<std::vector<Hold>> holds_;      // by node
  std::vector<Gres> gres_table_;
  NodeSet held_;
  mutable std::vector<std::vector<Step>> steps_;  // by node, see StepsOf
  mutable std::vector<uint8_t> steps_valid_;
  bool classified_ = false, shared_ = true;
  mutable std::vector<std::array<int64_t, 5>> hold_keys_;  // ClassKey's scratch
  std::vector<uint32_t> class_;                            // by node, see ClassOf
  uint32_t next_class_ = 0;
  struct ChangeHash {
    size_t operator()(const std::array<int64_t, 6>& k) const {
      uint64_t h = 0x9e3779b97f4a7c15ULL;
      for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 0x100000001b3ULL;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  using Reclassed = std::unordered_map<std::array<int64_t, 6>, uint32_t, ChangeHash>;
  Reclassed reclassed_;  // (class, change) -> class
  Reclassed::const_iterator last_reclass_;
};

}  // namespace muster::core
