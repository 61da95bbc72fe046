#include "profile.h"

#include <algorithm>

namespace muster::core {
namespace {

bool Covers(int64_t have_cpus, int64_t have_gpus, int64_t have_mem, int64_t cpus, int64_t gpus,
            int64_t mem) {
  return have_cpus >= cpus && have_gpus >= gpus && have_mem >= mem;
}

}  // namespace

Profile::Profile(const ClusterIndex& index, const std::vector<RunningUse>& running, TimeMs now)
    : index_(index), now_(now), releases_(index.size()), holds_(index.size()), held_(index.size()) {
  for (const RunningUse& r : running) {
    if (r.node >= releases_.size()) continue;
    TimeMs t = std::max(r.end_ms, now + 1);
    releases_[r.node].push_back({t,
                                 {static_cast<int64_t>(r.cpus), static_cast<int64_t>(r.gpus),
                                  static_cast<int64_t>(r.mem_mb)},
                                 r.job});
  }
  for (auto& list : releases_) {
    if (list.size() > 1) {
      std::sort(list.begin(), list.end(), [](const Event& a, const Event& b) {
        return a.t != b.t ? a.t < b.t : a.job < b.job;
      });
    }
  }
}

void Profile::AddStart(const Placement& p, JobId job, TimeMs end) {
  for (const NodePlacement& np : p.nodes) {
    auto& list = releases_[np.node];
    Event e{std::max(end, now_ + 1),
            {static_cast<int64_t>(np.cpus.size()), static_cast<int64_t>(np.gpus.size()),
             static_cast<int64_t>(np.mem_mb)},
            job};
    auto at = std::upper_bound(list.begin(), list.end(), e.t,
                               [](TimeMs t, const Event& x) { return t < x.t; });
    list.insert(at, e);
  }
}

Profile::Amount Profile::AmountOf(NodeIndex n, const Need& need) const {
  if (need.exclusive) {
    const NodeView& v = index_.view().nodes[n];
    return {static_cast<int64_t>(v.cpus), static_cast<int64_t>(v.gpus),
            static_cast<int64_t>(v.memory_mb)};
  }
  return {static_cast<int64_t>(need.cpus), static_cast<int64_t>(need.gpus),
          static_cast<int64_t>(need.mem_mb)};
}

void Profile::AddHold(NodeIndex n, const Need& need, TimeMs start, TimeMs end, JobId job) {
  holds_[n].push_back({start, end, AmountOf(n, need), job});
  held_.Set(index_.PosOf(n));
}

Profile::Amount Profile::AvailAt(NodeIndex n, TimeMs t) const {
  Amount a{index_.FreeCpus(n), index_.FreeGpus(n), static_cast<int64_t>(index_.FreeMem(n))};
  for (const Event& e : releases_[n]) {
    if (e.t > t) break;
    a.cpus += e.a.cpus;
    a.gpus += e.a.gpus;
    a.mem += e.a.mem;
  }
  for (const Hold& h : holds_[n]) {
    if (h.start <= t && t < h.end) {
      a.cpus -= h.a.cpus;
      a.gpus -= h.a.gpus;
      a.mem -= h.a.mem;
    }
  }
  return a;
}

bool Profile::FitsDuring(NodeIndex n, const Need& need, TimeMs t, TimeMs end,
                         JobId* blocker) const {
  const Amount want = AmountOf(n, need);
  auto fits_at = [&](TimeMs at) {
    Amount a = AvailAt(n, at);
    return Covers(a.cpus, a.gpus, a.mem, want.cpus, want.gpus, want.mem);
  };
  auto blame = [&](TimeMs at) {
    if (!blocker) return;
    for (const Hold& h : holds_[n]) {
      if (h.start <= at && at < h.end) {
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
    if (h.start > t && h.start < end && !fits_at(h.start)) {
      blame(h.start);
      return false;
    }
  }
  return true;
}

TimeMs Profile::EarliestStart(NodeIndex n, const Need& need, TimeMs from, TimeMs duration) const {
  const auto& rel = releases_[n];
  if (holds_[n].empty()) {
    // Without holds availability only grows: walk the releases until the need is covered.
    const Amount want = AmountOf(n, need);
    Amount a{index_.FreeCpus(n), index_.FreeGpus(n), static_cast<int64_t>(index_.FreeMem(n))};
    size_t i = 0;
    for (; i < rel.size() && rel[i].t <= from; ++i) {
      a.cpus += rel[i].a.cpus;
      a.gpus += rel[i].a.gpus;
      a.mem += rel[i].a.mem;
    }
    if (Covers(a.cpus, a.gpus, a.mem, want.cpus, want.gpus, want.mem)) return from;
    for (; i < rel.size(); ++i) {
      if (rel[i].t == kNever) return kNever;
      a.cpus += rel[i].a.cpus;
      a.gpus += rel[i].a.gpus;
      a.mem += rel[i].a.mem;
      if ((i + 1 == rel.size() || rel[i + 1].t != rel[i].t) &&
          Covers(a.cpus, a.gpus, a.mem, want.cpus, want.gpus, want.mem)) {
        return rel[i].t;
      }
    }
    return kNever;
  }
  // With holds: a start can only become possible where something is released or a hold ends.
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
    if (FitsDuring(n, need, t, EndOf(t, duration), nullptr)) return t;
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
