// JobManager: job arrays that wait as one record (see array_tasks.h). Tasks are split off their
// carrier here, and only here: when a request names one alone (Targets), and when a scheduling
// pass starts them (SplitForStart, AdoptSplit).
#include <spdlog/spdlog.h>

#include <set>

#include "array_tasks.h"
#include "job_manager.h"
#include "muster/common/check.h"
#include "muster/controller/access.h"

namespace muster::controller {

void JobManager::NoteCarrier(const JobEntry& job) {
  const v1::JobRecord& r = job.rec();
  if (!r.has_array()) return;
  const uint64_t array = r.array().array_job_id();
  if (Carries(r)) {
    carriers_[array] = r.id();
  } else if (auto it = carriers_.find(array); it != carriers_.end() && it->second == r.id()) {
    carriers_.erase(it);
  }
}

const JobEntry* JobManager::Covering(uint64_t id) const {
  if (const JobEntry* own = Find(id)) return own;
  // The array it belongs to starts at or before it; its carrier knows whether it waits there.
  auto it = carriers_.upper_bound(id);
  if (it == carriers_.begin()) return nullptr;
  --it;
  const JobEntry* carrier = Find(it->second);
  if (!carrier || id - it->first > UINT32_MAX) return nullptr;
  if (!WaitingTasks::Of(carrier->rec()).Contains(static_cast<uint32_t>(id - it->first))) {
    return nullptr;
  }
  return carrier;
}

const JobEntry* JobManager::CarrierBefore(uint64_t id) const {
  auto it = carriers_.upper_bound(id);
  if (it == carriers_.begin()) return nullptr;
  return Find(std::prev(it)->second);
}

JobEntry& JobManager::AdoptPending(v1::JobRecord rec, const JobEntry& from) {
  JobEntry e(std::move(rec), &from.request, from.array_tasks);
  // Until the next pass says otherwise, what the pass said of the carrier holds for it.
  e.priority = from.priority;
  e.expected_start_ms = from.expected_start_ms;
  JobEntry& job = Insert(std::move(e));
  MarkPending(job);
  NoteCarrier(job);
  if (job.rec().dependency_terms_size() > 0) split_with_terms_.push_back(job.id());
  return job;
}

Status JobManager::Separate(uint64_t id) {
  const JobEntry* cover = Covering(id);
  MUSTER_CHECK(cover && Carries(cover->rec()) && cover->array_tasks);
  JobEntry& carrier = jobs_.at(cover->id());
  const std::vector<uint32_t>& tasks = *carrier.array_tasks;
  const uint64_t base = carrier.rec().array().array_job_id();
  WaitingTasks waiting = WaitingTasks::Of(carrier.rec());
  v1::JobRecord kept = carrier.rec();
  v1::JobRecord split;
  if (id == carrier.id()) {
    // The carrier alone: the first task waiting in it carries the rest from now on.
    const uint32_t next = *waiting.Front();
    waiting.Erase(next);
    split = SplitRecord(carrier.rec(), tasks, base + next);
    waiting.WriteTo(&split);
    kept.clear_array_waiting();
  } else {
    waiting.Erase(static_cast<uint32_t>(id - base));
    waiting.WriteTo(&kept);
    split = SplitRecord(carrier.rec(), tasks, id);
  }
  store::Mutation m;
  m.PutJob(kept);
  m.PutJob(split);
  MUSTER_RETURN_IF_ERROR_PREPEND(ctx_.Commit(m), "cannot split the task off its array");
  carrier.rec_ = std::move(kept);
  MarkPending(carrier);  // counts what it stands for now
  Recount(carrier);
  NoteCarrier(carrier);
  AdoptPending(std::move(split), carrier);
  return Status::Ok();
}

std::vector<JobManager::Target> JobManager::Targets(const Caller& caller, std::string_view verb,
                                                    const std::vector<uint64_t>& ids,
                                                    const std::vector<uint64_t>& single_ids,
                                                    const Status* refuse_waiting) {
  std::vector<Target> out;
  std::set<uint64_t> seen;  // each job once, however often a request names it
  auto alone = [&](uint64_t id) {
    if (!seen.insert(id).second) return;
    const JobEntry* cover = Covering(id);
    if (!cover || (cover->id() == id && !Carries(cover->rec()))) {
      out.push_back({id, Status::Ok()});  // a job of its own (or none: the caller says so)
      return;
    }
    if (cover->rec().state() != v1::PENDING) {
      // Tasks that ended with their carrier before they were split off (a cancelled array).
      out.push_back({id, FailedPrecondition("job " + std::to_string(id) + " has ended (" +
                                            v1::JobState_Name(cover->rec().state()) + ")")});
      return;
    }
    // Nothing is split for a caller who may not act on the job.
    if (Status s = CheckJobAccess(caller, cover->rec(), verb, ctx_.config()); !s.ok()) {
      out.push_back({id, s});
    } else if (refuse_waiting) {
      out.push_back({id, *refuse_waiting});
    } else {
      out.push_back({id, Separate(id)});
    }
  };
  for (uint64_t id : ids) {
    // An array's id: the entries of its tasks follow it (its ids are consecutive from its own).
    bool array = false;
    for (auto it = jobs_.lower_bound(id); it != jobs_.end() && it->second.rec().has_array() &&
                                          it->second.rec().array().array_job_id() == id;
         ++it) {
      array = true;
      if (seen.insert(it->first).second) out.push_back({it->first, Status::Ok(), true});
    }
    if (!array) alone(id);
  }
  for (uint64_t id : single_ids) alone(id);
  return out;
}

JobManager::ArraySplit JobManager::SplitForStart(const std::vector<uint64_t>& ids,
                                                 store::Mutation& m) const {
  ArraySplit split;
  // The starts of each carrier's array: the carrier itself and tasks waiting in it.
  std::map<uint64_t, std::vector<uint64_t>> by_carrier;
  for (uint64_t id : ids) {
    const JobEntry* cover = Covering(id);
    if (cover && Carries(cover->rec())) by_carrier[cover->id()].push_back(id);
  }
  for (const auto& [carrier_id, starting] : by_carrier) {
    const JobEntry& carrier = *Find(carrier_id);
    const std::vector<uint32_t>& tasks = *carrier.array_tasks;
    const uint64_t base = carrier.rec().array().array_job_id();
    WaitingTasks waiting = WaitingTasks::Of(carrier.rec());
    bool carrier_starts = false;
    for (uint64_t id : starting) {
      if (id == carrier_id) {
        carrier_starts = true;
      } else if (waiting.Erase(static_cast<uint32_t>(id - base))) {
        split.start_from.emplace(id, SplitRecord(carrier.rec(), tasks, id));
      }
    }
    if (carrier_starts) {
      v1::JobRecord own = carrier.rec();
      own.clear_array_waiting();
      split.start_from.emplace(carrier_id, std::move(own));
      if (std::optional<uint32_t> next = waiting.Front()) {
        waiting.Erase(*next);
        v1::JobRecord taking_over = SplitRecord(carrier.rec(), tasks, base + *next);
        waiting.WriteTo(&taking_over);
        m.PutJob(taking_over);
        split.new_carriers.push_back(std::move(taking_over));
      }
    } else {
      v1::JobRecord kept = carrier.rec();
      waiting.WriteTo(&kept);
      m.PutJob(kept);
      split.kept.emplace_back(carrier_id, std::move(kept));
    }
  }
  return split;
}

void JobManager::AdoptSplit(ArraySplit split) {
  // Resolved while memory still has every carrier as it was (entries never move): the carrier
  // each new record comes from (its request, task list and last pass's figures).
  std::vector<std::pair<const JobEntry*, v1::JobRecord*>> fresh;
  std::vector<std::pair<JobEntry*, v1::JobRecord*>> changed;  // carriers: kept, or starting
  for (v1::JobRecord& rec : split.new_carriers) fresh.emplace_back(Covering(rec.id()), &rec);
  for (auto& [id, rec] : split.start_from) {
    if (JobEntry* carrier = Find(id)) {
      changed.emplace_back(carrier, &rec);
    } else {
      fresh.emplace_back(Covering(id), &rec);
    }
  }
  for (auto& [id, rec] : split.kept) changed.emplace_back(Find(id), &rec);
  // New carriers are noted before the old ones stop carrying.
  for (auto& [from, rec] : fresh) {
    MUSTER_CHECK(from);
    AdoptPending(std::move(*rec), *from);
  }
  for (auto& [carrier, rec] : changed) {
    MUSTER_CHECK(carrier);
    carrier->rec_ = std::move(*rec);
    MarkPending(*carrier);  // counts what it stands for now
    Recount(*carrier);
    NoteCarrier(*carrier);
  }
}

void JobManager::RepairCarrier(JobEntry& job, store::Mutation& m) {
  v1::JobRecord& r = job.rec_;
  const uint64_t base = r.array().array_job_id();
  const size_t count = job.array_tasks ? job.array_tasks->size() : 0;
  WaitingTasks waiting;
  if (r.id() >= base && r.id() - base + 1 < count) {
    waiting = WaitingTasks::Clamped(r, static_cast<uint32_t>(r.id() - base + 1),
                                    static_cast<uint32_t>(count - 1));
    // Tasks with records of their own (few) are not waiting.
    for (auto it = jobs_.upper_bound(r.id()); it != jobs_.end() && it->first - base < count; ++it) {
      waiting.Erase(static_cast<uint32_t>(it->first - base));
    }
  }
  if (waiting == WaitingTasks::Of(r)) return;
  spdlog::warn(
      "recovery: job={} (array {}) held waiting tasks that cannot be its own (before it, past its "
      "array, or jobs with records of their own); kept {} of them",
      r.id(), base, waiting.Count());
  waiting.WriteTo(&r);
  m.PutJob(r);
  if (r.state() == v1::PENDING) MarkPending(job);
  Recount(job);
  NoteCarrier(job);
}

Status JobManager::CheckArrayInvariants() const {
  std::unordered_map<uint32_t, uint64_t> pending;
  for (const auto& [id, job] : pending_) pending[job->rec().spec().uid()] += TasksOf(job->rec());
  if (pending != pending_per_uid_) return Internal("the pending counts per user are off");
  std::map<uint64_t, uint64_t> carriers;
  for (const auto& [id, job] : jobs_) {
    const v1::JobRecord& r = job.rec();
    if (!Carries(r)) continue;
    const uint64_t base = r.array().array_job_id();
    if (!carriers.emplace(base, id).second) {
      return Internal("array " + std::to_string(base) + " has two carriers");
    }
    if (!job.array_tasks) return Internal("carrier " + std::to_string(id) + " has no task list");
    bool ok = true;
    const uint64_t carrier = id;  // structured bindings are not captured by clang 14
    const size_t tasks = job.array_tasks->size();
    WaitingTasks::Of(r).ForEach([&](uint32_t pos) {
      // Every waiting task comes after its carrier, within the array, with no record of its own.
      ok = base + pos > carrier && pos < tasks && !jobs_.count(base + pos);
      return ok;
    });
    if (!ok) {
      return Internal("carrier " + std::to_string(id) +
                      " holds a task that is not its to hold (before it, past the array, or a "
                      "job of its own)");
    }
  }
  if (carriers != carriers_) return Internal("the index of array carriers is off");
  // The table by what its jobs name.
  std::map<std::string, std::set<uint64_t>> naming[3];
  for (const auto& [id, job] : jobs_) {
    const v1::JobSpec& spec = job.rec().spec();
    const std::string* names[3] = {&spec.account(), &spec.qos(), &spec.reservation()};
    for (int k = 0; k < 3; ++k) {
      if (!names[k]->empty()) naming[k][*names[k]].insert(id);
    }
  }
  for (int k = 0; k < 3; ++k) {
    if (naming[k] != naming_[k]) {
      return Internal("the jobs by account, QoS or reservation differ from the table");
    }
  }
  // The tasks pending or running, by account and QoS.
  ActiveTasks active;
  for (const auto& [id, job] : jobs_) {
    ActiveTasks::Counted counted;
    active.Recount(counted, job.rec());
    const ActiveTasks::Counted& kept = job.counted_active;
    if (counted.tasks != kept.tasks ||
        (kept.tasks > 0 && (*counted.account != *kept.account || *counted.qos != *kept.qos ||
                            counted.uid != kept.uid))) {
      return Internal("job " + std::to_string(id) + " is counted as it was, not as it is");
    }
  }
  if (!active.SameAs(active_)) return Internal("the active tasks by account and QoS are off");
  return Status::Ok();
}

}  // namespace muster::controller
