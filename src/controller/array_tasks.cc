#include "array_tasks.h"

#include <algorithm>

#include "job_spec.h"

namespace muster::controller {

WaitingTasks WaitingTasks::Of(const v1::JobRecord& r) {
  WaitingTasks w;
  const auto& f = r.array_waiting();
  // Pairs; an odd last value (a damaged record) is ignored rather than read past.
  for (int i = 0; i + 1 < f.size(); i += 2) {
    if (f[i] <= f[i + 1]) w.ranges_.emplace_back(f[i], f[i + 1]);
  }
  return w;
}

WaitingTasks WaitingTasks::Range(uint32_t first, uint32_t last) {
  WaitingTasks w;
  if (first <= last) w.ranges_.emplace_back(first, last);
  return w;
}

WaitingTasks WaitingTasks::Clamped(const v1::JobRecord& r, uint32_t lo, uint32_t hi) {
  std::vector<std::pair<uint32_t, uint32_t>> in;
  const auto& f = r.array_waiting();
  for (int i = 0; i + 1 < f.size(); i += 2) {
    const uint32_t first = std::max(f[i], lo), last = std::min(f[i + 1], hi);
    if (first <= last) in.emplace_back(first, last);
  }
  std::sort(in.begin(), in.end());
  WaitingTasks w;
  for (const auto& [first, last] : in) {
    if (!w.ranges_.empty() && uint64_t{first} <= uint64_t{w.ranges_.back().second} + 1) {
      w.ranges_.back().second = std::max(w.ranges_.back().second, last);
    } else {
      w.ranges_.emplace_back(first, last);
    }
  }
  return w;
}

void WaitingTasks::WriteTo(v1::JobRecord* r) const {
  r->clear_array_waiting();
  for (const auto& [first, last] : ranges_) {
    r->add_array_waiting(first);
    r->add_array_waiting(last);
  }
}

uint64_t WaitingTasks::Count() const {
  uint64_t n = 0;
  for (const auto& [first, last] : ranges_) n += uint64_t{last} - first + 1;
  return n;
}

bool WaitingTasks::Contains(uint32_t pos) const {
  for (const auto& [first, last] : ranges_) {
    if (pos < first) return false;
    if (pos <= last) return true;
  }
  return false;
}

std::optional<uint32_t> WaitingTasks::Front() const {
  if (ranges_.empty()) return std::nullopt;
  return ranges_.front().first;
}

bool WaitingTasks::Erase(uint32_t pos) {
  for (size_t i = 0; i < ranges_.size(); ++i) {
    auto& [first, last] = ranges_[i];
    if (pos < first) return false;
    if (pos > last) continue;
    if (first == last) {
      ranges_.erase(ranges_.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (pos == first) {
      ++first;
    } else if (pos == last) {
      --last;
    } else {
      const uint32_t end = last;
      last = pos - 1;
      ranges_.insert(ranges_.begin() + static_cast<std::ptrdiff_t>(i) + 1, {pos + 1, end});
    }
    return true;
  }
  return false;
}

uint64_t TasksOf(const v1::JobRecord& r) {
  const auto& f = r.array_waiting();
  uint64_t n = 1;
  for (int i = 0; i + 1 < f.size(); i += 2) {
    if (f[i] <= f[i + 1]) n += uint64_t{f[i + 1]} - f[i] + 1;
  }
  return n;
}

std::shared_ptr<const std::vector<uint32_t>> ArrayTaskList(const v1::JobRecord& r) {
  if (!r.has_array()) return std::make_shared<const std::vector<uint32_t>>();
  // Accepted once already: today's max_array_size does not apply again, only its ceiling.
  constexpr uint32_t kLargestMaxArraySize = 4'000'001;
  v1::ArrayTask ignored;
  auto tasks = ParseArraySpec(r.array().spec(), kLargestMaxArraySize, &ignored);
  if (!tasks.ok()) return std::make_shared<const std::vector<uint32_t>>();
  return std::make_shared<const std::vector<uint32_t>>(std::move(*tasks));
}

v1::JobRecord SplitRecord(const v1::JobRecord& carrier, const std::vector<uint32_t>& tasks,
                          uint64_t id) {
  v1::JobRecord r = carrier;
  r.clear_array_waiting();
  r.set_id(id);
  const uint64_t pos = id - carrier.array().array_job_id();
  if (pos < tasks.size()) r.mutable_array()->set_task_id(tasks[pos]);
  return r;
}

}  // namespace muster::controller
