// A pending job array is one record: the record of one pending task (its "carrier") also stands
// for the array's tasks that have not been split off yet (JobRecord.array_waiting), in the same
// state. They share everything but their job id (the array's id plus their position in its task
// list) and task id. A task is split off into a record of its own as it starts, or when a
// request names it alone; a carrier that starts, or that a request names alone, first hands the
// tasks waiting with it to the first of them. So a 100,000-task array is one write at
// submission and one pending entry for the scheduler, as Slurm keeps it.
//
// Pure helpers over records; JobManager (job_arrays.cc) does the splitting.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "muster/v1/records.pb.h"

namespace muster::controller {

// The positions of the tasks waiting in a carrier: ascending, disjoint [first, last] ranges.
class WaitingTasks {
 public:
  static WaitingTasks Of(const v1::JobRecord& r);
  // Positions first..last.
  static WaitingTasks Range(uint32_t first, uint32_t last);
  // Positions in [lo, hi] of the record's ranges, whatever their order or overlaps (a damaged
  // record's), sorted and merged.
  static WaitingTasks Clamped(const v1::JobRecord& r, uint32_t lo, uint32_t hi);
  bool operator==(const WaitingTasks& o) const { return ranges_ == o.ranges_; }
  // Replaces the record's array_waiting with these.
  void WriteTo(v1::JobRecord* r) const;

  bool empty() const { return ranges_.empty(); }
  uint64_t Count() const;
  bool Contains(uint32_t pos) const;
  std::optional<uint32_t> Front() const;
  // Takes `pos` out; false when it was not there.
  bool Erase(uint32_t pos);
  // Visits the positions from `from` on, in order, while `f` returns true (skipping whole ranges
  // before `from`: a page of a listing starts where the last one stopped, not at the start).
  template <typename F>
  void ForEach(F&& f, uint64_t from = 0) const {
    for (const auto& [first, last] : ranges_) {
      if (last < from) continue;
      for (uint64_t p = std::max<uint64_t>(first, from); p <= last; ++p) {
        if (!f(static_cast<uint32_t>(p))) return;
      }
    }
  }
  // The last position (none when empty).
  std::optional<uint32_t> Back() const {
    if (ranges_.empty()) return std::nullopt;
    return ranges_.back().second;
  }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// Whether the record carries waiting tasks of its array.
inline bool Carries(const v1::JobRecord& r) { return r.array_waiting_size() > 0; }

// How many jobs the record stands for: itself and the tasks waiting in it.
uint64_t TasksOf(const v1::JobRecord& r);

// The array's task ids in order (a task's position indexes it), from its --array text as
// accepted at submission; empty for a record of no array (or a text that no longer parses).
std::shared_ptr<const std::vector<uint32_t>> ArrayTaskList(const v1::JobRecord& r);

// The record waiting task `id` gets when it is split off `carrier`: the carrier's, with the
// task's own job id and task id, carrying nothing. `tasks` is the array's task list.
v1::JobRecord SplitRecord(const v1::JobRecord& carrier, const std::vector<uint32_t>& tasks,
                          uint64_t id);

// Visits the tasks waiting in `carrier`, in order, while `f(job id, task id)` returns true.
template <typename F>
void ForEachWaiting(const v1::JobRecord& carrier, const std::vector<uint32_t>& tasks, F&& f,
                    uint64_t from_id = 0) {
  const uint64_t base = carrier.array().array_job_id();
  WaitingTasks::Of(carrier).ForEach(
      [&](uint32_t pos) { return pos >= tasks.size() || f(base + pos, tasks[pos]); },
      from_id > base ? from_id - base : 0);
}

// The id of the last task waiting in the carrier (its own when none waits).
inline uint64_t LastWaitingId(const v1::JobRecord& carrier) {
  const auto back = WaitingTasks::Of(carrier).Back();
  return back ? carrier.array().array_job_id() + *back : carrier.id();
}

}  // namespace muster::controller
