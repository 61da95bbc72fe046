#include "profile.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace muster::core {

Profile::Profile(const ClusterIndex& index, const std::vector<RunningUse>& running, TimeMs now)
    : index_(index),
      now_(now),
      releases_(index.size()),
      holds_(index.size()),
      held_(index.size()),
      steps_(index.size()),
      steps_valid_(index.size(), 0),
      class_(index.size(), 0) {
  for (const RunningUse& r : running) {
    if (r.node >= releases_.size()) continue;
    TimeMs t = std::max(r.end_ms, now + 1);
    Amount a{static_cast<int64_t>(r.cpus), static_cast<int64_t>(r.gpus),
             static_cast<int64_t>(r.mem_mb), -1};
    if (index_.HasGres(r.node)) {
      Gres g(r.gres.begin(), r.gres.end());
      Couple(r.node, &a, &g);
      a.gres = Store(std::move(g));
    }
    releases_[r.node].push_back({t, a, r.job});
  }
  for (auto& list : releases_) {
    if (list.size() > 1) {
      std::sort(list.begin(), list.end(), [](const Event& a, const Event& b) {
        return a.t != b.t ? a.t < b.t : a.job < b.job;
      });
    }
  }
}

void Profile::ClassKey(NodeIndex n, std::vector<int64_t>* key) const {
  // Capacity, free now, releases and holds (time and amount; holds sorted).
  const NodeView& v = index_.view().nodes[n];
  const Amount free = FreeNow(n);
  key->assign({static_cast<int64_t>(v.cpus), static_cast<int64_t>(v.gpus),
               static_cast<int64_t>(v.memory_mb), free.cpus, free.gpus, free.mem});
  for (const Event& e : releases_[n]) key->insert(key->end(), {e.t, e.a.cpus, e.a.gpus, e.a.mem});
  key->push_back(-1);
  hold_keys_.clear();
  for (const Hold& h : holds_[n])
    hold_keys_.push_back({h.start, h.end, h.a.cpus, h.a.gpus, h.a.mem});
  std::sort(hold_keys_.begin(), hold_keys_.end());
  for (const auto& h : hold_keys_) key->insert(key->end(), h.begin(), h.end());
}

void Profile::Classify() {
  if (classified_) return;
  classified_ = true;
  struct KeyHash {
    size_t operator()(const std::vector<int64_t>& k) const {
      uint64_t h = 0x9e3779b97f4a7c15ULL;
      for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 0x100000001b3ULL;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  std::vector<int64_t> key;
  // Classes pay only where nodes are alike: when hashing finds more distinct nodes than half of
  // them (a GPU cluster with jobs ending at different times), forecasts ask every node.
  std::vector<size_t> hashes;
  hashes.reserve(releases_.size());
  for (NodeIndex n = 0; n < releases_.size(); ++n) {
    if (index_.HasGres(n)) {
      hashes.push_back(n);
      continue;
    }
    ClassKey(n, &key);
    hashes.push_back(KeyHash{}(key));
  }
  std::sort(hashes.begin(), hashes.end());
  const size_t distinct =
      static_cast<size_t>(std::unique(hashes.begin(), hashes.end()) - hashes.begin());
  if (distinct * 2 > releases_.size()) {
    shared_ = false;
    return;
  }
  std::unordered_map<std::vector<int64_t>, uint32_t, KeyHash> by_key;
  for (NodeIndex n = 0; n < releases_.size(); ++n) {
    if (index_.HasGres(n)) {
      class_[n] = next_class_++;
      continue;
    }
    ClassKey(n, &key);
    auto [it, inserted] = by_key.try_emplace(key, next_class_);
    if (inserted) ++next_class_;
    class_[n] = it->second;
  }
}

void Profile::Reclass(NodeIndex n, char what, TimeMs from, TimeMs to, const Amount& a) {
  if (!classified_ || !shared_) return;
  if (index_.HasGres(n)) {
    class_[n] = next_class_++;
    return;
  }
  const std::array<int64_t, 6> change{
      static_cast<int64_t>(class_[n]) * 2 + (what == 'h'), from, to, a.cpus, a.gpus, a.mem};
  // A gang's nodes change alike one after another: the last answer first.
  if (!reclassed_.empty() && last_reclass_->first == change) {
    class_[n] = last_reclass_->second;
    return;
  }
  auto [it, inserted] = reclassed_.try_emplace(change, next_class_);
  if (inserted) ++next_class_;
  last_reclass_ = it;
  class_[n] = it->second;
}

int32_t Profile::Store(Gres g) {
  gres_table_.push_back(std::move(g));
  return static_cast<int32_t>(gres_table_.size() - 1);
}

void Profile::Couple(NodeIndex n, Amount* a, Gres* gres) const {
  const NodeView& v = index_.view().nodes[n];
  gres->resize(v.gres.size(), 0);
  const int64_t whole = a->gpus;
  for (size_t p = 0; p < v.gres.size(); ++p) {
    if (!v.gres[p].shards() || v.gpus == 0) continue;
    const int64_t per_gpu = std::max<int64_t>(
        1, static_cast<int64_t>(v.gres[p].free.size()) / static_cast<int64_t>(v.gpus));
    const int64_t shard_gpus = ((*gres)[p] + per_gpu - 1) / per_gpu;
    (*gres)[p] += whole * per_gpu;
    a->gpus += shard_gpus;
  }
}

void Profile::AddStart(const Placement& p, JobId job, TimeMs end) {
  for (const NodePlacement& np : p.nodes) {
    auto& list = releases_[np.node];
    Amount a{static_cast<int64_t>(np.cpus.size()), static_cast<int64_t>(np.gpus.size()),
             static_cast<int64_t>(np.mem_mb), -1};
    if (index_.HasGres(np.node)) {
      Gres g;
      for (const auto& [pool, units] : np.gres) {
        if (g.size() <= pool) g.resize(pool + 1, 0);
        g[pool] += static_cast<int64_t>(units.size());
      }
      Couple(np.node, &a, &g);
      a.gres = Store(std::move(g));
    }
    // What is free now changed with the start too (the index took it): build the steps anew.
    steps_valid_[np.node] = 0;
    Event e{std::max(end, now_ + 1), a, job};
    Reclass(np.node, 'r', e.t, e.t, a);
    auto at = std::upper_bound(list.begin(), list.end(), e.t,
                               [](TimeMs t, const Event& x) { return t < x.t; });
    list.insert(at, e);
  }
}

Profile::Amount Profile::AmountOf(NodeIndex n, const Need& need, Gres* gres) const {
  if (!index_.HasGres(n)) {
    if (!need.exclusive) {
      return {static_cast<int64_t>(need.cpus), static_cast<int64_t>(need.gpus),
              static_cast<int64_t>(need.mem_mb), -1};
    }
    const NodeView& v = index_.view().nodes[n];
    return {static_cast<int64_t>(v.cpus), static_cast<int64_t>(v.gpus),
            static_cast<int64_t>(v.memory_mb), -1};
  }
  const NodeView& v = index_.view().nodes[n];
  if (need.exclusive) {
    gres->clear();
    for (const GresView& pool : v.gres) gres->push_back(static_cast<int64_t>(pool.free.size()));
    return {static_cast<int64_t>(v.cpus), static_cast<int64_t>(v.gpus),
            static_cast<int64_t>(v.memory_mb), -1};
  }
  Amount a{static_cast<int64_t>(need.cpus), static_cast<int64_t>(need.gpus),
           static_cast<int64_t>(need.mem_mb), -1};
  // Each item from the matching pools in order, as Build picks them.
  gres->assign(v.gres.size(), 0);
  for (const GresRequest& g : need.gres) {
    int64_t left = g.count;
    for (size_t p = 0; p < v.gres.size() && left > 0; ++p) {
      if (!GresMatches(v.gres[p], g)) continue;
      int64_t take = std::min<int64_t>(left, static_cast<int64_t>(v.gres[p].free.size()));
      (*gres)[p] += take;
      left -= take;
    }
  }
  Couple(n, &a, gres);
  return a;
}

void Profile::AddHold(NodeIndex n, const Need& need, TimeMs start, TimeMs end, JobId job) {
  Gres g;
  Amount a = AmountOf(n, need, &g);
  if (index_.HasGres(n)) a.gres = Store(std::move(g));
  holds_[n].push_back({start, end, a, job});
  ApplyToSteps(n, start, end, a, -1);
  Reclass(n, 'h', start, end, a);
  held_.Set(index_.PosOf(n));
}

const std::vector<Profile::Step>& Profile::StepsOf(NodeIndex n) const {
  std::vector<Step>& steps = steps_[n];
  if (steps_valid_[n]) return steps;
  steps_valid_[n] = 1;
  steps.clear();
  struct Delta {
    TimeMs t;
    Amount a;
    int sign;
  };
  std::vector<Delta> deltas;
  deltas.reserve(releases_[n].size() + 2 * holds_[n].size());
  for (const Event& e : releases_[n]) deltas.push_back({e.t, e.a, 1});
  for (const Hold& h : holds_[n]) {
    deltas.push_back({h.start, h.a, -1});
    if (h.end != kNever) deltas.push_back({h.end, h.a, 1});
  }
  std::stable_sort(deltas.begin(), deltas.end(),
                   [](const Delta& a, const Delta& b) { return a.t < b.t; });
  // The first step holds from the beginning of time: what is free now.
  steps.push_back({std::numeric_limits<TimeMs>::min(), FreeNow(n)});
  for (const Delta& d : deltas) {
    if (steps.back().t != d.t) steps.push_back({d.t, steps.back().a});
    steps.back().a.Add(d.a, d.sign);
  }
  return steps;
}

void Profile::ApplyToSteps(NodeIndex n, TimeMs from, TimeMs to, const Amount& a, int sign) {
  if (!steps_valid_[n]) return;
  std::vector<Step>& steps = steps_[n];
  // A step that begins exactly at t (splitting the one in force there); its index.
  auto split = [&](TimeMs t) {
    const size_t k = StepAt(steps, t);
    if (steps[k].t == t) return k;
    steps.insert(steps.begin() + static_cast<ptrdiff_t>(k + 1), Step{t, steps[k].a});
    return k + 1;
  };
  const size_t first = split(from);
  const size_t last = to == kNever ? steps.size() : split(to);
  for (size_t k = first; k < last; ++k) steps[k].a.Add(a, sign);
}

size_t Profile::StepAt(const std::vector<Step>& steps, TimeMs t) {
  // The last step that begins at or before t (the first begins before every t).
  auto it = std::upper_bound(steps.begin(), steps.end(), t,
                             [](TimeMs x, const Step& s) { return x < s.t; });
  return static_cast<size_t>(it - steps.begin()) - 1;
}

Profile::Amount Profile::FreeNow(NodeIndex n) const {
  return {index_.FreeCpus(n), index_.FreeGpus(n), static_cast<int64_t>(index_.FreeMem(n)), -1};
}

Profile::Amount Profile::AvailAt(NodeIndex n, TimeMs t, JobId exempt) const {
  Amount a = FreeNow(n);
  for (const Event& e : releases_[n]) {
    if (e.t > t) break;
    a.Add(e.a);
  }
  for (const Hold& h : holds_[n]) {
    if (h.start <= t && t < h.end && h.job != exempt) a.Add(h.a, -1);
  }
  return a;
}

Profile::Gres Profile::GresAvailAt(NodeIndex n, TimeMs t, JobId exempt) const {
  Gres have;
  for (const GresView& pool : index_.view().nodes[n].gres) {
    have.push_back(static_cast<int64_t>(pool.FreeUnits()));
  }
  auto add = [&](const Amount& a, int sign) {
    if (a.gres < 0) return;
    const Gres& g = gres_table_[static_cast<size_t>(a.gres)];
    for (size_t p = 0; p < g.size() && p < have.size(); ++p) have[p] += sign * g[p];
  };
  for (const Event& e : releases_[n]) {
    if (e.t > t) break;
    add(e.a, 1);
  }
  for (const Hold& h : holds_[n]) {
    if (h.start <= t && t < h.end && h.job != exempt) add(h.a, -1);
  }
  return have;
}

bool Profile::GresCovers(const Gres& have, const Gres& want) {
  for (size_t p = 0; p < want.size(); ++p) {
    if (want[p] > (p < have.size() ? have[p] : 0)) return false;
  }
  return true;
}

bool Profile::FitsDuring(NodeIndex n, const Need& need, TimeMs t, TimeMs end, JobId* blocker,
                         JobId exempt) const {
  if (!index_.HasGres(n) && exempt == 0) {
    // Every step in force during [t, end) must cover the need.
    const Amount want = AmountOf(n, need, nullptr);
    const std::vector<Step>& steps = StepsOf(n);
    bool fits = true;
    for (size_t i = StepAt(steps, t); i < steps.size() && (steps[i].t <= t || steps[i].t < end);
         ++i) {
      if (!steps[i].a.Covers(want)) {
        fits = false;
        break;
      }
    }
    if (fits || !blocker) return fits;
    // Which hold is in the way: the walk below says (rarely asked: explanations only).
  }
  Gres want_gres;
  const Amount want = AmountOf(n, need, &want_gres);
  const bool gres = index_.HasGres(n);
  auto fits_at = [&](TimeMs at) {
    return AvailAt(n, at, exempt).Covers(want) &&
           (!gres || GresCovers(GresAvailAt(n, at, exempt), want_gres));
  };
  auto blame = [&](TimeMs at) {
    if (!blocker) return;
    for (const Hold& h : holds_[n]) {
      if (h.start <= at && at < h.end && h.job != exempt) {
        *blocker = h.job;
        return;
      }
    }
  };
  if (!fits_at(t)) {
    blame(t);
    return false;
  }
  // Availability only drops where a hold begins, so those are the only other points to check.
  for (const Hold& h : holds_[n]) {
    if (h.job != exempt && h.start > t && h.start < end && !fits_at(h.start)) {
      blame(h.start);
      return false;
    }
  }
  return true;
}

TimeMs Profile::EarliestStart(NodeIndex n, const Need& need, TimeMs from, TimeMs duration,
                              JobId exempt) const {
  const auto& rel = releases_[n];
  if (!index_.HasGres(n) && exempt == 0 && !holds_[n].empty()) {
    // The earliest start is `from` or where a step begins: slide a window over the steps,
    // restarting after each step that does not cover the need.
    const Amount want = AmountOf(n, need, nullptr);
    const std::vector<Step>& steps = StepsOf(n);
    TimeMs start = from;
    for (size_t i = StepAt(steps, from); i < steps.size(); ++i) {
      const TimeMs step_end = i + 1 < steps.size() ? steps[i + 1].t : kNever;
      if (!steps[i].a.Covers(want)) {
        if (step_end == kNever) return kNever;
        start = step_end;
        continue;
      }
      if (step_end >= EndOf(start, duration)) return start;
    }
    return kNever;
  }
  if (holds_[n].empty() && !index_.HasGres(n)) {
    // Without holds availability only grows: walk the releases until the need is covered.
    const Amount want = AmountOf(n, need, nullptr);
    Amount a = FreeNow(n);
    size_t i = 0;
    for (; i < rel.size() && rel[i].t <= from; ++i) a.Add(rel[i].a);
    if (a.Covers(want)) return from;
    for (; i < rel.size(); ++i) {
      if (rel[i].t == kNever) return kNever;
      a.Add(rel[i].a);
      if ((i + 1 == rel.size() || rel[i + 1].t != rel[i].t) && a.Covers(want)) return rel[i].t;
    }
    return kNever;
  }
  // With holds (or GRES): a start can only become possible where something is released or a
  // hold ends.
  std::vector<TimeMs> times = {from};
  for (const Event& e : rel) {
    if (e.t > from && e.t != kNever) times.push_back(e.t);
  }
  for (const Hold& h : holds_[n]) {
    if (h.end > from && h.end != kNever) times.push_back(h.end);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  for (TimeMs t : times) {
    if (FitsDuring(n, need, t, EndOf(t, duration), nullptr, exempt)) return t;
  }
  return kNever;
}

JobId Profile::ReleasedAt(NodeIndex n, TimeMs t) const {
  for (const Event& e : releases_[n]) {
    if (e.t == t) return e.job;
  }
  return 0;
}

}  // namespace muster::core
