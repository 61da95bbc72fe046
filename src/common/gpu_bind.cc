#include "muster/common/gpu_bind.h"

#include <algorithm>

#include "muster/common/strings.h"

namespace muster {
namespace {

constexpr size_t kMaxListEntries = 4096;  // after *R repetitions

Result<uint64_t> Number(std::string_view s, const std::string& value) {
  std::optional<uint64_t> n;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    uint64_t v = 0;
    for (char c : s.substr(2)) {
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0 || v >> 60) return InvalidArgument("--gpu-bind=" + value + ": bad number");
      v = v * 16 + static_cast<uint64_t>(d);
    }
    n = v;
  } else {
    n = ParseUint(s);
  }
  if (!n) return InvalidArgument("--gpu-bind=" + value + ": bad number '" + std::string(s) + "'");
  return *n;
}

}  // namespace

Result<GpuBind> ParseGpuBind(std::string_view value) {
  const std::string whole(value);
  GpuBind b;
  std::string_view v = value;
  for (std::string_view prefix : {"verbose,", "v,"}) {
    if (StartsWith(v, prefix)) {
      b.verbose = true;
      v.remove_prefix(prefix.size());
    }
  }
  const size_t colon = v.find(':');
  const std::string kind = ToLower(std::string(v.substr(0, colon)));
  const std::string_view arg = colon == std::string_view::npos ? "" : v.substr(colon + 1);
  if (kind == "verbose" || kind == "v") {
    b.verbose = true;
    return b;
  }
  if (kind == "none" || kind == "no") {
    b.kind = GpuBind::Kind::kNone;
    return b;
  }
  if (kind == "closest" && colon == std::string_view::npos) {
    b.kind = GpuBind::Kind::kClosest;
    return b;
  }
  if (kind == "per_task" || kind == "single") {
    auto n = ParseUint(arg);
    if (!n || *n == 0 || *n > 1024) {
      return InvalidArgument("--gpu-bind=" + whole + ": expected " + kind + ":N with N from 1");
    }
    b.kind = kind == "single" ? GpuBind::Kind::kSingle : GpuBind::Kind::kPerTask;
    b.n = static_cast<uint32_t>(*n);
    return b;
  }
  if (kind == "map_gpu" || kind == "mask_gpu") {
    b.kind = kind == "map_gpu" ? GpuBind::Kind::kMap : GpuBind::Kind::kMask;
    for (const std::string& item : Split(arg, ',', true)) {
      const size_t star = item.find('*');
      MUSTER_ASSIGN_OR_RETURN(uint64_t n, Number(item.substr(0, star), whole));
      uint64_t times = 1;
      if (star != std::string::npos) {
        auto r = ParseUint(item.substr(star + 1));
        if (!r || *r == 0) return InvalidArgument("--gpu-bind=" + whole + ": bad repetition");
        times = *r;
      }
      if (b.kind == GpuBind::Kind::kMask && n == 0) {
        return InvalidArgument("--gpu-bind=" + whole + ": a mask names no GPU");
      }
      if (times > kMaxListEntries || b.list.size() + times > kMaxListEntries) {
        return InvalidArgument("--gpu-bind=" + whole + ": more than 4096 entries");
      }
      b.list.insert(b.list.end(), times, n);
    }
    if (b.list.empty()) return InvalidArgument("--gpu-bind=" + whole + ": an empty list");
    return b;
  }
  return InvalidArgument("--gpu-bind=" + whole +
                         ": expected none, verbose, closest, per_task:N, single:N, map_gpu:LIST or "
                         "mask_gpu:LIST");
}

Result<std::vector<std::string>> TaskGpus(const GpuBind& bind, uint32_t gpus_per_task,
                                          const std::vector<std::string>& step_gpus,
                                          uint32_t local) {
  const size_t count = step_gpus.size();
  GpuBind::Kind kind = bind.kind;
  uint32_t n = bind.n;
  if (kind == GpuBind::Kind::kDefault) {
    kind = gpus_per_task > 0 ? GpuBind::Kind::kPerTask : GpuBind::Kind::kNone;
    n = gpus_per_task;
  }
  if (count == 0 || kind == GpuBind::Kind::kNone) return step_gpus;
  std::vector<std::string> out;
  auto beyond = [&](uint64_t index) {
    return FailedPrecondition("--gpu-bind names GPU " + std::to_string(index) + " of the step, " +
                              "which holds " + std::to_string(count) + " here (0 is its first)");
  };
  switch (kind) {
    case GpuBind::Kind::kPerTask:
      for (uint64_t k = 0; k < std::min<uint64_t>(n, count); ++k) {
        out.push_back(step_gpus[(uint64_t{local} * n + k) % count]);
      }
      break;
    case GpuBind::Kind::kSingle:
      out.push_back(step_gpus[(local / n) % count]);
      break;
    case GpuBind::Kind::kMap: {
      const uint64_t index = bind.list[local % bind.list.size()];
      if (index >= count) return beyond(index);
      out.push_back(step_gpus[index]);
      break;
    }
    case GpuBind::Kind::kMask: {
      const uint64_t mask = bind.list[local % bind.list.size()];
      for (uint64_t i = 0; i < 64; ++i) {
        if (!(mask >> i & 1)) continue;
        if (i >= count) return beyond(i);
        out.push_back(step_gpus[i]);
      }
      break;
    }
    default:
      return step_gpus;
  }
  return out;
}

std::vector<std::string> ClosestGpus(const std::vector<std::string>& step_gpus,
                                     const std::vector<std::vector<uint32_t>>& gpu_cpus,
                                     const std::vector<uint32_t>& task_cpus) {
  std::vector<std::string> out;
  for (size_t i = 0; i < step_gpus.size(); ++i) {
    const std::vector<uint32_t>* near = i < gpu_cpus.size() ? &gpu_cpus[i] : nullptr;
    bool close = !near || near->empty();
    for (size_t k = 0; !close && k < near->size(); ++k) {
      close = std::find(task_cpus.begin(), task_cpus.end(), (*near)[k]) != task_cpus.end();
    }
    if (close) out.push_back(step_gpus[i]);
  }
  return out.empty() ? step_gpus : out;
}

}  // namespace muster
