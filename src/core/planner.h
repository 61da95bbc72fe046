// Private to muster_core: one pass's working state and the questions asked of it. Schedule()
// and Place() both use it, so a job the scheduler would start is one Place(kNow) accepts.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cluster_index.h"
#include "muster/common/status.h"
#include "profile.h"

namespace muster::core {

class Planner {
 public:
  enum class Kind {
    kStarted,
    kNoFreeResources,  // not enough free now, whatever is reserved
    kHeldForOthers,    // enough free now, but reserved for a job planned earlier
    kNotRunnable,      // a static reason: partition limits, nodes down, impossible request
  };
  struct Attempt {
    Kind kind = Kind::kNotRunnable;
    Placement placement;  // when started
    JobId blocker = 0;    // kHeldForOthers: the job holding what this one would use
    StatusCode code = StatusCode::kUnavailable;
    JobReason reason = JobReason::kNone;  // when not started
    std::string detail;
    // The request's equivalence class: an id and Shape() text, valid for the planner's life.
    uint32_t shape_id = 0;
    const std::string* shape_text = nullptr;
    TimeMs expected = kNever;  // kNotRunnable: when it may start after all (its reservation's)
  };
  // An advance reservation, by name: every occurrence holds its nodes in the profile under one
  // id, which the reservation's own jobs are exempt from.
  struct Window {
    const AdvanceReservation* first = nullptr;  // the earliest occurrence in the view
    JobId hold = 0;
    NodeSet nodes;                                       // positions
    std::vector<std::pair<TimeMs, TimeMs>> occurrences;  // by start
  };
  // Holds of advance reservations carry ids from here up (job ids stay far below).
  static constexpr JobId kWindowHold = JobId{1} << 62;
  struct Forecast {
    TimeMs start = kNever;
    std::string partition;
    std::vector<NodeIndex> nodes;
    JobId waits_for = 0;  // a running job whose end makes the start possible
  };

  Planner(const ClusterView& view, TimeMs now, const SchedulerConfig& config);

  const ClusterIndex& index() const { return index_; }
  TimeMs now() const { return now_; }

  // Starts the job now if it fits without touching a reservation; takes its resources.
  Attempt TryStart(JobId id, const JobRequest& r);
  // The earliest start, not before `from`, of the job on the current profile (kNever in .start
  // when none).
  Forecast EarliestStart(const JobRequest& r, TimeMs from = 0);
  // Holds the forecast's nodes for the job from its start to the end of its time limit.
  void Reserve(JobId id, const JobRequest& r, const Forecast& f);
  // A forecast for the job's request shape, made once per pass (for jobs beyond the backfill
  // depth); kNever when none was made yet and `may_compute` is false.
  TimeMs EstimateStart(const JobRequest& r, bool may_compute);
  uint32_t forecasts() const { return forecasts_; }
  uint32_t shapes() const { return static_cast<uint32_t>(shapes_.size()); }
  // Attempts answered from what the pass learnt about the shape, without a search.
  uint32_t answered_from_shape() const { return answered_from_shape_; }
  // Partitions in which a reservation was made.
  bool HasReservationIn(const JobRequest& r) const;
  // The advance reservation a blocker id stands for, or null (a job's reservation).
  const Window* WindowOfHold(JobId blocker) const;
  // What holds resources a job would need: "job 12, which is ahead in the queue", "maintenance
  // reservation m1, from in 2h to in 4h".
  std::string HolderText(JobId blocker) const;

  // The request in words: "2 nodes x (8 h100 GPUs, 4 CPUs)".
  static std::string Shape(const JobRequest& r);

 private:
  // What is fixed for a request shape during the pass, and what the pass learnt about it, per
  // requested partition.
  struct PartState {
    std::string name;
    int32_t part = -1;           // index in view.partitions; -1: no such partition
    NodeSet up_capacity;         // up nodes that could hold a slot
    uint32_t capacity = 0;       // nodes that could hold a slot, up or not
    uint32_t unknown_shape = 0;  // more that could, but whose CPU topology is unknown
    bool no_free = false;        // nothing free now: stays so for the pass (resources only shrink)
    bool held = false;           // a job of this shape collided with a reservation...
    TimeMs held_duration = 0;    // ...with this duration (longer ones collide too)
    JobId held_blocker = 0;
    // Required nodes (--nodelist) this partition can never give, or that are down now.
    std::string required_never, required_down;
  };
  struct ShapeState {
    uint32_t id = 0;
    std::string text;  // Shape()
    Need need;
    NodeSet forced;                          // required nodes' positions (--nodelist)
    std::vector<std::string> unknown_nodes;  // required or excluded names no node has
    std::vector<PartState> parts;            // per requested partition
    bool estimated = false;
    TimeMs estimate = kNever;
    const Window* window = nullptr;  // --reservation, when it exists
  };
  ShapeState& StateOf(const JobRequest& r);
  // Why partition k of the request cannot take the job at all now; empty when it can.
  Attempt StaticCheck(const JobRequest& r, const ShapeState& s, const PartState& ps) const;
  bool TryIn(JobId id, const JobRequest& r, const ShapeState& s, PartState& ps, TimeMs end,
             Attempt* out);
  Forecast ForecastIn(const JobRequest& r, const ShapeState& s, const PartState& ps, TimeMs from);

  // The occurrence of `w` that holds time t, or null.
  const std::pair<TimeMs, TimeMs>* OccurrenceAt(const Window& w, TimeMs t) const;
  void AddWindows();

  ClusterView view_;
  ClusterIndex index_;
  Profile profile_;
  std::vector<Window> windows_;
  TimeMs now_;
  SchedulerConfig config_;
  std::map<std::string, ShapeState> shapes_;
  std::vector<char> reserved_partition_;  // by partition index
  // Per partition (by index): the earliest reserved start of this pass and its job (strict
  // backfill measures a job against those of its partitions).
  std::vector<std::pair<TimeMs, JobId>> first_reserved_;
  uint32_t forecasts_ = 0;
  uint32_t answered_from_shape_ = 0;
  NodeSet scratch_;
  NodeSet lighter_;   // TryIn: the free nodes up to a weight tier
  NodeSet lightest_;  // TryIn: those of the tiers below it (the gang takes them first)
  std::vector<std::pair<TimeMs, TimeMs>> class_answers_;  // ForecastIn's, by node class
};

}  // namespace muster::core
