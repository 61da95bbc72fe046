#include "planner.h"

#include <algorithm>

#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"

namespace muster::core {
namespace {

// Appends `prefix` and the number in decimal (the key is built for every pending job in every
// pass: no temporaries).
void AddNumber(std::string& key, std::string_view prefix, uint64_t v) {
  char buf[20];
  size_t n = 0;
  do {
    buf[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  key += prefix;
  while (n > 0) key += buf[--n];
}

void AddLower(std::string& key, const std::string& s) {
  for (char c : s) key += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

}  // namespace

std::string ShapeKey(const JobRequest& r) {
  std::string key;
  key.reserve(64);
  for (size_t i = 0; i < r.partitions.size(); ++i) {
    if (i) key += ',';
    key += r.partitions[i];
  }
  for (const auto& alt : r.features) key += "|f:" + Join(alt, "&");
  if (!r.excluded_nodes.empty()) key += "|x:" + Join(r.excluded_nodes, ",");
  if (!r.required_nodes.empty()) key += "|w:" + Join(r.required_nodes, ",");
  if (!r.reservation.empty()) key += "|r:" + r.reservation;
  AddNumber(key, "|l", r.max_leaves);
  AddNumber(key, "s", static_cast<uint64_t>(r.scope));
  AddNumber(key, "|", r.MinNodes());
  AddNumber(key, "-", r.nodes);
  AddNumber(key, "|", MaxSlotCpus(r));
  AddNumber(key, "|", r.mem_per_node_mb);
  AddNumber(key, "|", r.min_tmp_disk_mb);
  AddNumber(key, "|", r.gpus_per_node);
  key += '|';
  AddLower(key, r.gpu_type);
  key += '|';
  if (r.exclusive) key += 'x';
  for (const GresRequest& g : r.gres) {
    key += "|g:" + ToLower(g.name) + ':' + ToLower(g.type) + ':' + std::to_string(g.count);
  }
  if (r.AsksForCpuShape()) {
    key += "|c:" + std::to_string(r.min_sockets) + ':' + std::to_string(r.min_cores_per_socket) +
           ':' + std::to_string(r.min_threads_per_core) + ':' + std::to_string(r.ntasks_per_core) +
           ':' + std::to_string(r.ntasks_per_socket) + ":s" + std::to_string(r.spec_cores) + ':' +
           std::to_string(r.spec_threads) + ":g" + std::to_string(r.gpus_per_socket);
    if (r.ntasks_per_core || r.ntasks_per_socket) {
      // Those bound the fullest node's tasks, which MaxSlotCpus alone does not tell apart
      // (-n4 -c8 and -n32 -c1 take the same CPUs).
      uint32_t tasks = 1;
      for (uint32_t t : r.tasks_per_node) tasks = std::max(tasks, t);
      key += ":t" + std::to_string(tasks);
    }
  }
  return key;
}

std::string Planner::Shape(const JobRequest& r) {
  std::string s = (r.MinNodes() < r.nodes ? std::to_string(r.MinNodes()) + "-" : "") +
                  std::to_string(r.nodes) + (r.nodes == 1 ? " node" : " nodes");
  std::vector<std::string> per;
  if (r.exclusive) per.push_back("whole node");
  if (r.gpus_per_node) {
    per.push_back(std::to_string(r.gpus_per_node) + " " +
                  (r.gpu_type.empty() ? std::string("GPU") : r.gpu_type + " GPU") +
                  (r.gpus_per_node == 1 ? "" : "s"));
  }
  for (const GresRequest& g : r.gres) {
    per.push_back(std::to_string(g.count) + " " + g.name + (g.type.empty() ? "" : ":" + g.type));
  }
  per.push_back(std::to_string(MaxSlotCpus(r)) + " CPUs");
  if (r.mem_per_node_mb) per.push_back(std::to_string(r.mem_per_node_mb) + " MB");
  s += " x (" + Join(per, ", ") + ")";
  if (!r.features.empty()) s += " with features " + FeatureText(r);
  if (r.AsksForCpuShape()) s += " on nodes with " + CpuShapeText(r);
  switch (r.scope) {
    case JobRequest::Scope::kLeaf:
      s += " under one leaf switch";
      break;
    case JobRequest::Scope::kBlock:
      s += " under one spine";
      break;
    case JobRequest::Scope::kNvlink:
      s += " in one NVLink domain";
      break;
    case JobRequest::Scope::kAny:
      if (r.max_leaves) {
        s += " on at most " + std::to_string(r.max_leaves) + " leaf switch" +
             (r.max_leaves == 1 ? "" : "es");
      }
      break;
  }
  if (!r.required_nodes.empty()) s += " including " + CompressHostlist(r.required_nodes);
  if (!r.excluded_nodes.empty()) {
    s += " excluding " + std::to_string(r.excluded_nodes.size()) + " node" +
         (r.excluded_nodes.size() == 1 ? "" : "s");
  }
  return s;
}

Planner::Planner(const ClusterView& view, TimeMs now, const SchedulerConfig& config)
    : view_(view),
      index_(&view_),
      profile_(index_, view_.running, now),
      now_(now),
      config_(config),
      reserved_partition_(view_.partitions.size(), 0),
      first_reserved_(view_.partitions.size(), {kNever, 0}) {
  index_.SetPlacement(config.placement,
                      config.placement_seed ^ static_cast<uint64_t>(now) * 0x9e3779b97f4a7c15ULL);
  AddWindows();
}

void Planner::AddWindows() {
  if (view_.advance.empty()) return;
  std::map<std::string, size_t> by_name;
  for (const AdvanceReservation& a : view_.advance) {
    if (a.end_ms <= now_ || a.start_ms >= a.end_ms) continue;
    auto [it, inserted] = by_name.try_emplace(a.name, windows_.size());
    if (inserted) {
      Window w;
      w.first = &a;
      w.hold = kWindowHold + windows_.size();
      w.nodes = NodeSet(index_.size());
      for (NodeIndex n : a.nodes) {
        if (n < view_.nodes.size()) w.nodes.Set(index_.PosOf(n));
      }
      windows_.push_back(std::move(w));
    }
    Window& w = windows_[it->second];
    if (a.start_ms < w.first->start_ms) w.first = &a;
    w.occurrences.emplace_back(a.start_ms, a.end_ms);
    for (size_t k = 0; k < a.nodes.size(); ++k) {
      if (a.nodes[k] >= view_.nodes.size()) continue;
      Need need;
      need.exclusive = a.gpus.empty();
      need.gpus = k < a.gpus.size() ? a.gpus[k] : 0;
      profile_.AddHold(a.nodes[k], need, a.start_ms, a.end_ms, w.hold);
    }
  }
  for (Window& w : windows_) std::sort(w.occurrences.begin(), w.occurrences.end());
}

const std::pair<TimeMs, TimeMs>* Planner::OccurrenceAt(const Window& w, TimeMs t) const {
  for (const auto& occ : w.occurrences) {
    if (occ.first <= t && t < occ.second) return &occ;
  }
  return nullptr;
}

const Planner::Window* Planner::WindowOfHold(JobId blocker) const {
  if (blocker < kWindowHold || blocker - kWindowHold >= windows_.size()) return nullptr;
  return &windows_[blocker - kWindowHold];
}

std::string Planner::HolderText(JobId blocker) const {
  const Window* w = WindowOfHold(blocker);
  if (!w) return "job " + std::to_string(blocker) + ", which is ahead in the queue";
  const AdvanceReservation& a = *w->first;
  auto when = [&](TimeMs t) {
    return t <= now_ ? std::string("now") : "in " + FormatDuration(t - now_);
  };
  return std::string(a.maint ? "maintenance " : "") + "reservation " + a.name + " (" +
         (a.start_ms <= now_ ? "until " + when(a.end_ms)
                             : "from " + when(a.start_ms) + " to " + when(a.end_ms)) +
         ")";
}
Planner::ShapeState& Planner::StateOf(const JobRequest& r) {
  auto [it, inserted] = shapes_.try_emplace(ShapeKey(r));
  ShapeState& s = it->second;
  if (!inserted) return s;
  s.id = static_cast<uint32_t>(shapes_.size() - 1);
  s.text = Shape(r);
  s.need = NeedOf(r);
  s.forced = NodeSet(index_.size());
  for (const std::string& name : r.required_nodes) {
    if (int64_t pos = index_.FindNode(name); pos >= 0) {
      s.forced.Set(static_cast<size_t>(pos));
    } else {
      s.unknown_nodes.push_back(name);
    }
  }
  for (const std::string& name : r.excluded_nodes) {
    if (index_.FindNode(name) < 0) s.unknown_nodes.push_back(name);
  }
  if (!r.reservation.empty()) {
    for (const Window& w : windows_) {
      if (w.first->name == r.reservation) s.window = &w;
    }
  }
  const bool confined = s.window && !s.window->first->flex;
  // Names of the required nodes outside `set`.
  auto missing = [&](const NodeSet& set) {
    std::vector<std::string> names;
    s.forced.ForEach([&](size_t pos) {
      if (!set.Test(pos))
        names.push_back(view_.nodes[index_.NodeAt(static_cast<uint32_t>(pos))].name);
    });
    return names;
  };
  for (const std::string& name : r.partitions) {
    PartState ps;
    ps.name = name;
    for (size_t i = 0; i < view_.partitions.size(); ++i) {
      if (view_.partitions[i].name == name) ps.part = static_cast<int32_t>(i);
    }
    if (ps.part >= 0) {
      NodeSet all = index_.CapacitySet(static_cast<size_t>(ps.part), r, s.need, false);
      if (confined) all &= s.window->nodes;
      ps.capacity = static_cast<uint32_t>(all.Count());
      if (r.AsksForCpuShape()) {
        // Nodes that would hold it but have not reported their CPU topology yet: only those not
        // up (an agent that has not registered). One that is up without a topology never will
        // report one, as explain says.
        NodeSet maybe = index_.CapacitySet(static_cast<size_t>(ps.part), r, s.need, false, true);
        if (confined) maybe &= s.window->nodes;
        maybe.AndNot(all).AndNot(index_.Up());
        ps.unknown_shape = static_cast<uint32_t>(maybe.Count());
      }
      if (auto never = missing(all); !never.empty()) {
        ps.required_never = Join(never, ",");
      }
      all &= index_.Up();
      if (auto down = missing(all); !down.empty()) ps.required_down = Join(down, ",");
      ps.up_capacity = std::move(all);
    }
    s.parts.push_back(std::move(ps));
  }
  return s;
}

Planner::Attempt Planner::StaticCheck(const JobRequest& r, const ShapeState& s,
                                      const PartState& ps) const {
  Attempt a;
  a.kind = Kind::kNotRunnable;
  if (!s.unknown_nodes.empty()) {
    a.code = StatusCode::kNotFound;
    a.reason = JobReason::kBadConstraints;
    a.detail = "no such node: " + Join(s.unknown_nodes, ",");
    return a;
  }
  if (!r.reservation.empty() && !s.window) {
    a.code = StatusCode::kNotFound;
    a.reason = JobReason::kReservationDeleted;
    a.detail = "reservation " + r.reservation + " does not exist (it ended or was deleted)";
    return a;
  }
  if (ps.part < 0) {
    a.code = StatusCode::kNotFound;
    a.reason = JobReason::kBadConstraints;
    std::vector<std::string> names;
    for (const auto& q : view_.partitions) names.push_back(q.name);
    a.detail = "partition '" + ps.name + "' does not exist (partitions: " + Join(names, ", ") + ")";
    return a;
  }
  const PartitionView& p = view_.partitions[static_cast<size_t>(ps.part)];
  const uint32_t min_nodes = r.MinNodes();
  if (min_nodes > p.nodes.size()) {
    a.reason = JobReason::kPartitionNodeLimit;
    a.detail = "needs " + std::to_string(min_nodes) + " nodes; partition " + p.name + " has " +
               std::to_string(p.nodes.size());
    return a;
  }
  if (r.time_limit_ms > 0 && p.max_time_ms > 0 && r.time_limit_ms > p.max_time_ms) {
    a.reason = JobReason::kPartitionTimeLimit;
    a.detail = "time limit " + FormatDuration(r.time_limit_ms) + " is longer than partition " +
               p.name + "'s maximum of " + FormatDuration(p.max_time_ms);
    return a;
  }
  if (ps.capacity < min_nodes && ps.capacity + ps.unknown_shape >= min_nodes) {
    // They may yet report a topology that fits (an agent that has not registered): they are
    // not available to it, as down nodes are not.
    a.reason = JobReason::kReqNodeNotAvail;
    a.detail = "needs " + s.text + "; only " + std::to_string(ps.capacity) + " of " +
               std::to_string(p.nodes.size()) + " nodes in partition " + p.name +
               " are known to hold that: " + std::to_string(ps.unknown_shape) +
               " more have not reported their CPU topology (sockets, cores, threads)";
    return a;
  }
  if (ps.capacity < min_nodes) {
    a.code = StatusCode::kFailedPrecondition;
    a.reason = JobReason::kBadConstraints;
    a.detail = "needs " + s.text + "; only " + std::to_string(ps.capacity) + " of " +
               std::to_string(p.nodes.size()) + " nodes in partition " + p.name + " can hold that";
    return a;
  }
  if (!ps.required_never.empty()) {
    a.code = StatusCode::kFailedPrecondition;
    a.reason = JobReason::kBadConstraints;
    a.detail = "needs " + s.text + " including node(s) " + ps.required_never +
               ", which partition " + p.name + " does not have or which cannot hold that";
    return a;
  }
  if (r.required_nodes.size() > min_nodes) {
    a.code = StatusCode::kInvalidArgument;
    a.reason = JobReason::kBadConstraints;
    a.detail = std::to_string(r.required_nodes.size()) + " required nodes but a gang of " +
               std::to_string(min_nodes);
    return a;
  }
  if (!ps.required_down.empty()) {
    a.reason = JobReason::kReqNodeNotAvail;
    a.detail = "UnavailableNodes:" + ps.required_down + "; required node(s) down or drained";
    return a;
  }
  uint32_t up = static_cast<uint32_t>(ps.up_capacity.Count());
  if (up < min_nodes) {
    a.reason = JobReason::kReqNodeNotAvail;
    a.detail = "needs " + s.text + "; only " + std::to_string(up) + " of the " +
               std::to_string(ps.capacity) + " nodes in partition " + p.name +
               " that could hold it are up and not drained";
    return a;
  }
  a.reason = JobReason::kNone;
  return a;
}

bool Planner::TryIn(JobId id, const JobRequest& r, const ShapeState& s, PartState& ps, TimeMs end,
                    Attempt* out) {
  const Need& need = s.need;
  const bool forced = s.forced.Any();
  const uint32_t min_nodes = r.MinNodes();
  const NodeSet& base = ps.up_capacity;
  const NodeSet& held = profile_.Held();
  const bool any_held = held.Any();
  const JobId exempt = s.window ? s.window->hold : 0;
  bool any_free = false;
  JobId blocker = 0;
  std::vector<NodeIndex> nodes;

  // Slurm's Weight: the lightest nodes that can hold the job, heavier ones a tier at a time;
  // topology and best fit choose within a tier.
  const uint32_t tiers = index_.WeightTiers();
  const bool weighed = tiers > 1;
  if (r.nodes == 1 && !forced && config_.placement == PlacementMode::kTopology) {
    // One node: best fit straight from the free-GPU buckets, fewest free GPUs first (the
    // baselines' placements take the general path below).
    auto take = [&](size_t pos) {
      NodeIndex n = index_.NodeAt(static_cast<uint32_t>(pos));
      if (!index_.FitsNow(n, need)) return false;
      any_free = true;
      if (any_held && held.Test(pos) &&
          !profile_.FitsDuring(n, need, now_, end, &blocker, exempt)) {
        return false;
      }
      nodes.push_back(n);
      return true;
    };
    for (uint32_t k = 0; k < tiers && nodes.empty(); ++k) {
      const NodeSet* cand = &base;
      if (weighed) {
        lighter_.AssignAnd(base, index_.WeightAtMost(k));
        cand = &lighter_;
      }
      if (need.exclusive) {
        cand->FindInBoth(index_.IdleSet(), take);
      } else {
        for (uint32_t g = need.gpus; g <= index_.MaxGpus() && nodes.empty(); ++g) {
          cand->FindInBoth(index_.GpuBucket(g), take);
        }
      }
    }
  } else {
    index_.FreeNowSet(base, need, &scratch_);
    // A required node that is busy now stays busy for the rest of the pass.
    if (scratch_.Count() >= min_nodes && (!forced || scratch_.Contains(s.forced))) {
      any_free = true;
      if (any_held) {
        scratch_.FindInBoth(held, [&](size_t pos) {
          NodeIndex n = index_.NodeAt(static_cast<uint32_t>(pos));
          if (!profile_.FitsDuring(n, need, now_, end, &blocker, exempt)) scratch_.Reset(pos);
          return false;
        });
      }
      // -N min-max takes as many nodes as are free, up to the maximum; under topology limits a
      // smaller gang may fit where the largest does not.
      const GangLimits limits = GangLimits::Of(r);
      auto choose = [&](const NodeSet& cand, const NodeSet& must) {
        const uint32_t avail = static_cast<uint32_t>(cand.Count());
        for (uint32_t want = std::min(r.nodes, avail); want >= min_nodes && want > 0; --want) {
          nodes = index_.ChooseGangWith(cand, want, limits, must);
          if (!nodes.empty() || !limits.any()) break;
        }
      };
      if (!weighed) {
        choose(scratch_, s.forced);
      } else {
        // The lightest tiers that hold the most nodes the job takes; failing that (-N
        // min-max), the lightest that hold the fewest. The free nodes of the tiers below the
        // one that holds it go into the gang first (topology fills the rest), unless topology
        // limits leave no such gang.
        for (uint32_t least : {r.nodes, min_nodes}) {
          for (uint32_t k = 0; k < tiers && nodes.empty(); ++k) {
            lighter_.AssignAnd(scratch_, index_.WeightAtMost(k));
            if (lighter_.Count() < least || (forced && !lighter_.Contains(s.forced))) continue;
            if (k > 0) {
              lightest_.AssignAnd(scratch_, index_.WeightAtMost(k - 1));
              lightest_ |= s.forced;
              choose(lighter_, lightest_);
            }
            if (nodes.empty()) choose(lighter_, s.forced);
          }
          if (!nodes.empty() || least == min_nodes) break;
        }
      }
    }
  }
  if (!any_free) {
    ps.no_free = true;
    return false;
  }
  if (nodes.empty()) {
    if (blocker == 0) {
      // Enough is free, but not within the topology limits; no reservation is in the way, and
      // free resources only shrink during a pass.
      ps.no_free = true;
      return false;
    }
    out->blocker = blocker;
    return false;
  }
  const std::string& pname = view_.partitions[static_cast<size_t>(ps.part)].name;
  out->kind = Kind::kStarted;
  out->placement = index_.Build(r, pname, nodes);
  out->placement.start_ms = now_;
  index_.Take(out->placement);
  profile_.AddStart(out->placement, id, end);
  return true;
}

Planner::Attempt Planner::TryStart(JobId id, const JobRequest& r) {
  ShapeState& s = StateOf(r);
  TimeMs end = Profile::EndOf(now_, r.time_limit_ms);
  if (s.window && !s.window->first->flex) {
    // Only while the reservation lasts, and ending with it.
    if (const auto* occ = OccurrenceAt(*s.window, now_)) {
      end = std::min(end, occ->second);
    } else {
      Attempt a;
      a.kind = Kind::kNotRunnable;
      a.shape_id = s.id;
      a.shape_text = &s.text;
      a.reason = JobReason::kReservation;
      for (const auto& o : s.window->occurrences) {
        if (o.first > now_) {
          a.expected = o.first;
          break;
        }
      }
      a.detail =
          "waiting for reservation " + r.reservation + ", which begins " +
          (a.expected == kNever ? std::string("later") : "in " + FormatDuration(a.expected - now_));
      return a;
    }
  }
  const TimeMs duration = end == kNever ? kNever : end - now_;
  Attempt first_static;
  bool open = false, held = false, searched = false;
  JobId blocker = 0;
  for (PartState& ps : s.parts) {
    Attempt st = StaticCheck(r, s, ps);
    if (st.reason != JobReason::kNone) {
      if (first_static.reason == JobReason::kNone) first_static = std::move(st);
      continue;
    }
    open = true;
    if (ps.no_free) continue;
    if (config_.strict_backfill && ps.part >= 0) {
      // Strict backfill: ending after the partition's first reserved start is passing that job,
      // wherever it runs.
      const auto& [start, job] = first_reserved_[static_cast<size_t>(ps.part)];
      if (job != 0 && end > start) {
        held = true;
        blocker = job;
        continue;
      }
    }
    if (ps.held && duration >= ps.held_duration) {
      held = true;  // a job of this shape, no longer than this one, already collided
      blocker = ps.held_blocker;
      continue;
    }
    Attempt a;
    searched = true;
    if (TryIn(id, r, s, ps, end, &a)) return a;
    if (!ps.no_free) {
      held = true;
      blocker = a.blocker;
      if (!ps.held || duration < ps.held_duration) {
        ps.held = true;
        ps.held_duration = duration;
        ps.held_blocker = a.blocker;
      }
    }
  }
  if (!open) {
    first_static.shape_id = s.id;
    first_static.shape_text = &s.text;
    return first_static;
  }
  if (!searched) ++answered_from_shape_;
  Attempt a;
  a.code = StatusCode::kUnavailable;
  a.shape_id = s.id;
  a.shape_text = &s.text;
  if (held) {
    a.kind = Kind::kHeldForOthers;
    a.blocker = blocker;
    // Slurm's word for nodes an advance reservation keeps: ReqNodeNotAvail.
    a.reason = WindowOfHold(blocker) ? JobReason::kReqNodeNotAvail : JobReason::kPriority;
    a.detail = "needs " + s.text + "; what is free now is reserved for " + HolderText(blocker);
  } else {
    a.kind = Kind::kNoFreeResources;
    a.reason = JobReason::kResources;
    a.detail = "needs " + s.text + "; not enough of that is free now";
  }
  return a;
}

Planner::Forecast Planner::ForecastIn(const JobRequest& r, const ShapeState& s, const PartState& ps,
                                      TimeMs from) {
  const Need& need = s.need;
  const bool forced = s.forced.Any();
  const uint32_t min_nodes = r.MinNodes();
  Forecast f;
  const NodeSet& base = ps.up_capacity;
  const JobId exempt = s.window ? s.window->hold : 0;
  std::vector<TimeMs> earliest;
  NodeSet feasible(index_.size());
  TimeMs t = std::max(now_, from);
  // Strict backfill: before the partition's first reserved start a job may start only if it
  // ends by then; a later time in between would not end by then either, so the search goes on
  // from that start.
  TimeMs strict_first = kNever;
  if (config_.strict_backfill && ps.part >= 0) {
    const auto& [first, job] = first_reserved_[static_cast<size_t>(ps.part)];
    if (job != 0) strict_first = first;
  }
  auto allowed = [&](TimeMs at) {
    return at < strict_first && Profile::EndOf(at, r.time_limit_ms) > strict_first ? strict_first
                                                                                   : at;
  };
  t = allowed(t);
  // Each node's earliest start from the round's t, by position; -1: not yet asked. A node whose
  // earliest start is at or after the next round's t has the same answer then (nothing in
  // between fitted), so only the nodes passed by are asked again.
  std::vector<TimeMs> known(index_.size(), -1);
  // Alike nodes give alike answers (see Profile::ClassOf): one asked answers for its class, for
  // the round's t. Not with an exempt hold, which classes do not tell apart.
  if (exempt == 0) profile_.Classify();
  const bool by_class = exempt == 0 && profile_.Shared();
  class_answers_.assign(by_class ? profile_.classes() : 0, {-1, -1});
  auto ask = [&](NodeIndex n) {
    if (!by_class) return profile_.EarliestStart(n, need, t, r.time_limit_ms, exempt);
    auto& [at, answer] = class_answers_[profile_.ClassOf(n)];
    if (at != t) {
      at = t;
      answer = profile_.EarliestStart(n, need, t, r.time_limit_ms);
    }
    return answer;
  };
  for (uint32_t round = 0; round < config_.max_forecast_rounds; ++round) {
    earliest.clear();
    feasible.Clear();
    TimeMs forced_at = t;  // when every required node is free
    base.ForEach([&](size_t pos) {
      NodeIndex n = index_.NodeAt(static_cast<uint32_t>(pos));
      TimeMs& e = known[pos];
      if (e < t) e = ask(n);
      if (e == t) feasible.Set(pos);
      if (e != kNever) earliest.push_back(e);
      if (forced && s.forced.Test(pos)) forced_at = std::max(forced_at, e);
    });
    if (forced_at == kNever) return f;
    if (feasible.Count() >= min_nodes && forced_at == t) {
      f.nodes = index_.ChooseGangWith(feasible, min_nodes, GangLimits::Of(r), s.forced);
      if (!f.nodes.empty()) {
        f.start = t;
        f.partition = view_.partitions[static_cast<size_t>(ps.part)].name;
        for (NodeIndex n : f.nodes) {
          if (JobId j = profile_.ReleasedAt(n, t)) {
            f.waits_for = j;
            break;
          }
        }
        return f;
      }
    }
    if (earliest.size() < min_nodes) return f;
    // No gang before the min_nodes-th earliest node: jump there.
    auto nth = earliest.begin() + (min_nodes - 1);
    std::nth_element(earliest.begin(), nth, earliest.end());
    TimeMs next = std::max(*nth, forced_at);
    if (next <= t) {
      // Enough nodes at t but no gang among them (cannot happen without topology limits):
      // move past t.
      TimeMs later = kNever;
      for (TimeMs e : earliest) {
        if (e > t) later = std::min(later, e);
      }
      next = later;
    }
    if (next == kNever) return f;
    t = allowed(next);
  }
  return f;
}

Planner::Forecast Planner::EarliestStart(const JobRequest& r, TimeMs from) {
  ShapeState& s = StateOf(r);
  Forecast best;
  for (const PartState& ps : s.parts) {
    if (StaticCheck(r, s, ps).reason != JobReason::kNone) continue;
    ++forecasts_;
    Forecast f = ForecastIn(r, s, ps, from);
    // A job of a reservation starts only inside it.
    if (s.window && !s.window->first->flex && !OccurrenceAt(*s.window, f.start)) continue;
    if (f.start < best.start) best = std::move(f);
  }
  return best;
}

void Planner::Reserve(JobId id, const JobRequest& r, const Forecast& f) {
  const Need need = NeedOf(r);
  const TimeMs end = Profile::EndOf(f.start, r.time_limit_ms);
  for (NodeIndex n : f.nodes) profile_.AddHold(n, need, f.start, end, id);
  for (size_t i = 0; i < view_.partitions.size(); ++i) {
    if (view_.partitions[i].name != f.partition) continue;
    reserved_partition_[i] = 1;
    if (f.start < first_reserved_[i].first) first_reserved_[i] = {f.start, id};
  }
}

TimeMs Planner::EstimateStart(const JobRequest& r, bool may_compute) {
  ShapeState& s = StateOf(r);
  if (!s.estimated && may_compute) {
    s.estimated = true;
    s.estimate = EarliestStart(r).start;
  }
  return s.estimate;
}

bool Planner::HasReservationIn(const JobRequest& r) const {
  for (const std::string& name : r.partitions) {
    for (size_t i = 0; i < view_.partitions.size(); ++i) {
      if (reserved_partition_[i] && view_.partitions[i].name == name) return true;
    }
  }
  return false;
}

}  // namespace muster::core
